package api

import (
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
)

// maxLimitCount bounds a limit's count.
const maxLimitCount = 1_000_000

// limitView is a limit as the admin routes show it: its count, and the renders holding it now.
type limitView struct {
	Name      string    `json:"name"`
	Count     int       `json:"count"`
	InUse     int       `json:"inUse"`
	UpdatedAt time.Time `json:"updatedAt"`
}

func (s *Server) limitViewOf(l persistence.Limit) limitView {
	return limitView{Name: l.Name, Count: l.Count, InUse: s.Coordinator.LimitUses()[l.Name].Held, UpdatedAt: l.UpdatedAt.UTC()}
}

func (s *Server) listLimits(r *request) {
	limits, err := s.Store.Limits()
	if err != nil {
		r.failErr(err, nil)
		return
	}
	out := make([]limitView, len(limits))
	for i, l := range limits {
		out[i] = s.limitViewOf(l)
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
	r.json(http.StatusOK, s.limitViewOf(persistence.Limit{Name: name, Count: count, UpdatedAt: s.Clock.Now()}))
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
