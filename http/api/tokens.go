package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
)

// Tokens: the farm's admin makes them for any team (POST /api/v2/admin/tokens, behind
// "framefarm token create" for a running server), a team's manager for its own team
// (/api/v2/tokens). Each has a role (persistence.TokenRole): what it may do in its team.

// tokenRequest is the body of a token's creation; Team only at the admin's route.
type tokenRequest struct {
	Team      string     `json:"team"`
	Role      string     `json:"role"`
	ExpiresAt *time.Time `json:"expiresAt"`
}

// checkTokenRequest reads a creation's role and expiry.
func (s *Server) checkTokenRequest(r *request, body tokenRequest) (persistence.TokenRole, time.Time, bool) {
	role, ok := persistence.ParseTokenRole(body.Role)
	if !ok {
		r.fail(badField("role", "must be viewer, submitter (the default) or manager"))
		return "", time.Time{}, false
	}
	var expires time.Time
	if body.ExpiresAt != nil {
		if expires = body.ExpiresAt.UTC(); !expires.After(s.Clock.Now()) {
			r.fail(badField("expiresAt", "must be in the future"))
			return "", time.Time{}, false
		}
	}
	return role, expires, true
}

// createToken makes a team (if new) and a token for it.
func (s *Server) createToken(r *request) {
	var body tokenRequest
	if !r.decode(&body) {
		return
	}
	name, ok := teamName(r, "team", body.Team)
	if !ok {
		return
	}
	role, expires, ok := s.checkTokenRequest(r, body)
	if !ok {
		return
	}
	s.issue(r, name, expires, role)
}

// teamName is a team's name as a request gives it in field, refused unless 1 to 128 characters.
func teamName(r *request, field, name string) (string, bool) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 128 {
		r.fail(badField(field, "must be 1 to 128 characters"))
		return "", false
	}
	return name, true
}

// createTeamToken makes a token for the manager's own team.
func (s *Server) createTeamToken(r *request) {
	if !r.manages() {
		return
	}
	var body tokenRequest
	if !r.decode(&body) {
		return
	}
	if body.Team != "" {
		r.fail(badField("team", "a manager makes tokens of its own team: leave team out"))
		return
	}
	role, expires, ok := s.checkTokenRequest(r, body)
	if !ok {
		return
	}
	team, err := s.Store.Team(r.team)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	s.issue(r, team.Name, expires, role)
}

// issue makes a token and answers with it, shown this once, and the team's webhook signing
// secret (as `framefarm token create` prints it).
func (s *Server) issue(r *request, teamName string, expires time.Time, role persistence.TokenRole) {
	issued, err := s.Coordinator.IssueToken(teamName, expires, role)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	view := tokenViewOf(issued.Record, issued.Team, s.Clock.Now())
	r.logger().Info("token created", "for_team", issued.Team.ID.String(), "token_id", view.ID, "role", string(role))
	r.json(http.StatusCreated, struct {
		tokenView
		Token                string `json:"token"`
		TeamCreated          bool   `json:"teamCreated"`
		WebhookSigningSecret string `json:"webhookSigningSecret"`
	}{view, issued.Token, issued.TeamCreated, issued.Team.WebhookSecret})
}

// tokenView describes a token without revealing it: its id is the start of its hash.
type tokenView struct {
	ID        string            `json:"id"`
	Team      map[string]string `json:"team"`
	Role      string            `json:"role"`
	CreatedAt time.Time         `json:"createdAt"`
	ExpiresAt *time.Time        `json:"expiresAt"`
	Expired   bool              `json:"expired"`
}

func tokenViewOf(t *persistence.Token, team persistence.Team, now time.Time) tokenView {
	v := tokenView{ID: t.ID(), Team: map[string]string{"id": team.ID.String(), "name": team.Name}, Role: string(t.RoleOrDefault()),
		CreatedAt: t.CreatedAt.UTC(), Expired: t.Expired(now)}
	if !t.ExpiresAt.IsZero() {
		at := t.ExpiresAt.UTC()
		v.ExpiresAt = &at
	}
	return v
}

// listTokens lists every token (the admin), or the manager's team's.
func (s *Server) listTokens(r *request) {
	if !r.admin && !r.manages() {
		return
	}
	now := s.Clock.Now()
	out := []tokenView{}
	tokens, err := s.Store.Tokens()
	for _, t := range tokens {
		if r.admin || t.TeamID == r.team {
			out = append(out, tokenViewOf(t.Token, t.Team, now))
		}
	}
	if err != nil {
		r.failErr(err, nil)
		return
	}
	r.json(http.StatusOK, out)
}

// revokeToken removes a token (the admin's any, a manager its team's); it stops working at once.
func (s *Server) revokeToken(r *request) {
	var team ulid.ULID
	if !r.admin {
		if !r.manages() {
			return
		}
		team = r.team
	}
	id, _ := r.ctx.UserValue("token").(string)
	revoked, err := s.Coordinator.RevokeToken(id, team)
	if err != nil {
		r.failErr(err, newError(http.StatusNotFound, codeNotFound, "no token %q", id))
		return
	}
	if s.Replicas != nil {
		// Acknowledged once no replica answers a stale read that still knows the token.
		if err := s.Replicas.SealRevocation(); err != nil {
			r.failErr(err, nil)
			return
		}
	}
	owner, _ := s.Store.Team(revoked.TeamID)
	r.logger().Info("token revoked", "for_team", revoked.TeamID.String(), "token_id", id)
	r.json(http.StatusOK, tokenViewOf(revoked, owner, s.Clock.Now()))
}

// manages reports whether the request's token is a manager's, answering 403 otherwise.
func (r *request) manages() bool {
	if r.role == persistence.RoleManager {
		return true
	}
	r.fail(newError(http.StatusForbidden, codeForbidden, "this route needs a manager's token of the team (framefarm token create --role manager)"))
	return false
}
