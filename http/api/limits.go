package api

import (
	"errors"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
)

// maxLimitCount bounds a limit's count.
const maxLimitCount = 1_000_000

// limitView is a limit as the admin routes show it: its count, and the renders holding it now.
type limitView struct {
	Name      string         `json:"name"`
	Count     int            `json:"count"`
	InUse     int            `json:"inUse"`
	HeldBy    []renderHolder `json:"heldBy"`
	UpdatedAt time.Time      `json:"updatedAt"`
}

// renderHolder is a render holding a limit, named as its client knows it: the job, and for a
// split job's chunk its index.
type renderHolder struct {
	Job   string `json:"job"`
	Chunk *int   `json:"chunk,omitempty"`
	Name  string `json:"name,omitempty"`
	Team  string `json:"team"`
}

func (s *Server) limitViewOf(l persistence.Limit, uses map[string]actors.LimitUse) limitView {
	use := uses[l.Name]
	return limitView{Name: l.Name, Count: l.Count, InUse: use.Held, HeldBy: s.holders(use.Holders), UpdatedAt: l.UpdatedAt.UTC()}
}

// holders names the jobs and chunks holding a limit; one ended since the scheduler published
// its holders is still named, as it was.
func (s *Server) holders(ids []ulid.ULID) []renderHolder {
	out := make([]renderHolder, 0, len(ids))
	jobs, err := s.Store.Jobs(ids)
	for i, jobID := range ids {
		h := renderHolder{Job: jobID.String()}
		if err == nil && jobs[i] != nil {
			j := jobs[i]
			h.Team = j.TeamID.String()
			if ref := s.clientJob(j); ref.job != nil {
				h.Job, h.Name, h.Chunk = ref.job.ID.String(), ref.job.Name, ref.chunk
			}
		}
		out = append(out, h)
	}
	return out
}

// clientJobRef is the job its client made that a job or chunk belongs to.
type clientJobRef struct {
	job   *persistence.Job
	chunk *int
}

// clientJob finds the job a client knows for j: j itself, or for a chunk its split job and
// its index (job nil when the split job is gone).
func (s *Server) clientJob(j *persistence.Job) clientJobRef {
	if j.Kind != persistence.KindChunk {
		return clientJobRef{job: j}
	}
	parent, err := s.Store.Job(j.ParentID)
	if err != nil {
		return clientJobRef{}
	}
	index := slices.Index(parent.Children, j.ID)
	if index < 0 {
		return clientJobRef{}
	}
	return clientJobRef{job: parent, chunk: &index}
}

func (s *Server) listLimits(r *request) {
	limits, err := s.Store.Limits()
	if err != nil {
		r.failErr(err, nil)
		return
	}
	uses := s.Coordinator.LimitUses()
	out := make([]limitView, len(limits))
	for i, l := range limits {
		out[i] = s.limitViewOf(l, uses)
	}
	r.json(http.StatusOK, out)
}

// limitName is the path's {name}, refused when no limit could be named so.
func limitName(r *request) (string, bool) {
	name, _ := r.ctx.UserValue("name").(string)
	if !validate.ValidTag(name) {
		r.fail(badField("name", "a limit's name must match ^[a-zA-Z0-9_-]{1,64}$"))
		return "", false
	}
	return name, true
}

// putLimit makes a limit or changes its count.
func (s *Server) putLimit(r *request) {
	name, ok := limitName(r)
	if !ok {
		return
	}
	var body struct {
		Count *float64 `json:"count"`
	}
	if !r.decode(&body) {
		return
	}
	if body.Count == nil || *body.Count != math.Trunc(*body.Count) || *body.Count < 0 || *body.Count > maxLimitCount {
		r.fail(badField("count", "is required: a whole number from 0 to 1000000, the renders that may hold the limit at once"))
		return
	}
	count := int(*body.Count)
	if err := s.Coordinator.SetLimit(name, count); err != nil {
		r.failErr(err, nil)
		return
	}
	r.logger().Info("limit set", "limit", name, "count", count)
	r.json(http.StatusOK, s.limitViewOf(persistence.Limit{Name: name, Count: count, UpdatedAt: s.Clock.Now()}, s.Coordinator.LimitUses()))
}

// deleteLimit removes a limit; jobs holding it wait until it is made again.
func (s *Server) deleteLimit(r *request) {
	name, ok := limitName(r)
	if !ok {
		return
	}
	if _, err := s.Coordinator.DeleteLimit(name); err != nil {
		if errors.Is(err, persistence.ErrNotFound) {
			r.fail(newError(http.StatusNotFound, codeNotFound, "no limit %q", name))
			return
		}
		r.failErr(err, nil)
		return
	}
	r.logger().Info("limit deleted", "limit", name)
	r.ctx.SetStatusCode(http.StatusNoContent)
}
