package persistence

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/oklog/ulid/v2"
)

// TeamPolicy is how the farm's admin shapes one team's use of a shared farm. Every field is
// optional: nil is the default (weight 1, nothing guaranteed, no cap, any pool).
type TeamPolicy struct {
	// Weight is the team's share of the running slots against other teams' weights.
	Weight *int `json:"weight,omitempty"`
	// GuaranteedSlots are served before any share: a team below them gets the next free slot
	// its jobs can take.
	GuaranteedSlots *int `json:"guaranteedSlots,omitempty"`
	// MaxRunning caps the slots the team's renders hold at once.
	MaxRunning *int `json:"maxRunning,omitempty"`
	// MaxQueuedJobs caps the team's jobs waiting to render (queued or pending, chunks apart);
	// MaxQueuedChunks its split jobs' chunks waiting (queued).
	MaxQueuedJobs   *int `json:"maxQueuedJobs,omitempty"`
	MaxQueuedChunks *int `json:"maxQueuedChunks,omitempty"`
	// MaxPriority caps the priority the team's jobs may ask.
	MaxPriority *int `json:"maxPriority,omitempty"`
	// Pools, when set, are the only pools the team's jobs may name, and render in.
	Pools *[]string `json:"pools,omitempty"`
	// Limits, when set, are the only farm limits the team's jobs may name (those their engine
	// implies are the farm's, and held whatever this says).
	Limits *[]string `json:"limits,omitempty"`
}

// PolicyFields names the fields of a team policy, as the API spells them.
var PolicyFields = []string{"weight", "guaranteedSlots", "maxRunning", "maxQueuedJobs", "maxQueuedChunks", "maxPriority", "pools", "limits"}

// WeightOrDefault is the team's weight, 1 when none was set.
func (p TeamPolicy) WeightOrDefault() int {
	if p.Weight == nil {
		return 1
	}
	return *p.Weight
}

// Guaranteed is how many slots the team is served before any share.
func (p TeamPolicy) Guaranteed() int {
	if p.GuaranteedSlots == nil {
		return 0
	}
	return *p.GuaranteedSlots
}

// AllowsPool reports whether the team's jobs may name pool.
func (p TeamPolicy) AllowsPool(pool string) bool {
	return p.Pools == nil || slices.Contains(*p.Pools, pool)
}

// AllowsLimit reports whether the team's jobs may name a limit.
func (p TeamPolicy) AllowsLimit(limit string) bool {
	return p.Limits == nil || slices.Contains(*p.Limits, limit)
}

// lists names the fields that are lists (nil: any), for patches.
func (p *TeamPolicy) lists() map[string]**[]string {
	return map[string]**[]string{"pools": &p.Pools, "limits": &p.Limits}
}

// ints lists the integer fields by name, for patches.
func (p *TeamPolicy) ints() map[string]**int {
	return map[string]**int{"weight": &p.Weight, "guaranteedSlots": &p.GuaranteedSlots, "maxRunning": &p.MaxRunning,
		"maxQueuedJobs": &p.MaxQueuedJobs, "maxQueuedChunks": &p.MaxQueuedChunks, "maxPriority": &p.MaxPriority}
}

// Patched is p with the fields change sets replaced and those it clears back at their default.
func (p TeamPolicy) Patched(change PolicyChange) TeamPolicy {
	next := p
	set := change.Set
	for name, field := range next.ints() {
		if v := *set.ints()[name]; v != nil {
			value := *v
			*field = &value
		}
	}
	for name, field := range next.lists() {
		if v := *set.lists()[name]; v != nil {
			value := slices.Clone(*v)
			*field = &value
		}
	}
	for _, name := range change.Clear {
		if field, ok := next.ints()[name]; ok {
			*field = nil
		}
		if field, ok := next.lists()[name]; ok {
			*field = nil
		}
	}
	return next
}

// PolicyChange is a change of a team's policy: the fields Set holds (not nil) are replaced, those
// Clear names go back to their default.
type PolicyChange struct {
	Set   TeamPolicy `json:"set"`
	Clear []string   `json:"clear,omitempty"`
}

// ErrQueueCap is returned when a creation would take a team's waiting jobs or chunks past its
// policy's cap; the error says which.
var ErrQueueCap = errors.New("over the team's queue cap")

