package replicas

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// readIndexer asks the leader, for this follower's reads, how far it has applied the writes.
// A read waits for the next question asked after it arrived (an answer to an earlier one may
// predate a write the client saw acknowledged); reads arriving together share one question.
type readIndexer struct {
	r *Replica

	mu      sync.Mutex
	next    *readRound // the question not asked yet, which new reads join
	running bool
	// conn is kept open to the leader it was dialled to.
	conn   net.Conn
	connTo string
	// verified is when this replica, leading, last began a check that a quorum still hears it,
	// as a time since epoch (monotonic: a change of the wall clock moves neither); 0: never.
	verified atomic.Int64
	epoch    time.Time
}

type readRound struct {
	done  chan struct{}
	index uint64
	err   error
}

// readIndexTimeout bounds one question to the leader.
const readIndexTimeout = 5 * time.Second

// await returns the leader's applied index from a question asked after the call. A question
// ends within its connection's deadline, so the wait is bounded.
func (ri *readIndexer) await() (uint64, error) {
	ri.mu.Lock()
	if ri.next == nil {
		ri.next = &readRound{done: make(chan struct{})}
	}
	round := ri.next
	if !ri.running {
		ri.running = true
		go ri.ask()
	}
	ri.mu.Unlock()
	<-round.done
	return round.index, round.err
}

// ask asks one question per round while reads wait.
func (ri *readIndexer) ask() {
	for {
		ri.mu.Lock()
		round := ri.next
		ri.next = nil
		if round == nil {
			ri.running = false
			ri.mu.Unlock()
			return
		}
		ri.mu.Unlock()
		round.index, round.err = ri.question()
		close(round.done)
	}
}

// question asks the leader once, over the kept connection (dialled again when the leader
// changed or the connection failed).
func (ri *readIndexer) question() (uint64, error) {
	_, leader := ri.r.Leader()
	if leader == "" {
		return 0, ErrUnavailable
	}
	if ri.conn != nil && ri.connTo != leader {
		ri.conn.Close()
		ri.conn = nil
	}
	if ri.conn == nil {
		conn, err := ri.r.mux.dial(context.Background(), leader, kindReadIndex, readIndexTimeout)
		if err != nil {
			return 0, fmt.Errorf("%w: the leader is out of reach: %w", ErrUnavailable, err)
		}
		ri.conn, ri.connTo = conn, leader
	}
	var reply [9]byte
	ri.conn.SetDeadline(time.Now().Add(readIndexTimeout))
	_, err := ri.conn.Write([]byte{1})
	if err == nil {
		_, err = readFull(ri.conn, reply[:])
	}
	if err != nil {
		ri.conn.Close()
		ri.conn = nil
		return 0, fmt.Errorf("%w: asking the leader: %w", ErrUnavailable, err)
	}
	if reply[0] != 1 {
		return 0, fmt.Errorf("%w: the replica asked is no longer the leader", ErrUnavailable)
	}
	return binary.BigEndian.Uint64(reply[1:]), nil
}

// serve answers a follower's questions on one connection: once it is sure it still leads, the
// index of the last write it applied: every write it acknowledged is at or below it (the store's
// applied index, which only writes move).
func (ri *readIndexer) serve(conn net.Conn) {
	defer conn.Close()
	var ask [1]byte
	for {
		if _, err := readFull(conn, ask[:]); err != nil {
			return
		}
		reply := [9]byte{}
		if ri.stillLeads() {
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
