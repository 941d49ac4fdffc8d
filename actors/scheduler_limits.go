package actors

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
)

// The scheduler's pools and limits. A job naming a pool renders only on nodes of that pool (its
// queue is the pool's); a job holding limits starts only while each of them has a render free,
// and holds them from its dispatch until its slot comes back (its result, its node lost, its
// offer declined) or it is queued again. A new coordinator (a restart, a failover) counts the
// renders its records say are rendering before it dispatches anything, so a limit is never
// exceeded across a change of coordinator either.

// limitBook is the farm's limits with the renders holding each.
type limitBook struct {
	limits map[string]*limitUse
	// held are the limits each dispatched job holds.
	held map[ulid.ULID][]string
	// queued counts the queued jobs needing each limit (a wait reason is given only for those).
	queued map[string]int
	out    *limitSnapshot
	dirty  bool
}

// limitUse is one limit: its count (exists is false for a limit a job names that the farm no
// longer has: nothing may hold it) and the renders holding it.
type limitUse struct {
	count  int
	exists bool
	held   int
}

func newLimitBook(limits []persistence.Limit, out *limitSnapshot) limitBook {
	b := limitBook{limits: map[string]*limitUse{}, held: map[ulid.ULID][]string{}, queued: map[string]int{}, out: out, dirty: true}
	for _, l := range limits {
		b.limits[l.Name] = &limitUse{count: l.Count, exists: true}
	}
	return b
}

func (b *limitBook) use(name string) *limitUse {
	u := b.limits[name]
	if u == nil {
		u = &limitUse{}
		b.limits[name] = u
	}
	return u
}

// free reports whether each of the limits has a render free.
func (b *limitBook) free(limits []string) bool {
	for _, name := range limits {
		if u := b.limits[name]; u == nil || !u.exists || u.held >= u.count {
			return false
		}
	}
	return true
}

// hold makes a job hold its limits (a dispatch, or a render rendering when the coordinator
// started).
func (b *limitBook) hold(job ulid.ULID, limits []string) {
	if len(limits) == 0 || b.held[job] != nil {
		return
	}
	b.held[job] = limits
	for _, name := range limits {
		b.use(name).held++
	}
	b.dirty = true
}

// release gives back what a job holds, and returns it.
func (b *limitBook) release(job ulid.ULID) []string {
	limits := b.held[job]
	if limits == nil {
		return nil
	}
	delete(b.held, job)
	for _, name := range limits {
		u := b.use(name)
		u.held--
		if !u.exists && u.held <= 0 && b.queued[name] == 0 {
			delete(b.limits, name)
		}
	}
	b.dirty = true
	return limits
}

// set records a limit's count, or its deletion (exists false).
func (b *limitBook) set(name string, count int, exists bool) {
	u := b.use(name)
	u.count, u.exists = count, exists
	b.dirty = true
}

// LimitUse is a limit as the scheduler applies it: its count, whether it exists, and the
// renders holding it now (Holders: their jobs or chunks, in id order).
type LimitUse struct {
	Count   int
	Exists  bool
	Held    int
	Holders []ulid.ULID
}

// Full reports whether no render may take the limit now.
func (u LimitUse) Full() bool { return !u.Exists || u.Held >= u.Count }

// limitSnapshot holds the limits' use as last published.
type limitSnapshot = atomic.Pointer[map[string]LimitUse]

// publish makes the limits' use readable outside the actor, when it changed.
func (b *limitBook) publish() {
	if b.out == nil || !b.dirty {
		return
	}
	b.dirty = false
	out := make(map[string]LimitUse, len(b.limits))
	for name, u := range b.limits {
		out[name] = LimitUse{Count: u.count, Exists: u.exists, Held: u.held}
	}
	for job, limits := range b.held {
		for _, name := range limits {
			u := out[name]
			u.Holders = append(u.Holders, job)
			out[name] = u
		}
	}
	for name, u := range out {
		slices.SortFunc(u.Holders, ulid.ULID.Compare)
		out[name] = u
	}
	b.out.Store(&out)
}

// releaseLimits gives back what a job holds; the reasons its limits' jobs wait may change.
func (s *scheduler) releaseLimits(job ulid.ULID) {
	for _, name := range s.limits.release(job) {
		s.waits.touch(persistence.LimitWaitSubject(name))
	}
}

// poolEngine names what the ready nodes of a pool offer of an engine.
type poolEngine struct{ pool, engine string }

// poolSnapshot holds the pools' capacity as last published, by wait subject
// (persistence.PoolWaitSubject).
type poolSnapshot = atomic.Pointer[map[string]Capacity]

