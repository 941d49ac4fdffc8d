package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
)

// PolicyView is a team's policy as the admin routes show it (and `framefarm team` reads it):
// every field, at its value or its default (null: no cap, any pool).
type PolicyView struct {
	Weight          int       `json:"weight"`
	GuaranteedSlots int       `json:"guaranteedSlots"`
	MaxRunning      *int      `json:"maxRunning"`
	MaxQueuedJobs   *int      `json:"maxQueuedJobs"`
	MaxQueuedChunks *int      `json:"maxQueuedChunks"`
	MaxPriority     *int      `json:"maxPriority"`
	Pools           *[]string `json:"pools"`
	Limits          *[]string `json:"limits"`
}

func PolicyViewFrom(p persistence.TeamPolicy) PolicyView {
	return PolicyView{Weight: p.WeightOrDefault(), GuaranteedSlots: p.Guaranteed(), MaxRunning: p.MaxRunning,
		MaxQueuedJobs: p.MaxQueuedJobs, MaxQueuedChunks: p.MaxQueuedChunks, MaxPriority: p.MaxPriority, Pools: p.Pools,
		Limits: p.Limits}
}

// TeamView is a team as the farm's admin sees it (GET /api/v2/admin/teams): its policy, and
// what it holds of the farm now.
type TeamView struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	CreatedAt time.Time  `json:"createdAt"`
	Policy    PolicyView `json:"policy"`
	// Running are the render slots the team's renders hold (chunks included); Share their part
	// of every slot held now.
	Running int                       `json:"running"`
	Share   float64                   `json:"share"`
	Waiting persistence.WaitingCounts `json:"queued"`
}

// teamViews describes teams with their loads.
func (s *Server) teamViews(teams []persistence.Team) []TeamView {
	ids := make([]ulid.ULID, len(teams))
	for i, t := range teams {
		ids[i] = t.ID
	}
	waiting := s.Store.Waiting(ids)
	loads := s.Coordinator.TeamLoads()
	running := 0
	for _, l := range loads {
		running += l.Running
	}
	out := make([]TeamView, len(teams))
	for i, t := range teams {
		v := TeamView{ID: t.ID.String(), Name: t.Name, CreatedAt: t.CreatedAt.UTC(), Policy: PolicyViewFrom(t.Policy),
			Running: loads[t.ID].Running, Waiting: waiting[t.ID]}
		if running > 0 {
			v.Share = float64(v.Running) / float64(running)
		}
		out[i] = v
	}
	return out
}

func (s *Server) listTeams(r *request) {
	teams, err := s.Store.Teams()
	if err != nil {
		r.failErr(err, nil)
		return
	}
	r.json(http.StatusOK, s.teamViews(teams))
}

// createTeam makes a team with no token yet (POST /api/v2/admin/teams): its policy can be set
// before anyone submits. A team of that name answers 409.
func (s *Server) createTeam(r *request) {
	var body struct {
		Name string `json:"name"`
	}
	if !r.decode(&body) {
		return
	}
	name, ok := teamName(r, "name", body.Name)
	if !ok {
		return
	}
	team, created, err := s.Coordinator.CreateTeam(name)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	if !created {
		r.fail(newError(http.StatusConflict, codeConflict, "team %q exists (%s)", team.Name, team.ID))
		return
	}
	r.logger().Info("team created", "for_team", team.ID.String(), "name", team.Name)
	r.json(http.StatusCreated, s.teamViews([]persistence.Team{team})[0])
}

// teamOf finds the team a path's {team} names: its id or its name.
func (s *Server) teamOf(r *request) (persistence.Team, bool) {
	ref, _ := r.ctx.UserValue("team").(string)
	team, err := s.teamByRef(ref)
	if errors.Is(err, persistence.ErrNotFound) {
		r.fail(newError(http.StatusNotFound, codeNotFound, "no team %q (framefarm team create NAME makes one, as does its first token)", ref))
		return team, false
	}
	if err != nil {
		r.failErr(err, nil)
		return team, false
	}
	return team, true
}

// setTeamPolicy changes a team's policy: the fields the body gives, null putting one back at
// its default.
func (s *Server) setTeamPolicy(r *request) {
	team, ok := s.teamOf(r)
	if !ok {
		return
	}
	body, e := r.body(s.cfg.MaxBodyBytes)
	if e != nil {
		r.fail(e)
		return
	}
	change, verr := validate.ParsePolicyChange(body)
	if verr != nil {
		r.fail(fromValidation(verr))
		return
	}
	changed, err := s.Coordinator.SetTeamPolicy(team.ID, change)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	policy, _ := marshal(changed.Policy)
	r.logger().Info("team policy changed", "for_team", team.ID.String(), "policy", string(policy))
	r.json(http.StatusOK, s.teamViews([]persistence.Team{changed})[0])
}

// teamByRef reads the team a reference names: its id, or its name.
func (s *Server) teamByRef(ref string) (persistence.Team, error) {
	if id, ok := persistence.ParseID(ref); ok {
		return s.Store.Team(id)
	}
	return s.Store.TeamByName(ref)
}
