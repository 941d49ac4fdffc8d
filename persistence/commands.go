package persistence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/oklog/ulid/v2"
)

// Command is one write of the coordinator: a value holding everything the write needs (its
// time included, stamped by the caller), applied by txn.apply and by nothing else. Applying the
// same commands in the same order to the same store writes the same records, so a command log
// can be shipped to another machine and replayed there (EncodeCommand, DecodeCommand). Group
// commit batches commands.
type Command interface{ command() }

// The commands. Fields marked json:"-" are results, filled in when the command is applied.
type (
	// CreateJobs stores new jobs (parents before their children), each with its first log
	// line, and their batch if any; it fails with ErrTemplateGone when a job's template was
	// deleted since the request was checked.
	//
	// With Remember (a request's Idempotency-Key and its answer), the answer is kept for
	// AnswerTTL; a creation with a key answered within it creates nothing and fails with an
	// *AnsweredError holding that answer.
	CreateJobs struct {
		At       time.Time `json:"at"`
		Batch    *Batch    `json:"batch,omitempty"`
		Jobs     []*Job    `json:"jobs"`
		Remember *Answer   `json:"remember,omitempty"`
		// prepared holds what each job's creation writes, encoded by the submitter
		// (Store.ApplyAsync) so that the one committer does less; apply encodes it when nil.
		prepared []preparedJob
	}
	// ChangeJob stores a job's new version (its stored state was Prev), with log lines and
	// the webhook delivery its end queues.
	ChangeJob struct {
		At   time.Time `json:"at"`
		Prev JobState  `json:"prev"`
		Job  *Job      `json:"job"`
		Log  []string  `json:"log,omitempty"`
		// LogAt holds the times of the first Log lines when they happened before the change
		// (a node's, written while it rendered); the others take At.
		LogAt    []time.Time `json:"logAt,omitempty"`
		Delivery *Delivery   `json:"delivery,omitempty"`
	}
	// RetagJob gives a queued or pending job another priority and other tags, its indexes with
	// them, and a line in its log; a job in another state (or none) is left as it is, and Job
	// is then nil.
	RetagJob struct {
		At       time.Time `json:"at"`
		JobID    ulid.ULID `json:"jobId"`
		Priority int       `json:"priority"`
		Tags     []string  `json:"tags"`
		Line     string    `json:"line"`
		Job      *Job      `json:"-"`
	}
	// RecordWaits records changes of why an engine's queued jobs cannot start.
	RecordWaits struct {
		At      time.Time    `json:"at"`
		Changes []WaitChange `json:"changes"`
	}
	// AppendJobLog adds lines to a job's log.
	AppendJobLog struct {
		At    time.Time `json:"at"`
		JobID ulid.ULID `json:"jobId"`
		Lines []string  `json:"lines"`
	}
	// RecordDelivery records a webhook attempt: the delivery to try again (Retry), or the id of
	// one that is over (Done), with a line for the job's log.
	RecordDelivery struct {
		At    time.Time `json:"at"`
		JobID ulid.ULID `json:"jobId"`
		Retry *Delivery `json:"retry,omitempty"`
		Done  ulid.ULID `json:"done,omitzero"`
		Line  string    `json:"line,omitempty"`
	}
	// SetMeta records a fact about the store (a clean shutdown, a node's hold); "" removes it.
	SetMeta struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	// PutTemplate stores a template.
	PutTemplate struct {
		Template *Template `json:"template"`
	}
	// DeleteTemplate removes a template; ErrConflict while live jobs use it.
	DeleteTemplate struct {
		TeamID     ulid.ULID `json:"teamId"`
		TemplateID ulid.ULID `json:"templateId"`
	}
	// CreateFont adds a font; ErrConflict when the team has one of that file name.
	CreateFont struct {
		Font *Font `json:"font"`
	}
	// DeleteFont removes a font; Deleted is the font removed.
	DeleteFont struct {
		TeamID  ulid.ULID `json:"teamId"`
		FontID  ulid.ULID `json:"fontId"`
		Deleted *Font     `json:"-"`
	}
	// CreateSecret adds a secret; ErrConflict when the team has one of that name.
	CreateSecret struct {
		Secret *Secret `json:"secret"`
	}
	// DeleteSecret removes a secret; Deleted is the secret removed.
	DeleteSecret struct {
		TeamID   ulid.ULID `json:"teamId"`
		SecretID ulid.ULID `json:"secretId"`
		Deleted  *Secret   `json:"-"`
	}
	// IssueToken stores a token's hash for the team of that name, creating the team (with the
	// id and webhook secret given) when there is none. Team is the team, Created whether it
	// is new.
	IssueToken struct {
		At            time.Time `json:"at"`
		TeamName      string    `json:"teamName"`
		NewTeamID     ulid.ULID `json:"newTeamId"`
		WebhookSecret string    `json:"webhookSecret"`
		TokenHash     [32]byte  `json:"tokenHash"`
		ExpiresAt     time.Time `json:"expiresAt,omitzero"`
		Role          TokenRole `json:"role,omitempty"`
		Team          Team      `json:"-"`
		Created       bool      `json:"-"`
	}
	// CreateTeam makes a team of that name (with the id and webhook secret given) when there is
	// none. Team is the team, Created whether it is new.
	CreateTeam struct {
		At            time.Time `json:"at"`
		Name          string    `json:"name"`
		NewTeamID     ulid.ULID `json:"newTeamId"`
		WebhookSecret string    `json:"webhookSecret"`
		Team          Team      `json:"-"`
		Created       bool      `json:"-"`
	}
	// SetTeamPolicy changes a team's policy; Team is the team as changed (ErrNotFound when
	// there is none).
	SetTeamPolicy struct {
		TeamID ulid.ULID    `json:"teamId"`
		Change PolicyChange `json:"change"`
		Team   Team         `json:"-"`
	}
	// PutLimit creates or changes a limit.
	PutLimit struct {
		At    time.Time `json:"at"`
		Name  string    `json:"name"`
		Count int       `json:"count"`
	}
	// DeleteLimit removes a limit; Deleted is the limit removed (ErrNotFound when there is none).
	DeleteLimit struct {
		Name    string `json:"name"`
		Deleted *Limit `json:"-"`
	}
	// RevokeToken removes the token whose ID is TokenID, when TeamID is set only a token of that
	// team; Revoked is the token removed (ErrNotFound when there is none).
	RevokeToken struct {
		TokenID string    `json:"tokenId"`
		TeamID  ulid.ULID `json:"teamId,omitzero"`
		Revoked *Token    `json:"-"`
	}
	// ForgetObjects queues objects nothing refers to for deletion (keys ending in "/" are
	// folders); the object store deletes them in the background, retrying until it succeeds.
	ForgetObjects struct {
		Keys []string `json:"keys"`
	}
	// ObjectsDeleted takes objects the object store deleted off the queue.
	ObjectsDeleted struct {
		Keys []string `json:"keys"`
	}
	// ForgetAnswers removes the kept answers older than Before among up to Max after the key
	// After; Next is where the next step starts (nil at the end), Forgotten how many went.
	ForgetAnswers struct {
		Before    time.Time `json:"before"`
		After     []byte    `json:"after,omitempty"`
		Max       int       `json:"max"`
		Next      []byte    `json:"-"`
		Forgotten int       `json:"-"`
	}
	// RemoveExpired removes up to Max top-level jobs that ended before Cutoff, starting after
	// the ended-jobs key After (txn.removeExpired); Removal is what went.
	RemoveExpired struct {
		Cutoff  time.Time `json:"cutoff"`
		After   []byte    `json:"after,omitempty"`
		Max     int       `json:"max"`
		Removal Removal   `json:"-"`
	}
)

