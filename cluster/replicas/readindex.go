package replicas

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// asker asks the leader, for this follower's reads, how far it has applied the writes.
// A read waits for the next question asked after it arrived (an answer to an earlier one may
// predate a write the client saw acknowledged); reads arriving together share one question.
type asker struct {
	leader  func() string // the leader's address, "" while none is known
	dial    func(ctx context.Context, addr string) (net.Conn, error)
	timeout time.Duration // bounds one question

	mu      sync.Mutex
	next    *readRound // the question not asked yet, which new reads join
	running bool
	// link is the connection kept to the leader; linkMu guards which link is current.
	linkMu sync.Mutex
	link   *leaderLink
}

type readRound struct {
	done  chan struct{}
	index uint64
	err   error
}

// readIndexTimeout bounds one question to the leader.
const readIndexTimeout = 5 * time.Second

// await returns the leader's applied index from a question asked after the call, or
// ErrUnavailable once deadline passes (the question goes on for the reads that share it, until
// its connection's deadline).
func (a *asker) await(deadline time.Time) (uint64, error) {
	a.mu.Lock()
	if a.next == nil {
		a.next = &readRound{done: make(chan struct{})}
	}
	round := a.next
	if !a.running {
		a.running = true
		go a.ask()
	}
	a.mu.Unlock()
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	select {
	case <-round.done:
		return round.index, round.err
	case <-wait.C:
		return 0, fmt.Errorf("%w: the leader did not answer in time", ErrUnavailable)
	}
}

// ask asks one question per round while reads wait. Before each it lets the goroutines ready to
// run go once: the reads they are about to make join the round, which one question answers.
func (a *asker) ask() {
	for {
		runtime.Gosched()
		a.mu.Lock()
		round := a.next
		a.next = nil
		if round == nil {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		round.index, round.err = a.question()
		close(round.done)
	}
}

// leaderLink is the connection to one leader the questions go on, or its dial; ended (the dial
// stopped, the connection closed) when that replica no longer leads, for a question waiting on
// a leader paused or cut off to fail at once rather than after its timeout.
type leaderLink struct {
	to   string
	ctx  context.Context
	end  context.CancelFunc
	conn net.Conn // only the asking goroutine uses it
}

// linkToLeader is the link to the current leader, made anew when the current link goes
// elsewhere or ended; nil while no leader is known. The leader is read under linkMu, so a link
// made once the leader changed goes to the new one, and one made before is ended by the change.
func (a *asker) linkToLeader() *leaderLink {
	a.linkMu.Lock()
	defer a.linkMu.Unlock()
	leader := a.leader()
	if leader == "" {
		return nil
	}
	if l := a.link; l != nil && l.to == leader && l.ctx.Err() == nil {
		return l
	}
	if a.link != nil {
		a.link.end()
	}
	ctx, end := context.WithCancel(context.Background())
	a.link = &leaderLink{to: leader, ctx: ctx, end: end}
	return a.link
}

// leaderChanged ends the link to a replica that no longer leads (OnLeaderChange).
func (a *asker) leaderChanged() {
	a.linkMu.Lock()
	defer a.linkMu.Unlock()
	if a.link != nil && a.link.to != a.leader() {
		a.link.end()
	}
}

// close ends the link, wherever it goes.
func (a *asker) close() {
	a.linkMu.Lock()
	defer a.linkMu.Unlock()
	if a.link != nil {
		a.link.end()
	}
}

// question asks the leader once, over the kept connection (dialled again when the leader
// changed or the connection failed).
func (a *asker) question() (uint64, error) {
	link := a.linkToLeader()
	if link == nil {
		return 0, ErrUnavailable
	}
	if link.conn == nil {
		conn, err := a.dial(link.ctx, link.to)
		if err != nil {
			link.end()
			return 0, fmt.Errorf("%w: the leader is out of reach: %w", ErrUnavailable, err)
		}
		context.AfterFunc(link.ctx, func() { conn.Close() })
		link.conn = conn
	}
	var reply [9]byte
	link.conn.SetDeadline(time.Now().Add(a.timeout))
	_, err := link.conn.Write([]byte{1})
	if err == nil {
		_, err = readFull(link.conn, reply[:])
	}
	if err != nil {
		link.end()
		return 0, fmt.Errorf("%w: asking the leader: %w", ErrUnavailable, err)
	}
	if reply[0] != 1 {
		return 0, fmt.Errorf("%w: the replica asked is no longer the leader", ErrUnavailable)
	}
	return binary.BigEndian.Uint64(reply[1:]), nil
}

// readIndexer answers, on the leader, the followers' questions.
type readIndexer struct {
	r *Replica
	// verified is when this replica, leading, last began a check that a quorum still hears it,
	// as a time since epoch (monotonic: a change of the wall clock moves neither); 0: never.
	verified atomic.Int64
	epoch    time.Time
}

// serve answers a follower's questions on one connection: once it is sure it still leads, and
// has applied what the leaders before it acknowledged, the index of the last write it applied:
// every write acknowledged is at or below it (the store's applied index, which only writes move).
func (ri *readIndexer) serve(conn net.Conn) {
	defer conn.Close()
	var ask [1]byte
	for {
		if _, err := readFull(conn, ask[:]); err != nil {
			return
		}
		reply := [9]byte{}
		// The port serves while the replica starts, before raft exists: it leads nothing yet.
		if ri.r.running.Load() && ri.stillLeads() && ri.r.caughtUp(time.Now().Add(readIndexTimeout)) {
			reply[0] = 1
			binary.BigEndian.PutUint64(reply[1:], ri.r.cfg.Store.AppliedIndex())
		}
		if _, err := conn.Write(reply[:]); err != nil {
			return
		}
	}
}

// stillLeads makes sure this replica still leads: a quorum heard it lately. Once a quorum has
// heard it, no other replica can be elected before the followers' heartbeat timeout passes, so
// a check begun less than half of that ago still holds; older, a quorum is asked again. (A
// replica paused past it, then woken, asks again and learns it no longer leads.)
func (ri *readIndexer) stillLeads() bool {
	now := int64(time.Since(ri.epoch))
	if began := ri.verified.Load(); began != 0 && time.Duration(now-began) < ri.r.cfg.HeartbeatTimeout/2 {
		return ri.r.Leading()
	}
	if ri.r.raft.VerifyLeader().Error() != nil {
		return false
	}
	ri.verified.Store(max(now, 1))
	return true
}

func readFull(conn net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := conn.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
