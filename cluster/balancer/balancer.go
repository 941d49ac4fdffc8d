// Package balancer is a load balancer for a trial farm of replicas on one machine (framefarm
// ha balance): it hands each client connection to the next replica that answers its readiness
// check, as a TCP proxy, so whatever HTTP carries (uploads, event streams) passes as it is. Any
// replica answers any request (writes are handed to the leader), so it needs no idea of who
// leads.
package balancer

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
)

// dialTimeout bounds the setting up of a connection to a replica; one that cannot be reached
// within it is passed over for the next.
const dialTimeout = 2 * time.Second

// Balancer passes the connections of Listener to Replicas (host:port of each one's API).
type Balancer struct {
	listener net.Listener
	replicas []string
	interval time.Duration
	clock    clock.Clock
	log      *slog.Logger
	checker  *http.Client
	// ready is, per replica, whether its last check (or connection) succeeded.
	ready []atomic.Bool
	next  atomic.Uint64
	// onChange, when set, hears of every change of a replica's readiness.
	onChange func(replica string, ready bool)

	mu    sync.Mutex
	conns map[net.Conn]bool
}

// New makes a balancer of the connections l accepts over the replicas, whose readiness
// (GET /readyz) it checks every interval.
func New(l net.Listener, replicas []string, interval time.Duration, clk clock.Clock, log *slog.Logger) *Balancer {
	b := &Balancer{listener: l, replicas: replicas, interval: interval, clock: clk, log: log,
		checker: &http.Client{Timeout: min(interval, dialTimeout)},
		ready:   make([]atomic.Bool, len(replicas)), conns: map[net.Conn]bool{}}
	return b
}

// Run serves until ctx ends: it checks every replica once, then accepts connections while the
// checks go on; at the end it closes the listener and every connection it holds.
func (b *Balancer) Run(ctx context.Context) error {
	b.checkAll()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for clock.Sleep(ctx, b.clock, b.interval) {
			b.checkAll()
		}
	}()
	stop := context.AfterFunc(ctx, func() {
		b.listener.Close()
		b.mu.Lock()
		defer b.mu.Unlock()
		for c := range b.conns {
			c.Close()
		}
		b.conns = nil
	})
	defer stop()
	for {
		conn, err := b.listener.Accept()
		if err != nil {
			wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.pass(conn)
		}()
	}
}

// checkAll asks every replica whether it is ready, at once.
func (b *Balancer) checkAll() {
	var wg sync.WaitGroup
	for i, addr := range b.replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := b.checker.Get("http://" + addr + "/readyz")
			ready := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			b.set(i, ready)
		}()
	}
	wg.Wait()
}

// set records replica i's readiness, saying so when it changed.
func (b *Balancer) set(i int, ready bool) {
	if b.ready[i].Swap(ready) == ready {
		return
	}
	if ready {
		b.log.Info("replica ready: connections go to it again", "replica", b.replicas[i])
	} else {
		b.log.Warn("replica not ready or out of reach: connections go to the others", "replica", b.replicas[i])
	}
	if b.onChange != nil {
		b.onChange(b.replicas[i], ready)
	}
}

// order is the replicas to try for the next connection: the ready ones, from the next in turn
// among them, then the others (their checks may be behind).
func (b *Balancer) order() []int {
	var ready, others []int
	for i := range b.replicas {
		if b.ready[i].Load() {
			ready = append(ready, i)
		} else {
			others = append(others, i)
		}
	}
	if len(ready) > 0 {
		turn := int(b.next.Add(1) % uint64(len(ready)))
		ready = append(ready[turn:], ready[:turn]...)
	}
	return append(ready, others...)
}

// pass joins conn to the first replica that takes a connection; conn is closed when none does.
func (b *Balancer) pass(conn net.Conn) {
	if !b.hold(conn) {
		conn.Close()
		return
	}
	defer b.release(conn)
	for _, i := range b.order() {
		upstream, err := net.DialTimeout("tcp", b.replicas[i], dialTimeout)
		if err != nil {
			b.set(i, false)
			continue
		}
		if !b.hold(upstream) {
			upstream.Close()
			return
		}
		defer b.release(upstream)
		pipe(conn, upstream)
		return
	}
	b.log.Warn("no replica takes connections: a client's connection is closed", "client", conn.RemoteAddr().String())
}

// pipe copies both ways until each side has said all it says; one side's end is passed on as
// a half-close, so a request and its answer both arrive whole.
func pipe(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		copyThenCloseWrite(b, a)
	}()
	copyThenCloseWrite(a, b)
	<-done
}

func copyThenCloseWrite(dst, src net.Conn) {
	_, err := io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
		cw.CloseWrite()
		return
	}
	// A side that broke off ends both.
	if err != nil && !errors.Is(err, net.ErrClosed) {
		dst.Close()
		src.Close()
	}
}

// hold keeps a connection to close at the end; false when the end has come.
func (b *Balancer) hold(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		return false
	}
	b.conns[c] = true
	return true
}

func (b *Balancer) release(c net.Conn) {
	c.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c)
}
