package replicas

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// fsm is raft's view of the store.
//
// A follower holds the entries committed for a while (hold) and applies them together: every
// transaction costs the store its pages and counters whatever it carries, and nobody waits on a
// follower's apply but its own readers. It applies at once what it holds when a read waits for
// it (reading), when the entries held pass maxHeldBytes, before a snapshot is taken or restored,
// after a barrier, and when it stops. The entries a replica proposed itself, as the leader, are
// applied at once (their writers wait), held entries first, in order, except that one may wait
// for the next the leader proposed when that one is already on its way (Proposal.Committed),
// for at most ownHold: under load the leader then writes its records in half as many
// transactions. What a new leader holds from before its term is applied by the barrier that
// starts the term, before it answers a read (Replica.caughtUp).
type fsm struct {
	r *Replica
	// hold is how long a follower may hold committed entries; 0 applies every entry at once.
	hold  time.Duration
	clock clock.Clock
	// reading counts the reads waiting for this replica to apply what it holds.
	reading atomic.Int32

	mu sync.Mutex // one apply at a time, and the entries held
	// held are committed entries not applied yet, of heldBytes, with the proposals they answer
	// (claims; nil for an entry another replica proposed); timer applies them once the hold is
	// over.
	held      []persistence.ReplicatedEntry
	claims    []*proposal
	heldBytes int
	ownHeld   bool // one of held is this replica's own proposal
	timer     clock.Timer
}

// ownHold bounds how long the leader holds an entry it proposed for the next to come.
const ownHold = 5 * time.Millisecond

// maxHeldBytes bounds what a follower holds before it applies it.
const maxHeldBytes = 8 << 20

// proposal is what the leader proposed of the store's commands, as the store holds them, until
// its own apply claims them (raft hands it the entry it was given, whose first byte names it).
type proposal struct {
	commands []persistence.Command
	// committed, when set, is told the entry is committed, before it is applied; it reports
	// whether the next entry of the leader's store follows at once.
	committed func() (more bool)
	// applied is closed once an apply that claimed the proposal is done with its commands, and
	// result is set: the entry's *persistence.EntryResult (nil when the store failed).
	applied chan struct{}
	result  any
}

var _ raft.BatchingFSM = (*fsm)(nil)

func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries in one store transaction, or holds them (see fsm). An
// entry this replica proposed is answered through its proposal, once applied.
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	var entries []persistence.ReplicatedEntry
	var claims []*proposal
	var at []int
	own, more := false, false
	size := 0
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		e := persistence.ReplicatedEntry{Index: l.Index, Data: l.Data}
		var claim *proposal
		if len(l.Data) > 0 {
			if p, ok := f.r.proposals.LoadAndDelete(&l.Data[0]); ok {
				claim, own = p.(*proposal), true
				e.Commands = claim.commands
				if claim.committed != nil {
					more = claim.committed()
				}
			}
		}
		entries, claims, at, size = append(entries, e), append(claims, claim), append(at, i), size+len(l.Data)
	}
	if len(entries) == 0 {
		return out
	}
	if f.mayHold(size) && (!own || more && !f.ownHeld) {
		f.holdEntries(entries, claims, size, own)
		return out // no writer waits on these entries yet
	}
	earlier := len(f.held)
	results := f.applyHeldAnd(entries, claims)
	if results == nil {
		return out // the store failed: the replica stops
	}
	for k, i := range at {
		out[i] = results[earlier+k]
	}
	return out
}

// holdEntries holds entries of size bytes (claims: their proposals) to be applied with the next:
// for the follower's hold, or for ownHold when one is this replica's own.
func (f *fsm) holdEntries(entries []persistence.ReplicatedEntry, claims []*proposal, size int, own bool) {
	if own || len(f.held) == 0 {
		wait := f.hold
		if own {
			wait = min(wait, ownHold)
		}
		if f.timer != nil {
			f.timer.Stop()
		}
		f.timer = f.clock.AfterFunc(wait, f.applyHeld)
	}
	f.held, f.claims, f.heldBytes = append(f.held, entries...), append(f.claims, claims...), f.heldBytes+size
	f.ownHeld = f.ownHeld || own
}

// mayHold reports whether entries of size may wait to be applied with the next.
func (f *fsm) mayHold(size int) bool {
	return f.hold > 0 && f.reading.Load() == 0 && f.heldBytes+size < maxHeldBytes
}

// applyHeld applies what is held, at once.
func (f *fsm) applyHeld() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applyHeldAnd(nil, nil)
}

// applyHeldAnd applies the entries held, then entries (claims: their proposals), in one
// transaction, answers the proposals among them, and returns their results in that order (nil
// when the store failed: the replica stops).
func (f *fsm) applyHeldAnd(entries []persistence.ReplicatedEntry, claims []*proposal) []*persistence.EntryResult {
	all, allClaims := append(f.held, entries...), append(f.claims, claims...)
	f.held, f.claims, f.heldBytes, f.ownHeld = nil, nil, 0, false
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if len(all) == 0 {
		return nil
	}
	started := time.Now()
	revocations := f.r.cfg.Store.Revocations()
	results, err := f.r.cfg.Store.ApplyEntries(all)
	if f.r.cfg.Store.Revocations() != revocations {
		f.r.leases.renewSoon() // the leader waits to hear it before it acknowledges the revocation
	}
	defer func() {
		for k, p := range allClaims {
			if p != nil {
				if results != nil && results[k] != nil {
					p.result = results[k]
				}
				close(p.applied)
			}
		}
	}()
	if err != nil {
		f.r.cfg.Fail(fmt.Errorf("this replica cannot apply what the replicas committed: %w", err))
		return nil
	}
	if o := f.r.cfg.Observe; o != nil {
		o.ObserveApply(time.Since(started), len(all))
	}
	for k, result := range results {
		if result == nil {
			continue
		}
		for _, c := range result.Commands {
			if ig, ok := c.(*persistence.Ignored); ok {
				f.r.log.Warn("skipped a command of a later release, which may be skipped: upgrade this replica", "entry", all[k].Index, "command", ig.What)
			}
		}
	}
	return results
}

// read makes what is held applied while a read waits for the store (until done is called), and
// what comes meanwhile applied as it comes.
func (f *fsm) read() (done func()) {
	f.reading.Add(1)
	f.applyHeld()
	return func() { f.reading.Add(-1) }
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.applyHeld() // raft names the snapshot with the last entry it handed over
	s, err := f.r.cfg.Store.BeginSnapshot()
	if err != nil {
		return nil, err
	}
	return snapshot{s: s, observe: f.r.cfg.Observe}, nil
}

func (f *fsm) Restore(from io.ReadCloser) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer from.Close()
	// The store then says how far it applied: the snapshot is taken only when it holds more.
	f.applyHeldAnd(nil, nil)
	if err := f.r.cfg.Store.Restore(from); err != nil {
		return err
	}
	f.r.log.Info("restored the records from another replica's snapshot", "applied_index", f.r.cfg.Store.AppliedIndex())
	return nil
}

// stop applies what is held, once raft has stopped handing entries over.
func (f *fsm) stop() { f.applyHeld() }

type snapshot struct {
	s       *persistence.Snapshot
	observe Observer
}

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	started := time.Now()
	n, err := s.s.WriteTo(sink)
	if err != nil {
		sink.Cancel()
		return err
	}
	if s.observe != nil {
		s.observe.ObserveSnapshot(n, time.Since(started))
	}
	return sink.Close()
}

func (s snapshot) Release() { s.s.Release() }