// publishPools makes the pools' capacity readable outside the actor.
func (s *scheduler) publishPools() {
	if s.poolsOut == nil {
		return
	}
	out := make(map[string]Capacity, len(s.pools))
	for pe, c := range s.pools {
		if c != (Capacity{}) {
			out[persistence.PoolWaitSubject(pe.pool, pe.engine)] = c
		}
	}
	s.poolsOut.Store(&out)
}

// countQueuedPlacement counts a job of a queue in or out of its pool's and limits' queued jobs;
// the first one in, or the last out, changes whether they give a reason to wait.
func (s *scheduler) countQueuedPlacement(q *engineQueue, delta int) {
	if q.pool != "" {
		pe := poolEngine{q.pool, q.engine}
		c := s.pools[pe]
		before := c.Queued
		c.Queued += delta
		if (before == 0) != (c.Queued == 0) {
			s.waits.touch(persistence.PoolWaitSubject(q.pool, q.engine))
		}
		if c == (Capacity{}) {
			delete(s.pools, pe)
		} else {
			s.pools[pe] = c
		}
	}
	for _, name := range q.limits {
		before := s.limits.queued[name]
		s.limits.queued[name] += delta
		if (before == 0) != (s.limits.queued[name] == 0) {
			s.waits.touch(persistence.LimitWaitSubject(name))
		}
		if s.limits.queued[name] == 0 {
			delete(s.limits.queued, name)
		}
	}
}

// touchNode notes that what a node offers changed: its engines' and its pools' reasons, and
// those of the teams held to pools.
func (s *scheduler) touchNode(n *schedNode) {
	s.waits.touch(n.engines...)
	for team, r := range s.rules {
		if r.pools != nil {
			s.waits.touch(teamSubject(team))
		}
	}
	for _, p := range n.pools {
		for _, e := range n.engines {
			s.waits.touch(persistence.PoolWaitSubject(p, e))
		}
	}
}

// placementWaitReason says why the queued jobs of a pool's engine, or of a limit, cannot start;
// ok is false for other subjects.
func (s *scheduler) placementWaitReason(subject string) (reason string, ok bool) {
	if pool, engine, isPool := persistence.WaitSubjectPool(subject); isPool {
		reason := PoolWaitReason(pool, engine, s.pools[poolEngine{pool, engine}])
		if reason != "" {
			inPool := func(n *schedNode) bool { return slices.Contains(n.pools, pool) }
			reason = cmp.Or(s.pausedNodes(fmt.Sprintf("render node of pool %q", pool), engine, inPool), reason)
		}
		return reason, true
	}
	if name, isLimit := persistence.WaitSubjectLimit(subject); isLimit {
		if s.limits.queued[name] == 0 {
			return "", true
		}
		u := s.limits.limits[name]
		if u == nil {
			return LimitWaitReason(name, LimitUse{}), true
		}
		return LimitWaitReason(name, LimitUse{Count: u.count, Exists: u.exists, Held: u.held}), true
	}
	return "", false
}

// PoolWaitReason says why a job of an engine that must render in a pool waits, given what the
// pool's ready nodes offer of it ("" when one could take it).
func PoolWaitReason(pool, engine string, c Capacity) string {
	if c.Nodes > 0 {
		return ""
	}
	return fmt.Sprintf("no ready render node of pool %q offers the %q engine", pool, engine)
}

// LimitWaitReason says why a job holding a limit waits ("" when the limit has a render free).
func LimitWaitReason(name string, u LimitUse) string {
	switch {
	case !u.Exists:
		return fmt.Sprintf("the farm has no limit %q (its admin makes it: PUT /api/v2/admin/limits/%s)", name, name)
	case u.Held >= u.Count:
		if u.Count == 1 {
			return fmt.Sprintf("the one render of limit %q is in use", name)
		}
		return fmt.Sprintf("all %d renders of limit %q are in use", u.Count, name)
	}
	return ""
}

// Messages of the limits.
type (
	// limitSet: a limit was made or changed (exists), or deleted.
	limitSet struct {
		name   string
		count  int
		exists bool
	}
	// limitsHeld: renders rendering when the coordinator started hold these limits.
	limitsHeld struct{ jobs map[ulid.ULID][]string }
	// limitsReleased: a job's render ended without its slot coming back (an attempt no node
	// reclaimed after the coordinator started).
	limitsReleased struct{ job ulid.ULID }
)

// PoolCapacities returns what the ready nodes of each pool offer of each engine, by wait subject
// (persistence.PoolWaitSubject).
func (c *Coordinator) PoolCapacities() map[string]Capacity {
	return lastPublished(c, func(t *term) *poolSnapshot { return &t.pools })
}

// LimitUses returns the limits' use as last published: every limit the farm has, and those
// jobs hold or wait for that it no longer has.
func (c *Coordinator) LimitUses() map[string]LimitUse {
	return maps.Clone(lastPublished(c, func(t *term) *limitSnapshot { return &t.limitUses }))
}
