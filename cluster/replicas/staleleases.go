package replicas

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// Stale reads under leases. A follower answers a read that does not catch up with the leader
// (?stale) only while it holds a lease the leader granted it, and only once it has applied the
// entry the lease names: the last write that took access away (a token's revocation). The
// leader acknowledges such a write only once each follower has applied it, holds a lease that
// names it, or holds no lease any longer: a revocation acknowledged is in force on every replica
// that answers, stale or not.
//
// A follower asks for its lease (it is not pushed), and counts it from the moment it asked: the
// leader, counting from when it granted it, never takes a lease for over while the follower
// still holds it. A new leader does not know what its predecessors granted: it takes every
// lease granted before it led for valid one lease after it began.

// staleLease is how long a lease lets a follower answer stale reads; followers ask again a few
// times within it, and at once when they applied a revocation.
const (
	staleLease      = 5 * time.Second
	staleLeaseRenew = staleLease / 5
	// staleLeaseMargin is taken off a follower's lease for the two clocks' rates.
	staleLeaseMargin = staleLease / 10
)

// ErrNoStaleLease refuses a stale read on a follower without a lease from the leader.
var ErrNoStaleLease = errors.New("this replica has not heard from the leader lately enough to answer from its own records")

// followerLeases is what the leader knows of a follower's leases: the most it said it had
// applied, and the leases granted it that may still run, oldest first. A lease granted does not
// end the one before it until the follower receives it: each runs its course.
type followerLeases struct {
	applied uint64
	grants  []leaseGrant
}

// leaseGrant is a lease granted: when (the leader's clock), and the entry the follower must have
// applied to answer under it.
type leaseGrant struct {
	at       time.Time
	minIndex uint64
}

// grant records a lease granted at now, forgetting those run out.
func (f *followerLeases) grant(g leaseGrant, now time.Time) {
	f.grants = slices.DeleteFunc(f.grants, func(old leaseGrant) bool { return now.Sub(old.at) >= staleLease })
	f.grants = append(f.grants, g)
}

// runningBelow reports whether a lease may still run that lets the follower answer without the
// entry at index applied.
func (f *followerLeases) runningBelow(index uint64, now time.Time) bool {
	return slices.ContainsFunc(f.grants, func(g leaseGrant) bool { return g.minIndex < index && now.Sub(g.at) < staleLease })
}

// leaseGranter is the leader's side: the leases it granted this term, and the entry new leases
// name.
type leaseGranter struct {
	r         *Replica
	mu        sync.Mutex
	changed   chan struct{} // closed at each grant, for the writes waiting on followers
	followers map[string]*followerLeases
	// required is the entry new leases name; leadingSince when this replica began to lead
	// (zero while it does not).
	required     uint64
	leadingSince time.Time
}

func newLeaseGranter(r *Replica) *leaseGranter {
	return &leaseGranter{r: r, changed: make(chan struct{}), followers: map[string]*followerLeases{}}
}

// leading begins (true) or ends a term of this replica's leadership: what earlier leaders
// granted is unknown, so leases name at least what this replica has applied.
func (g *leaseGranter) leading(leads bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leadingSince = time.Time{}
	if leads {
		clear(g.followers) // what an earlier term of this replica's granted runs out in one lease, as any predecessor's
		g.leadingSince = time.Now()
		g.required = max(g.required, g.r.cfg.Store.AppliedIndex())
	}
}

// serve answers a follower's requests for leases on one connection: its id and what it has
// applied, answered with whether the lease is granted and the entry it names.
func (g *leaseGranter) serve(conn net.Conn) {
	defer conn.Close()
	for {
		conn.SetReadDeadline(time.Now().Add(2 * staleLease))
		var ask [9]byte // the id's length, then the applied index
		if _, err := readFull(conn, ask[:]); err != nil {
			return
		}
		id := make([]byte, ask[0])
		if _, err := readFull(conn, id); err != nil {
			return
		}
		applied := binary.BigEndian.Uint64(ask[1:])
		var reply [9]byte
		if g.r.running.Load() && g.r.StillLeads() {
			g.mu.Lock()
			if !g.leadingSince.IsZero() {
				f := g.followers[string(id)]
				if f == nil {
					f = &followerLeases{}
					g.followers[string(id)] = f
				}
				now := time.Now()
				f.applied = max(f.applied, applied)
				f.grant(leaseGrant{at: now, minIndex: g.required}, now)
				reply[0] = 1
				binary.BigEndian.PutUint64(reply[1:], g.required)
				close(g.changed)
				g.changed = make(chan struct{})
			}
			g.mu.Unlock()
		}
		conn.SetWriteDeadline(time.Now().Add(readIndexTimeout))
		if _, err := conn.Write(reply[:]); err != nil {
			return
		}
	}
}

