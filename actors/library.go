package actors

import (
	"bytes"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
)

// A team's library (its fonts and secrets) and the farm's API tokens change seldom and need no
// actor of their own, but they are written here, as commands, like every other change: the
// actors are the store's only writer, and the commands they apply are the one stream a replica
// of the store follows.

// AddFont stores a font file in the team's library: f names the team, the file and the font's
// names; its id, file and time are set here. ErrConflict: the library already has a font of
// that file name (and the file is not kept).
func (c *Coordinator) AddFont(f *persistence.Font, data []byte) (*persistence.Font, error) {
	if _, err := c.leading(); err != nil {
		return nil, err
	}
	f.CreatedAt = c.deps.Clock.Now()
	f.ID = c.deps.IDs.New(f.CreatedAt)
	key := persistence.FontKey(f.TeamID, f.ID)
	var err error
	if f.File, err = c.deps.Objects.Put(key, bytes.NewReader(data), int64(len(data))); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrObjectStore, err)
	}
	if err := c.deps.Store.Apply(&persistence.CreateFont{Font: f}); err != nil {
		c.forgetObject(key)
		return nil, err
	}
	return f, nil
}

// DeleteFont removes a font from the team's library and returns it; the same write queues its
// file for deletion.
func (c *Coordinator) DeleteFont(teamID, fontID ulid.ULID) (*persistence.Font, error) {
	if _, err := c.leading(); err != nil {
		return nil, err
	}
	deleted := &persistence.DeleteFont{TeamID: teamID, FontID: fontID}
	err := c.deps.Store.Apply(deleted)
	return deleted.Deleted, err
}

// AddSecret seals a secret's value, bound to its team and name, and stores it. ErrConflict: the
// team has a secret of that name.
func (c *Coordinator) AddSecret(teamID ulid.ULID, name, value string) (*persistence.Secret, error) {
	if _, err := c.leading(); err != nil {
		return nil, err
	}
	now := c.deps.Clock.Now()
	sec := &persistence.Secret{ID: c.deps.IDs.New(now), TeamID: teamID, Name: name, CreatedAt: now,
		Ciphertext: c.deps.Secrets.Seal([]byte(value), persistence.SecretAAD(teamID, name))}
	return sec, c.deps.Store.Apply(&persistence.CreateSecret{Secret: sec})
}

// DeleteSecret removes one of a team's secrets and returns it (its value sealed).
func (c *Coordinator) DeleteSecret(teamID, secretID ulid.ULID) (*persistence.Secret, error) {
	if _, err := c.leading(); err != nil {
		return nil, err
	}
	deleted := &persistence.DeleteSecret{TeamID: teamID, SecretID: secretID}
	err := c.deps.Store.Apply(deleted)
	return deleted.Deleted, err
}

// IssuedToken is a new API token: the token itself (shown once), its record and its team.
type IssuedToken struct {
	Token  string
	Record *persistence.Token
	Team   persistence.Team
	// TeamCreated is set when the team was made for this token.
	TeamCreated bool
}

// IssueToken makes a token of a role for the team of that name, creating the team (with its
// webhook signing secret) when there is none. A zero expires never expires.
func (c *Coordinator) IssueToken(teamName string, expires time.Time, role persistence.TokenRole) (IssuedToken, error) {
	if _, err := c.leading(); err != nil {
		return IssuedToken{}, err
	}
	token, hash := persistence.NewToken()
	secret, err := persistence.NewWebhookSecret()
	if err != nil {
		return IssuedToken{}, err
	}
	now := c.deps.Clock.Now()
	issued := &persistence.IssueToken{At: now, TeamName: teamName, NewTeamID: c.deps.IDs.New(now), WebhookSecret: secret, TokenHash: hash,
		ExpiresAt: expires, Role: role}
	if err := c.deps.Store.Apply(issued); err != nil {
		return IssuedToken{}, err
	}
	return IssuedToken{Token: token, Team: issued.Team, TeamCreated: issued.Created,
		Record: &persistence.Token{TeamID: issued.Team.ID, CreatedAt: now, ExpiresAt: expires, Role: role, Hash: hash}}, nil
}

// CreateTeam makes a team of that name (with its webhook signing secret) when there is none;
// created says whether it is new.
func (c *Coordinator) CreateTeam(name string) (team persistence.Team, created bool, err error) {
	if _, err := c.leading(); err != nil {
		return team, false, err
	}
	secret, err := persistence.NewWebhookSecret()
	if err != nil {
		return team, false, err
	}
	now := c.deps.Clock.Now()
	create := &persistence.CreateTeam{At: now, Name: name, NewTeamID: c.deps.IDs.New(now), WebhookSecret: secret}
	if err := c.deps.Store.Apply(create); err != nil {
		return team, false, err
	}
	return create.Team, create.Created, nil
}

// RevokeToken removes the token of an id (the start of its hash), of team when it is not zero:
// it stops working at once, and TokenRevoked tells those who hold what it opened (event
// streams). ErrNotFound: no such token.
func (c *Coordinator) RevokeToken(tokenID string, team ulid.ULID) (*persistence.Token, error) {
	if _, err := c.leading(); err != nil {
		return nil, err
	}
	revoke := &persistence.RevokeToken{TokenID: tokenID, TeamID: team}
	if err := c.deps.Store.Apply(revoke); err != nil {
		return nil, err
	}
	c.deps.Events.TokenRevoked.Publish(TokenRevoked{Hash: revoke.Revoked.Hash, Team: revoke.Revoked.TeamID})
	return revoke.Revoked, nil
}

// forgetObject queues an object nothing refers to for deletion.
func (c *Coordinator) forgetObject(key string) {
	if err := c.deps.Store.Apply(&persistence.ForgetObjects{Keys: []string{key}}); err != nil {
		c.log.Warn("cannot queue an unused object for deletion", "key", key, "err", err)
	}
}

// SetTeamPolicy changes a team's policy (persistence.ErrNotFound: no such team); the scheduler
// applies it from its next pick.
func (c *Coordinator) SetTeamPolicy(teamID ulid.ULID, change persistence.PolicyChange) (persistence.Team, error) {
	t, err := c.leading()
	if err != nil {
		return persistence.Team{}, err
	}
	set := &persistence.SetTeamPolicy{TeamID: teamID, Change: change}
	if err := c.deps.Store.Apply(set); err != nil {
		return persistence.Team{}, err
	}
	t.tellScheduler(&teamPolicySet{team: teamID, policy: set.Team.Policy})
	return set.Team, nil
}

// SetLimit makes a limit of the farm, or changes its count; renders holding it go on when the
// count falls below them, and no new one starts until they fall below it.
func (c *Coordinator) SetLimit(name string, count int) error {
	t, err := c.leading()
	if err != nil {
		return err
	}
	if err := c.deps.Store.Apply(&persistence.PutLimit{At: c.deps.Clock.Now(), Name: name, Count: count}); err != nil {
		return err
	}
	t.tellScheduler(&limitSet{name: name, count: count, exists: true})
	return nil
}

// DeleteLimit removes a limit (persistence.ErrNotFound: no such limit); jobs naming it wait until
// it is made again.
func (c *Coordinator) DeleteLimit(name string) (*persistence.Limit, error) {
	t, err := c.leading()
	if err != nil {
		return nil, err
	}
	del := &persistence.DeleteLimit{Name: name}
	if err := c.deps.Store.Apply(del); err != nil {
		return nil, err
	}
	t.tellScheduler(&limitSet{name: name})
	return del.Deleted, nil
}
