package api

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
)

// maxUsageSpan bounds the time one usage question covers.
const maxUsageSpan = 400 * 24 * time.Hour

// usageView is what teams used of the farm over a time: per team, in all, per engine and hour
// by hour (render time, to chart).
type usageView struct {
	From  time.Time       `json:"from"`
	To    time.Time       `json:"to"`
	Teams []teamUsageView `json:"teams"`
}

type teamUsageView struct {
	Team     teamRef            `json:"team"`
	Total    persistence.Usage  `json:"total"`
	Engines  []engineUsageView  `json:"engines"`
	Hours    []hourlyRenderTime `json:"hours"`
	byEngine map[string]*engineUsageView
}

type engineUsageView struct {
	Engine string `json:"engine"`
	persistence.Usage
}

type hourlyRenderTime struct {
	At            time.Time `json:"at"`
	RenderSeconds float64   `json:"renderSeconds"`
}

// usagePeriod reads from and to (RFC 3339; the last 24 hours by default).
func (s *Server) usagePeriod(r *request) (from, to time.Time, ok bool) {
	to = s.Clock.Now().UTC()
	from = to.Add(-24 * time.Hour)
	for name, dst := range map[string]*time.Time{"from": &from, "to": &to} {
		if v := r.ctx.QueryArgs().Peek(name); v != nil {
			t, err := time.Parse(time.RFC3339Nano, string(v))
			if err != nil {
				r.fail(badField(name, "must be a date-time such as 2026-01-31T12:00:00Z"))
				return from, to, false
			}
			*dst = t.UTC()
		}
	}
	if !from.Before(to) || to.Sub(from) > maxUsageSpan {
		r.fail(badField("from", "must be before to, and at most 400 days before it"))
		return from, to, false
	}
	return from, to, true
}

// usage answers one team's usage (team set), or every team's.
func (s *Server) usage(r *request, team ulid.ULID) {
	from, to, ok := s.usagePeriod(r)
	if !ok {
		return
	}
	records, err := s.Store.Usage(from, to, team)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	names, err := s.teamNames()
	if err != nil {
		r.failErr(err, nil)
		return
	}
	teams := map[ulid.ULID]*teamUsageView{}
	if team != (ulid.ULID{}) {
		teams[team] = &teamUsageView{Team: teamRef{ID: team.String(), Name: names[team]}}
	}
	for _, rec := range records {
		v := teams[rec.Team]
		if v == nil {
			v = &teamUsageView{Team: teamRef{ID: rec.Team.String(), Name: names[rec.Team]}}
			teams[rec.Team] = v
		}
		v.Total.Add(rec.Usage)
		if v.byEngine == nil {
			v.byEngine = map[string]*engineUsageView{}
		}
		e := v.byEngine[rec.Engine]
		if e == nil {
			e = &engineUsageView{Engine: rec.Engine}
			v.byEngine[rec.Engine] = e
		}
		e.Add(rec.Usage)
		if n := len(v.Hours); n > 0 && v.Hours[n-1].At.Equal(rec.Hour) {
			v.Hours[n-1].RenderSeconds += rec.RenderSeconds
		} else {
			v.Hours = append(v.Hours, hourlyRenderTime{At: rec.Hour, RenderSeconds: rec.RenderSeconds})
		}
	}
	out := usageView{From: from, To: to, Teams: []teamUsageView{}}
	for _, v := range teams {
		v.Engines = []engineUsageView{}
		for _, e := range v.byEngine {
			v.Engines = append(v.Engines, *e)
		}
		slices.SortFunc(v.Engines, func(a, b engineUsageView) int { return cmp.Compare(a.Engine, b.Engine) })
		if v.Hours == nil {
			v.Hours = []hourlyRenderTime{}
		}
		out.Teams = append(out.Teams, *v)
	}
	slices.SortFunc(out.Teams, func(a, b teamUsageView) int { return cmp.Compare(a.Team.Name, b.Team.Name) })
	r.json(http.StatusOK, out)
}

// teamUsage is GET /api/v2/usage: the team's own.
func (s *Server) teamUsage(r *request) { s.usage(r, r.team) }

// farmUsage is GET /api/v2/admin/usage: every team's, or one's (?team=id or name).
func (s *Server) farmUsage(r *request) {
	var team ulid.ULID
	if ref := string(r.ctx.QueryArgs().Peek("team")); ref != "" {
		t, err := s.teamByRef(ref)
		if err != nil {
			r.fail(badField("team", "no team "+ref))
			return
		}
		team = t.ID
	}
	s.usage(r, team)
}