// sealRevocation waits, on the leader, until no follower may answer a stale read without the
// entry at index applied: each has applied it, holds a lease naming it, or holds none.
func (g *leaseGranter) sealRevocation(index uint64) error {
	g.mu.Lock()
	g.required = max(g.required, index)
	g.mu.Unlock()
	deadline := time.Now().Add(staleLease + time.Second)
	for {
		g.mu.Lock()
		pending, changed := g.unsealed(index), g.changed
		g.mu.Unlock()
		if pending == "" {
			return nil
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return fmt.Errorf("%w: replica %s may still answer without the revocation", ErrUnavailable, pending)
		}
		timer := time.NewTimer(min(wait, 50*time.Millisecond))
		select {
		case <-changed:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// unsealed names a follower that may still answer a stale read without the entry at index
// applied ("" when none may): one that has not said it applied it, and may hold a lease of an
// earlier leader (this one began to lead less than a lease ago) or one of this leader's that
// does not name it.
func (g *leaseGranter) unsealed(index uint64) string {
	f := g.r.raft.GetConfiguration()
	if f.Error() != nil {
		return "of the configuration"
	}
	if g.leadingSince.IsZero() && g.r.Leading() {
		return "any (this replica has only just begun to lead)"
	}
	now := time.Now()
	for _, srv := range f.Configuration().Servers {
		id := string(srv.ID)
		if id == g.r.cfg.ID {
			continue
		}
		leases := g.followers[id]
		switch {
		case leases != nil && leases.applied >= index:
		case !g.leadingSince.IsZero() && now.Sub(g.leadingSince) < staleLease, leases != nil && leases.runningBelow(index, now):
			return id
		}
	}
	return ""
}

// leaseHolder is a follower's side: its lease, asked again every staleLeaseRenew and when woken.
type leaseHolder struct {
	r    *Replica
	wake chan struct{}

	mu       sync.Mutex
	expires  time.Time // zero: no lease
	minIndex uint64
}

func newLeaseHolder(r *Replica) *leaseHolder {
	return &leaseHolder{r: r, wake: make(chan struct{}, 1)}
}

// renewSoon asks for a lease at once (a revocation applied, another leader).
func (h *leaseHolder) renewSoon() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// run asks the leader for leases until the replica shuts down, on a connection kept to it.
func (h *leaseHolder) run() {
	var conn net.Conn
	var to string // the leader conn goes to
	drop := func() {
		if conn != nil {
			conn.Close()
		}
		conn, to = nil, ""
	}
	defer drop()
	tick := time.NewTicker(staleLeaseRenew)
	defer tick.Stop()
	for {
		select {
		case <-h.r.mux.closed:
			return
		case <-tick.C:
		case <-h.wake:
		}
		_, leader := h.r.Leader()
		if !h.r.running.Load() || h.r.Leading() || leader == "" {
			drop()
			continue
		}
		if conn == nil || to != leader {
			drop()
			ctx, cancel := context.WithTimeout(context.Background(), readIndexTimeout)
			c, err := h.r.mux.dial(ctx, leader, kindLease, readIndexTimeout)
			cancel()
			if err != nil {
				continue
			}
			conn, to = c, leader
		}
		if err := h.ask(conn); err != nil {
			drop()
		}
	}
}

// ask asks for one lease on conn.
func (h *leaseHolder) ask(conn net.Conn) error {
	asked := time.Now()
	id := []byte(h.r.cfg.ID)
	msg := make([]byte, 9, 9+len(id))
	msg[0] = byte(len(id))
	binary.BigEndian.PutUint64(msg[1:], h.r.cfg.Store.AppliedIndex())
	msg = append(msg, id...)
	conn.SetDeadline(asked.Add(readIndexTimeout))
	if _, err := conn.Write(msg); err != nil {
		return err
	}
	var reply [9]byte
	if _, err := readFull(conn, reply[:]); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if reply[0] != 1 {
		h.expires = time.Time{}
		return nil
	}
	h.expires, h.minIndex = asked.Add(staleLease-staleLeaseMargin), binary.BigEndian.Uint64(reply[1:])
	return nil
}

// StaleReadable makes sure this replica may answer a stale read: the leader, while a quorum
// hears it; a follower, while it holds a lease, once it has applied the entry the lease names
// (waiting for that until deadline).
func (r *Replica) StaleReadable(deadline time.Time) error {
	if r.Leading() {
		if r.StillLeads() {
			return nil
		}
		return fmt.Errorf("%w: this replica may no longer lead", ErrNoStaleLease)
	}
	h := r.leases
	h.mu.Lock()
	expires, minIndex := h.expires, h.minIndex
	h.mu.Unlock()
	if expires.IsZero() || time.Now().After(expires) {
		return ErrNoStaleLease
	}
	if r.cfg.Store.AppliedIndex() < minIndex {
		defer r.fsm.read()()
		if !r.cfg.Store.WaitApplied(minIndex, time.Until(deadline)) {
			return fmt.Errorf("%w: it has not applied a revocation yet", ErrNoStaleLease)
		}
	}
	return nil
}

// SealRevocation waits, on the leader, until a revocation this replica applied is in force on
// every replica that may answer a stale read (see above); at most one lease.
func (r *Replica) SealRevocation() error {
	return r.granter.sealRevocation(r.cfg.Store.AppliedIndex())
}
