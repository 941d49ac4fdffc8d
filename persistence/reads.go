package persistence

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/oklog/ulid/v2"
)

// The store's named reads: what the rest of the farm reads, each a query of its own in a read
// transaction of its own, as every write is a named command (commands.go). No transaction leaves
// this package, so a read is always one of these, and a replicated store can answer each where
// it is current enough.

// Job reads a job of any team.
func (s *Store) Job(jobID ulid.ULID) (j *Job, err error) {
	err = s.view(func(t *txn) error { j, err = t.Job(jobID); return err })
	return j, err
}

// TeamJob reads a job of a team as its client knows it (txn.ClientJob).
func (s *Store) TeamJob(teamID, jobID ulid.ULID) (j *Job, err error) {
	err = s.view(func(t *txn) error { j, err = t.ClientJob(teamID, jobID); return err })
	return j, err
}

// Jobs reads jobs by id, in the order given, nil where there is none.
func (s *Store) Jobs(ids []ulid.ULID) ([]*Job, error) {
	out := make([]*Job, len(ids))
	err := s.view(func(t *txn) error {
		for i, jobID := range ids {
			j, err := t.Job(jobID)
			switch {
			case err == nil:
				out[i] = j
			case !errors.Is(err, ErrNotFound):
				return err
			}
		}
		return nil
	})
	return out, err
}

// TeamJobsExist reports, for each id, whether the team's client knows that job.
func (s *Store) TeamJobsExist(teamID ulid.ULID, ids []ulid.ULID) []bool {
	out := make([]bool, len(ids))
	s.view(func(t *txn) error {
		for i, jobID := range ids {
			_, err := t.ClientJob(teamID, jobID)
			out[i] = err == nil
		}
		return nil
	})
	return out
}

// ListJobs reads a page of a team's jobs and how many match in all.
func (s *Store) ListJobs(q JobQuery) (jobs []*Job, total int, err error) {
	err = s.view(func(t *txn) error { jobs, total, err = t.ListJobs(q); return err })
	return jobs, total, err
}

// JobCountsByState counts every job by state.
func (s *Store) JobCountsByState() (counts map[JobState]int) {
	s.view(func(t *txn) error { counts = t.JobCountsByState(); return nil })
	return counts
}

// QueuedJobs calls fn with the queue entry of every queued job, in pickup order.
func (s *Store) QueuedJobs(fn func(QueueEntry) error) error {
	return s.view(func(t *txn) error { return t.QueuedJobs(fn) })
}

// JobsIn calls fn with every job in a live state (pending, rendering).
func (s *Store) JobsIn(state JobState, fn func(*Job) error) error {
	return s.view(func(t *txn) error { return t.JobsIn(state, fn) })
}

// BatchExists reports whether a batch is stored.
func (s *Store) BatchExists(batchID ulid.ULID) (found bool) {
	s.view(func(t *txn) error { found = t.BatchExists(batchID); return nil })
	return found
}

// TeamBatch reads a team's batch; another team's is ErrNotFound.
func (s *Store) TeamBatch(teamID, batchID ulid.ULID) (b *Batch, err error) {
	err = s.view(func(t *txn) error { b, err = t.TeamBatch(teamID, batchID); return err })
	return b, err
}

// BatchJobs lists a batch's top-level jobs in request order, with their states.
func (s *Store) BatchJobs(batchID ulid.ULID) (jobs []BatchJob) {
	s.view(func(t *txn) error { jobs = t.BatchJobs(batchID); return nil })
	return jobs
}

// BatchMember is a batch's top-level job with its place in the request.
type BatchMember struct {
	Index int
	Job   *Job
}

// BatchMembers reads a batch's top-level jobs in request order.
func (s *Store) BatchMembers(batchID ulid.ULID) (members []BatchMember, err error) {
	err = s.view(func(t *txn) error {
		for _, bj := range t.BatchJobs(batchID) {
			j, err := t.Job(bj.JobID)
			if err != nil {
				return err
			}
			members = append(members, BatchMember{Index: bj.Index, Job: j})
		}
		return nil
	})
	return members, err
}

// Deliveries reads every webhook delivery still due.
func (s *Store) Deliveries() (all []*Delivery, err error) {
	err = s.view(func(t *txn) error { all, err = t.Deliveries(); return err })
	return all, err
}

// Template reads a team's template.
func (s *Store) Template(teamID, templateID ulid.ULID) (tpl *Template, err error) {
	err = s.view(func(t *txn) error { tpl, err = t.Template(teamID, templateID); return err })
	return tpl, err
}

// Templates reads a team's templates, oldest first.
func (s *Store) Templates(teamID ulid.ULID) (all []*Template, err error) {
	err = s.view(func(t *txn) error { all, err = t.Templates(teamID); return err })
	return all, err
}

// AllTemplates calls fn with every team's templates.
func (s *Store) AllTemplates(fn func(*Template) error) error {
	return s.view(func(t *txn) error { return t.AllTemplates(fn) })
}

// TemplateUsage adds up a team's templates, leaving out the one except names.
func (s *Store) TemplateUsage(teamID, except ulid.ULID) (usage TemplateUsage, err error) {
	err = s.view(func(t *txn) error { usage, err = t.TemplateUsage(teamID, except); return err })
	return usage, err
}

