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
// applied at once (their writers wait), held entries first, in order; what a new leader holds
// from before its term is applied by the barrier that starts the term, before it answers a
// read (Replica.caughtUp).
type fsm struct {
	r *Replica
	// hold is how long a follower may hold committed entries; 0 applies every entry at once.
	hold  time.Duration
	clock clock.Clock
	// reading counts the reads waiting for this replica to apply what it holds.
	reading atomic.Int32

	mu sync.Mutex // one apply at a time, and the entries held
	// held are committed entries not applied yet, of heldBytes; timer applies them once the
	// hold is over.
	held      []persistence.ReplicatedEntry
	heldBytes int
	timer     clock.Timer
}

// maxHeldBytes bounds what a follower holds before it applies it.
const maxHeldBytes = 8 << 20

// proposal is what the leader proposed of the store's commands, as the store holds them, until
// its own apply claims them (raft hands it the entry it was given, whose first byte names it).
type proposal struct {
	commands []persistence.Command
	// committed, when set, is told the entry is committed, before it is applied.
	committed func()
	// applied is closed once an apply that claimed the proposal is done with its commands.
	applied chan struct{}
}

var _ raft.BatchingFSM = (*fsm)(nil)

func (f *fsm) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies committed entries in one store transaction, or holds them (see fsm).
func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]any, len(logs))
	var entries []persistence.ReplicatedEntry
	var at []int
	var claimed []*proposal
	size := 0
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		e := persistence.ReplicatedEntry{Index: l.Index, Data: l.Data}
		if len(l.Data) > 0 {
			if p, ok := f.r.proposals.LoadAndDelete(&l.Data[0]); ok {
				e.Commands = p.(*proposal).commands
				claimed = append(claimed, p.(*proposal))
				if committed := p.(*proposal).committed; committed != nil {
					committed()
				}
			}
		}
		entries, at, size = append(entries, e), append(at, i), size+len(l.Data)
	}
	defer func() {
		for _, p := range claimed {
			close(p.applied)
		}
	}()
	if len(entries) == 0 {
		return out
	}
	if len(claimed) == 0 && f.mayHold(size) {
		if len(f.held) == 0 {
			f.timer = f.clock.AfterFunc(f.hold, f.applyHeld)
		}
		f.held, f.heldBytes = append(f.held, entries...), f.heldBytes+size
		return out // no writer waits on these entries here
	}
	earlier := len(f.held)
	results := f.applyHeldAnd(entries)
	if results == nil {
		return out // the store failed: the replica stops
	}
	for k, i := range at {
		out[i] = results[earlier+k]
	}
	return out
}

// mayHold reports whether entries of size may wait to be applied with the next.
func (f *fsm) mayHold(size int) bool {
	return f.hold > 0 && f.reading.Load() == 0 && f.heldBytes+size < maxHeldBytes
}

// applyHeld applies what is held, at once.
func (f *fsm) applyHeld() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applyHeldAnd(nil)
}

// applyHeldAnd applies the entries held, then entries, in one transaction, and returns their
// results in that order (nil when the store failed: the replica stops).
func (f *fsm) applyHeldAnd(entries []persistence.ReplicatedEntry) []*persistence.EntryResult {
	all := append(f.held, entries...)
	f.held, f.heldBytes = nil, 0
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if len(all) == 0 {
		return nil
	}
	started := time.Now()
	results, err := f.r.cfg.Store.ApplyEntries(all)
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
	f.applyHeldAnd(nil)
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