func (*CreateJobs) command()     {}
func (*ChangeJob) command()      {}
func (*AppendJobLog) command()   {}
func (*RecordWaits) command()    {}
func (*RetagJob) command()       {}
func (*RecordDelivery) command() {}
func (*SetMeta) command()        {}
func (*PutTemplate) command()    {}
func (*DeleteTemplate) command() {}
func (*CreateFont) command()     {}
func (*DeleteFont) command()     {}
func (*CreateSecret) command()   {}
func (*DeleteSecret) command()   {}
func (*IssueToken) command()     {}
func (*RevokeToken) command()    {}
func (*CreateTeam) command()     {}
func (*SetTeamPolicy) command()  {}
func (*PutLimit) command()       {}
func (*DeleteLimit) command()    {}
func (*RemoveExpired) command()  {}
func (*ForgetObjects) command()  {}
func (*ObjectsDeleted) command() {}
func (*ForgetAnswers) command()  {}

// prepare encodes what the command's jobs write.
func (c *CreateJobs) prepare() {
	c.prepared = make([]preparedJob, len(c.Jobs))
	for i, j := range c.Jobs {
		c.prepared[i] = prepareJob(j, c.At)
	}
}

// ErrTemplateGone is returned when a job's template was deleted while the job was created.
var ErrTemplateGone = errors.New("template no longer exists")