// Font reads a team's font.
func (s *Store) Font(teamID, fontID ulid.ULID) (f *Font, err error) {
	err = s.view(func(t *txn) error { f, err = t.Font(teamID, fontID); return err })
	return f, err
}

// Fonts reads a team's fonts.
func (s *Store) Fonts(teamID ulid.ULID) (all []*Font, err error) {
	err = s.view(func(t *txn) error { all, err = t.Fonts(teamID); return err })
	return all, err
}

// Secrets reads a team's secrets (their values sealed).
func (s *Store) Secrets(teamID ulid.ULID) (all []*Secret, err error) {
	err = s.view(func(t *txn) error { all, err = t.Secrets(teamID); return err })
	return all, err
}

// Team reads a team.
func (s *Store) Team(teamID ulid.ULID) (team Team, err error) {
	err = s.view(func(t *txn) error { team, err = t.Team(teamID); return err })
	return team, err
}

// Teams lists every team, by name.
func (s *Store) Teams() (all []Team, err error) {
	err = s.view(func(t *txn) error { all, err = t.Teams(); return err })
	return all, err
}

// TeamByName reads the team of a name; ErrNotFound when there is none.
func (s *Store) TeamByName(name string) (team Team, err error) {
	err = s.view(func(t *txn) error { team, err = t.TeamByName(name); return err })
	return team, err
}

// Waiting counts each team's jobs and chunks waiting to render.
func (s *Store) Waiting(teams []ulid.ULID) map[ulid.ULID]WaitingCounts {
	out := make(map[ulid.ULID]WaitingCounts, len(teams))
	s.view(func(t *txn) error {
		for _, team := range teams {
			out[team] = t.Waiting(team)
		}
		return nil
	})
	return out
}

// HasTeams reports whether any team exists.
func (s *Store) HasTeams() (found bool) {
	s.view(func(t *txn) error { found = t.HasTeams(); return nil })
	return found
}

// Token reads a token by its hash.
func (s *Store) Token(hash [32]byte) (tok *Token, err error) {
	err = s.view(func(t *txn) error { tok, err = t.Token(hash); return err })
	return tok, err
}

// Tokens reads every token with its team.
func (s *Store) Tokens() (all []TeamToken, err error) {
	err = s.view(func(t *txn) error { all, err = t.Tokens(); return err })
	return all, err
}

// Meta reads a value the farm keeps for itself ("" when unset).
func (s *Store) Meta(name string) (value string) {
	s.view(func(t *txn) error { value = t.Meta(name); return nil })
	return value
}

// MetaPrefixed reads every value the farm keeps under names starting with prefix, by name
// without the prefix; empty values are left out.
func (s *Store) MetaPrefixed(prefix string) map[string]string {
	out := map[string]string{}
	s.view(func(t *txn) error {
		c := t.bucket(bucketMeta).Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			if len(v) > 0 {
				out[string(k[len(prefix):])] = string(v)
			}
		}
		return nil
	})
	return out
}

// TeamReads reads one team's records together, in one read transaction, so that what they read
// agrees: a request's validation, a render's task, a webhook's request. It is valid only inside
// the function ReadTeam gives it to.
type TeamReads struct {
	t    *txn
	team ulid.ULID
}

// ReadTeam runs fn with the reads of one team.
func (s *Store) ReadTeam(teamID ulid.ULID, fn func(TeamReads) error) error {
	return s.view(func(t *txn) error { return fn(TeamReads{t: t, team: teamID}) })
}

// Team reads the team.
func (r TeamReads) Team() (Team, error) { return r.t.Team(r.team) }

// Template reads one of the team's templates, shared with other readers: it must not be modified.
func (r TeamReads) Template(templateID ulid.ULID) (*Template, error) {
	return r.t.SharedTemplate(r.team, templateID)
}

// AsRendered is j as it renders: a chunk, whose record holds only its frames, with its job's spec
// (template, assets, fonts, settings) and its own frames; any other job as it is.
func (r TeamReads) AsRendered(j *Job) (*Job, error) {
	if j.Kind != KindChunk {
		return j, nil
	}
	parent, err := r.Job(j.ParentID)
	if err != nil {
		return nil, fmt.Errorf("the job of chunk %s: %w", j.ID, err)
	}
	c := *j
	c.Spec = parent.Spec
	c.Spec.Settings.Frames = j.Spec.Settings.Frames
	c.Spec.Upload, c.Spec.Webhook = nil, nil
	return &c, nil
}

// Job reads one of the team's jobs.
func (r TeamReads) Job(jobID ulid.ULID) (*Job, error) { return r.t.TeamJob(r.team, jobID) }

// Font reads the team's font of a file name.
func (r TeamReads) Font(fileName string) (*Font, error) { return r.t.FontByFileName(r.team, fileName) }

// Fonts reads the team's whole font library, oldest first.
func (r TeamReads) Fonts() ([]*Font, error) { return r.t.Fonts(r.team) }

// LimitExists reports whether the farm has a limit of that name (limits are the farm's, not a
// team's).
func (r TeamReads) LimitExists(name string) bool {
	_, err := r.t.Limit(name)
	return err == nil
}

// Secret reads the team's secret of a name (its value sealed).
func (r TeamReads) Secret(name string) (*Secret, error) { return r.t.SecretByName(r.team, name) }
