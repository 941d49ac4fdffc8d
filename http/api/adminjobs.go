package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/persistence"
)

// The farm admin's view of every team's jobs: GET /api/v2/admin/jobs lists them (GET /jobs's
// parameters, and team, engine and pool), and the admin acts on any of them through
// /api/v2/admin/jobs/{id}/..., the team routes run for the job's team.

// teamRef names a job's team in the admin's views.
type teamRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// teamNames reads every team's name, by id.
func (s *Server) teamNames() (map[ulid.ULID]string, error) {
	teams, err := s.Store.Teams()
	names := make(map[ulid.ULID]string, len(teams))
	for _, t := range teams {
		names[t.ID] = t.Name
	}
	return names, err
}

// withTeams names each job's team in its view.
func (s *Server) withTeams(views []*jobView, jobs []*persistence.Job) error {
	names, err := s.teamNames()
	if err != nil {
		return err
	}
	templates := map[ulid.ULID]string{}
	for i, j := range jobs {
		views[i].Team = &teamRef{ID: j.TeamID.String(), Name: names[j.TeamID]}
		if j.TemplateID == (ulid.ULID{}) {
			continue
		}
		name, known := templates[j.TemplateID]
		if !known {
			if tpl, err := s.Store.Template(j.TeamID, j.TemplateID); err == nil {
				name = tpl.DisplayName
			}
			templates[j.TemplateID] = name
		}
		views[i].TemplateName = name
	}
	return nil
}

func (s *Server) listAllJobs(r *request) { s.listJobsOf(r, true) }

// anyTeamsJob makes a team route serve the farm's admin for any team's job: the job the path
// names decides the team the route runs for.
func (s *Server) anyTeamsJob(h func(*request)) func(*request) {
	return func(r *request) {
		id, ok := pathID(r)
		if !ok {
			return
		}
		j, err := s.Store.Job(id)
		if err != nil || j.Kind == persistence.KindChunk {
			r.failErr(errOr(err, persistence.ErrNotFound), notFound("job", id.String()))
			return
		}
		r.team = j.TeamID
		h(r)
	}
}

// errOr is err, or other when err is nil.
func errOr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

// getAnyJob is GET /jobs/{id} for the admin: the job with its team.
func (s *Server) getAnyJob(r *request) {
	j, ok := s.loadJob(r)
	if !ok {
		return
	}
	v, err := s.fullJobView(j)
	if err == nil {
		err = s.withTeams([]*jobView{v}, []*persistence.Job{j})
	}
	if err != nil {
		r.failErr(err, nil)
		return
	}
	r.json(http.StatusOK, v)
}

// sendChunkAgain takes a split job's chunk back from the node rendering it and queues it again,
// without counting the attempt: a chunk stuck on a slow node goes to the next free slot.
func (s *Server) sendChunkAgain(r *request) {
	j, ok := s.loadJob(r)
	if !ok {
		return
	}
	text, _ := r.ctx.UserValue("index").(string)
	index, err := strconv.Atoi(text)
	switch {
	case !j.Split():
		r.fail(newError(http.StatusConflict, codeConflict, "job %s is not split into chunks", j.ID))
		return
	case err != nil || index < 0 || index >= len(j.Children):
		r.fail(newError(http.StatusNotFound, codeNotFound, "job %s has chunks 0 to %d, not %q", j.ID, len(j.Children)-1, text))
		return
	}
	chunk, err := s.Coordinator.SendAgain(j.Children[index], s.actingTeam(r))
	if errors.Is(err, actors.ErrNotRendering) {
		r.fail(newError(http.StatusConflict, codeConflict, "chunk %d of job %s is %s: only a rendering chunk is sent again", index, j.ID, chunk.State))
		return
	}
	if err != nil {
		r.failErr(err, nil)
		return
	}
	views, _ := chunkViews([]*persistence.Job{chunk})
	views[0].Index = index
	r.json(http.StatusOK, views[0])
}