// QueueCapError says which cap a creation would pass.
type QueueCapError struct {
	// Field is the policy's field (maxQueuedJobs or maxQueuedChunks).
	Field           string
	Cap, Held, Asks int
}

func (e *QueueCapError) Error() string {
	what := "jobs waiting to render"
	if e.Field == "maxQueuedChunks" {
		what = "chunks of split jobs waiting to render"
	}
	return fmt.Sprintf("the team's %s is %d %s; it has %d and this request adds %d", e.Field, e.Cap, what, e.Held, e.Asks)
}

func (e *QueueCapError) Unwrap() error { return ErrQueueCap }

// WaitingCounts is how many of a team's jobs wait to render: Jobs (queued or pending, chunks
// apart) and Chunks (queued chunks of split jobs).
type WaitingCounts struct {
	Jobs   int `json:"jobs"`
	Chunks int `json:"chunks"`
}

// Waiting counts a team's waiting jobs and chunks.
func (t *txn) Waiting(teamID ulid.ULID) WaitingCounts {
	return WaitingCounts{
		Jobs:   t.JobCount(teamID, JobQueued) + t.JobCount(teamID, JobPending),
		Chunks: t.readCounter(bucketChunkCounts, key(id(teamID), stateKey(JobQueued))),
	}
}

// checkQueueCaps refuses the jobs of a creation that would take a team past its queue caps.
func (t *txn) checkQueueCaps(jobs []*Job) error {
	if len(jobs) == 0 {
		return nil
	}
	adds := map[ulid.ULID]*WaitingCounts{}
	for _, j := range jobs {
		a := adds[j.TeamID]
		if a == nil {
			a = &WaitingCounts{}
			adds[j.TeamID] = a
		}
		switch {
		case j.Kind == KindChunk && j.State == JobQueued:
			a.Chunks++
		case j.Kind != KindChunk && !j.State.Terminal():
			a.Jobs++
		}
	}
	for teamID, a := range adds {
		p, err := t.queueCaps(teamID)
		if err != nil {
			return err
		}
		if p.MaxQueuedJobs == nil && p.MaxQueuedChunks == nil {
			continue
		}
		held := t.Waiting(teamID)
		if p.MaxQueuedJobs != nil && a.Jobs > 0 && held.Jobs+a.Jobs > *p.MaxQueuedJobs {
			return &QueueCapError{Field: "maxQueuedJobs", Cap: *p.MaxQueuedJobs, Held: held.Jobs, Asks: a.Jobs}
		}
		if p.MaxQueuedChunks != nil && a.Chunks > 0 && held.Chunks+a.Chunks > *p.MaxQueuedChunks {
			return &QueueCapError{Field: "maxQueuedChunks", Cap: *p.MaxQueuedChunks, Held: held.Chunks, Asks: a.Chunks}
		}
	}
	return nil
}

// setTeamPolicy is SetTeamPolicy.
func (t *txn) setTeamPolicy(c *SetTeamPolicy) error {
	team, err := t.Team(c.TeamID)
	if err != nil {
		return err
	}
	team.Policy = team.Policy.Patched(c.Change)
	c.Team = team
	return t.putTeam(team)
}

// queueCaps is the team's policy as its queue caps read it, decoded once per transaction (a
// group of single job creations checks the same team's for each): an empty policy for a team
// with no record (teams made before policies, in tests).
func (t *txn) queueCaps(teamID ulid.ULID) (TeamPolicy, error) {
	if p, ok := t.policies[teamID]; ok {
		return p, nil
	}
	team, err := t.Team(teamID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return TeamPolicy{}, err
	}
	if t.policies == nil {
		t.policies = map[ulid.ULID]TeamPolicy{}
	}
	t.policies[teamID] = team.Policy
	return team.Policy, nil
}

// TeamByName finds a team by its name; ErrNotFound when there is none.
func (t *txn) TeamByName(name string) (Team, error) {
	raw := t.get(bucketTeamNames, []byte(strings.TrimSpace(name)))
	if raw == nil {
		return Team{}, ErrNotFound
	}
	return t.Team(ulidAt(raw))
}

// Teams lists every team, by name.
func (t *txn) Teams() ([]Team, error) {
	var out []Team
	var err error
	t.scanPrefix(bucketTeamNames, nil, func(_, v []byte) bool {
		var team Team
		if team, err = t.Team(ulidAt(v)); err != nil {
			return false
		}
		out = append(out, team)
		return true
	})
	return out, err
}
