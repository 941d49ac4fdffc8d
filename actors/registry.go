package actors

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"
)

// registry finds the live actor of a record (a job, a batch), activating it from the store when
// it has none.
//
// Passivation must never lose a message. Proto.Actor drops user messages that reach an actor after
// it stopped, so the registry counts every message it hands to an actor (under the shard lock) and
// an actor may passivate only while none is in flight: once its entry is gone, the next message
// activates a fresh actor. Actor names are unique per activation, so a new activation never
// collides with a stopping one.
type registry struct {
	system *actor.ActorSystem
	// load makes the actor for a stored record; ErrNotFound when there is none.
	load   func(id ulid.ULID) (func(*registryEntry) actor.Actor, error)
	shards [64]registryShard
}

type registryShard struct {
	mu      sync.Mutex
	entries map[ulid.ULID]*registryEntry
}

type registryEntry struct {
	pid *actor.PID
	// inflight counts messages handed to the actor that it has not received yet.
	inflight atomic.Int64
}

// mail wraps every message the registry delivers; the receiving actor calls received.
type mail struct {
	msg   any
	entry *registryEntry
}

// received marks the message as received by its actor: it may passivate once none is in flight.
func (m *mail) received() { m.entry.inflight.Add(-1) }

func newRegistry(system *actor.ActorSystem, load func(ulid.ULID) (func(*registryEntry) actor.Actor, error)) *registry {
	r := &registry{system: system, load: load}
	for i := range r.shards {
		r.shards[i].entries = make(map[ulid.ULID]*registryEntry)
	}
	return r
}

func (r *registry) shard(id ulid.ULID) *registryShard {
	return &r.shards[id[15]%byte(len(r.shards))]
}

func (r *registry) spawn(producer func(*registryEntry) actor.Actor) *registryEntry {
	e := &registryEntry{}
	e.pid = r.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return producer(e) }))
	return e
}

// activate starts an actor for a record the caller holds, unless one is live.
func (r *registry) activate(id ulid.ULID, producer func(*registryEntry) actor.Actor) {
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries[id] == nil {
		s.entries[id] = r.spawn(producer)
	}
}

// deliver hands msg to the record's actor, activating it if needed; sender receives any answer.
func (r *registry) deliver(id ulid.ULID, msg any, sender *actor.PID) error {
	s := r.shard(id)
	s.mu.Lock()
	e := s.entries[id]
	if e == nil {
		producer, err := r.load(id)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		e = r.spawn(producer)
		s.entries[id] = e
	}
	e.inflight.Add(1)
	s.mu.Unlock()
	if sender != nil {
		r.system.Root.RequestWithCustomSender(e.pid, &mail{msg: msg, entry: e}, sender)
	} else {
		r.system.Root.Send(e.pid, &mail{msg: msg, entry: e})
	}
	return nil
}

// tryPassivate removes an idle actor's entry when no message is on its way to it, and reports
// whether it did; the actor then stops.
func (r *registry) tryPassivate(id ulid.ULID, e *registryEntry) bool {
	s := r.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.inflight.Load() != 0 || s.entries[id] != e {
		return false
	}
	delete(s.entries, id)
	return true
}

// live counts the active actors.
func (r *registry) live() int {
	n := 0
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		n += len(s.entries)
		s.mu.Unlock()
	}
	return n
}

// jobDirectory reaches the actor of any job, activating it from the store when it has none.
type jobDirectory struct {
	*registry
	log *slog.Logger
}

// tell sends msg to a job, logging when the job cannot be reached.
func (d *jobDirectory) tell(jobID ulid.ULID, msg any) error {
	err := d.deliver(jobID, msg, nil)
	if err != nil {
		d.log.Warn("message for a job that cannot be reached", "job", jobID.String(), "err", err)
	}
	return err
}