// apply carries out one command: the only place where the store is written.
func (t *txn) apply(c Command) error {
	switch c := c.(type) {
	case *CreateJobs:
		if r := c.Remember; r != nil {
			prev, err := t.answered(r.TeamID, r.Key, c.At)
			if err != nil {
				return err
			}
			if prev != nil {
				return &AnsweredError{Answer: prev}
			}
			// In UTC, as a replica that decodes the command reads its time.
			r.At = c.At.UTC()
			if err := t.putAnswer(r); err != nil {
				return err
			}
		}
		if c.Batch != nil {
			if err := t.putJSON(bucketBatches, id(c.Batch.ID), c.Batch); err != nil {
				return err
			}
			if err := t.bucket(bucketBatchesByTeam).Put(key(id(c.Batch.TeamID), id(c.Batch.ID)), []byte(c.Batch.Name)); err != nil {
				return err
			}
		}
		if err := t.checkQueueCaps(c.Jobs); err != nil {
			return err
		}
		if c.prepared == nil {
			c.prepare()
		}
		checked := make(map[ulid.ULID]bool, 1)
		for i, j := range c.Jobs {
			// Checked once per template: a batch's jobs mostly share one.
			if j.TemplateID != (ulid.ULID{}) && !checked[j.TemplateID] {
				if !t.TemplateExists(j.TeamID, j.TemplateID) {
					return fmt.Errorf("%w: template %s", ErrTemplateGone, j.TemplateID)
				}
				checked[j.TemplateID] = true
			}
			if err := t.insertJob(j, c.prepared[i]); err != nil {
				return err
			}
			// A new job's log starts at 0 without looking for earlier lines.
			if err := t.bucket(bucketLogs).Put(key(id(j.ID), u32(0)), c.prepared[i].logLine); err != nil {
				return err
			}
		}
		return nil
	case *ChangeJob:
		if c.Delivery != nil {
			if err := t.putJSON(bucketOutbox, id(c.Delivery.ID), c.Delivery); err != nil {
				return err
			}
		}
		if err := t.appendLogAt(c.Job.ID, c.At, c.Log, c.LogAt); err != nil {
			return err
		}
		t.addUsage(c.Prev, c.Job, c.At)
		if err := t.recordSweep(c.Prev, c.Job); err != nil {
			return err
		}
		return t.updateJob(c.Prev, c.Job, c.At)
	case *AppendJobLog:
		return t.appendLog(c.JobID, c.At, c.Lines...)
	case *RecordWaits:
		return t.recordWaits(c.At, c.Changes)
	case *RetagJob:
		j, err := t.retagJob(c)
		c.Job = j
		return err
	case *RecordDelivery:
		if c.Line != "" {
			if err := t.appendLog(c.JobID, c.At, c.Line); err != nil {
				return err
			}
		}
		if c.Retry != nil {
			return t.putJSON(bucketOutbox, id(c.Retry.ID), c.Retry)
		}
		return t.bucket(bucketOutbox).Delete(id(c.Done))
	case *SetMeta:
		if c.Value == "" {
			return t.bucket(bucketMeta).Delete([]byte(c.Name))
		}
		return t.bucket(bucketMeta).Put([]byte(c.Name), []byte(c.Value))
	case *PutTemplate:
		return t.putTemplate(c.Template)
	case *DeleteTemplate:
		return t.deleteTemplate(c.TeamID, c.TemplateID)
	case *CreateFont:
		return t.createFont(c.Font)
	case *DeleteFont:
		f, err := t.deleteFont(c.TeamID, c.FontID)
		c.Deleted = f
		return err
	case *CreateSecret:
		return t.createSecret(c.Secret)
	case *DeleteSecret:
		s, err := t.deleteSecret(c.TeamID, c.SecretID)
		c.Deleted = s
		return err
	case *IssueToken:
		team, created, err := t.ensureTeam(c.TeamName, c.NewTeamID, c.WebhookSecret, c.At)
		if err != nil {
			return err
		}
		c.Team, c.Created = team, created
		return t.putJSON(bucketTokens, c.TokenHash[:], Token{TeamID: team.ID, CreatedAt: c.At, ExpiresAt: c.ExpiresAt, Role: c.Role})
	case *CreateTeam:
		team, created, err := t.ensureTeam(c.Name, c.NewTeamID, c.WebhookSecret, c.At)
		c.Team, c.Created = team, created
		return err
	case *SetTeamPolicy:
		return t.setTeamPolicy(c)
	case *PutLimit:
		return t.putLimit(c)
	case *DeleteLimit:
		return t.deleteLimit(c)
	case *RevokeToken:
		tok, err := t.tokenByID(c.TokenID)
		if err != nil {
			return err
		}
		if c.TeamID != (ulid.ULID{}) && tok.TeamID != c.TeamID {
			return ErrNotFound
		}
		c.Revoked = tok
		return t.bucket(bucketTokens).Delete(tok.Hash[:])
	case *RemoveExpired:
		r, err := t.removeExpired(c.Cutoff, c.After, c.Max)
		c.Removal = r
		return err
	case *ForgetObjects:
		return t.forgetObjects(c.Keys...)
	case *ObjectsDeleted:
		for _, k := range c.Keys {
			if err := t.bucket(bucketObjectDeletes).Delete([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	case *ForgetAnswers:
		next, n, err := t.forgetAnswers(c.Before, c.After, c.Max)
		c.Next, c.Forgotten = next, n
		return err
	case *Ignored:
		return nil
	}
	return fmt.Errorf("unknown command %T", c)
}

// commandKinds names each command on the wire.
var commandKinds = map[string]reflect.Type{}

// ignorableKinds are the commands a replica that does not know them (an older release, during
// a rolling upgrade) may skip rather than stop on: losing one leaves every record whole. Their
// entries say so (formIgnorable), as Nomad's log entries carry IgnoreUnknownTypeFlag, so a
// command added later is skipped by older replicas only when its own release marked it here.
var ignorableKinds = map[string]bool{}

func init() {
	for _, c := range []Command{&CreateJobs{}, &ChangeJob{}, &AppendJobLog{}, &RecordDelivery{}, &SetMeta{},
		&PutTemplate{}, &DeleteTemplate{}, &CreateFont{}, &DeleteFont{}, &CreateSecret{}, &DeleteSecret{},
		&IssueToken{}, &RevokeToken{}, &CreateTeam{}, &SetTeamPolicy{}, &PutLimit{}, &DeleteLimit{}, &RemoveExpired{}, &ForgetAnswers{}, &ForgetObjects{}, &ObjectsDeleted{}, &RecordWaits{}, &RetagJob{}} {
		commandKinds[reflect.TypeOf(c).Elem().Name()] = reflect.TypeOf(c).Elem()
	}
	// Why queued jobs wait is worked out again from the queue; forgotten answers are forgotten
	// again by the next sweep.
	for _, c := range []Command{&RecordWaits{}, &ForgetAnswers{}} {
		ignorableKinds[reflect.TypeOf(c).Elem().Name()] = true
	}
}

// errUnknownCommand is a command of a kind, or a form, this build does not know.
var errUnknownCommand = errors.New("a command this build does not know")

// Ignored stands for a command a replica skipped: one it does not know, which its entry says
// may be skipped. It changes nothing.
type Ignored struct{ What string }

func (*Ignored) command() {}

type wireCommand struct {
	Kind    string          `json:"kind"`
	Command json.RawMessage `json:"command"`
}

// EncodeCommand writes a command for a log or another machine. JSON values inside it (asset
// values, webhook data) keep their bytes: nothing is escaped or reformatted.
func EncodeCommand(c Command) ([]byte, error) {
	body, err := MarshalExact(c)
	if err != nil {
		return nil, err
	}
	return MarshalExact(wireCommand{Kind: reflect.TypeOf(c).Elem().Name(), Command: body})
}

// DecodeCommand reads what EncodeCommand wrote.
func DecodeCommand(raw []byte) (Command, error) {
	var w wireCommand
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	typ, ok := commandKinds[w.Kind]
	if !ok {
		return nil, fmt.Errorf("decode command: %w: kind %q", errUnknownCommand, w.Kind)
	}
	c := reflect.New(typ).Interface().(Command)
	if err := json.Unmarshal(w.Command, c); err != nil {
		return nil, fmt.Errorf("decode %s: %w", w.Kind, err)
	}
	return c, nil
}

// compactJSONValues removes the insignificant spaces of the JSON values a job carries (asset
// values and params, webhook data), so a job stores the same bytes whether it came from a
// request or from a command read back from the wire (JSON encoding compacts raw values).
// Values are replaced only when they change: records in the store are compact already, and a
// job's spec may be read elsewhere meanwhile.
func compactJSONValues(j *Job) {
	compact := func(raw *json.RawMessage) {
		if !bytes.ContainsAny(*raw, " \t\r\n") {
			return
		}
		var buf bytes.Buffer
		if json.Compact(&buf, *raw) == nil && buf.Len() != len(*raw) {
			*raw = buf.Bytes()
		}
	}
	for i := range j.Spec.Assets {
		compact(&j.Spec.Assets[i].Value)
		compact(&j.Spec.Assets[i].Params)
	}
	if j.Spec.Webhook != nil {
		compact(&j.Spec.Webhook.Data)
	}
}

// MarshalExact is json.Marshal without HTML escaping (<, > and & stay as they are), so raw JSON
// values keep their bytes and URLs stay readable.
func MarshalExact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
