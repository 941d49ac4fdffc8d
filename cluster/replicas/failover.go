package replicas

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A leader whose process died. Raft's followers learn it when their heartbeat timeout passes
// without a word from it, counted from a timer that runs in rounds of one to two timeouts: a
// follower may notice up to three timeouts after the death, and a candidate is refused by a
// follower that has not noticed yet. But a process that dies closes its connections, and a
// follower sees the leader's connections to it end at once (a paused or cut-off leader's do
// not end): it then asks the leader about itself, and when no answer comes it waits, for this
// election only, the shortest timeouts raft allows (the leader lease), counted from then. Its pooled connections are dropped first, so that no vote goes on
// a connection to a replica that restarted since.

// deathWatch notices the end of connections from the leader.
type deathWatch struct {
	r *Replica
	// mu guards hurried: the timeouts to go back to once another leads, while hurried; dead
	// is the leader found dead, round counts the hurries.
	mu      sync.Mutex
	hurried *raft.ReloadableConfig
	dead    string
	round   int
	checks  chan struct{}
}

func newDeathWatch(r *Replica) *deathWatch {
	return &deathWatch{r: r, checks: make(chan struct{}, 1)}
}

// watched is a connection from another replica whose end is told to the watch.
type watched struct {
	net.Conn
	w    *deathWatch
	once sync.Once
}

func (c *watched) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		c.once.Do(c.w.connectionEnded)
	}
	return n, err
}

// connectionEnded asks for a check of the leader, once at a time.
func (w *deathWatch) connectionEnded() {
	select {
	case w.checks <- struct{}{}:
	default:
	}
}

// run checks the leader each time a connection from another replica ended, until the replica
// shuts down.
func (w *deathWatch) run() {
	for {
		select {
		case <-w.r.mux.closed:
			return
		case <-w.checks:
		}
		w.check()
	}
}

// check asks the leader about itself, and hurries the next election when it does not answer;
// it reports whether it did.
func (w *deathWatch) check() bool {
	if !w.r.running.Load() || w.r.Leading() {
		return false
	}
	_, leader := w.r.Leader()
	if leader == "" {
		return false
	}
	if _, answers := w.r.askAbout(leader, time.Now().Add(leaderCheck)); answers {
		return false
	}
	return w.hurry(leader)
}

// leaderCheck bounds the question a follower asks of the leader whose connection ended.
const leaderCheck = 300 * time.Millisecond

// hurry shortens this replica's timeouts to the least raft allows until another leads; false
// when they could not be.
func (w *deathWatch) hurry(dead string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hurried != nil {
		return true
	}
	normal := w.r.raft.ReloadableConfig()
	fast := normal
	fast.HeartbeatTimeout, fast.ElectionTimeout = w.r.cfg.LeaderLease, w.r.cfg.LeaderLease
	w.r.transport.CloseStreams()
	if err := w.r.raft.ReloadConfig(fast); err != nil {
		w.r.log.Warn("cannot hurry the election of the next leader", "err", err)
		return false
	}
	w.round++
	w.hurried, w.dead = &normal, dead
	w.r.log.Info("the leader's process is gone: the next leader is elected with the shortest timeouts", "leader", dead)
	// Back to the usual timeouts however the election goes.
	round := w.round
	time.AfterFunc(hurriedAtMost, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.round == round {
			w.restore()
		}
	})
	return true
}

// hurriedAtMost bounds how long the shortened timeouts hold.
const hurriedAtMost = 10 * time.Second

// leaderKnown puts the usual timeouts back once another replica than the dead one leads.
func (w *deathWatch) leaderKnown(leader string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if leader != "" && leader != w.dead {
		w.restore()
	}
}

// restore puts the usual timeouts back, when they were shortened. w.mu is held.
func (w *deathWatch) restore() {
	if w.hurried == nil {
		return
	}
	if err := w.r.raft.ReloadConfig(*w.hurried); err != nil {
		w.r.log.Warn("cannot put the replicas' timeouts back", "err", err)
	}
	w.hurried = nil
}
