package replicas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/relay"
)

// leaderDialer is what a Forwarder asks of its replica (*Replica is one): who leads, news of a
// change, and connections to the leader's forward and relay listeners.
type leaderDialer interface {
	AwaitLeader(deadline time.Time) (string, error)
	Leader() (id, addr string)
	OnLeaderChange(changed func())
	DialForward(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error)
	DialRelay(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error)
	DetourPeer() (string, error)
}

var _ leaderDialer = (*Replica)(nil)

// Forwarder hands requests to the leader over the replicas' port, keeping connections to the
// current leader: small writes go by the relay, many on one connection, the rest by HTTP. When
// the leader changes, every request still on the old one fails at once (a leader paused or cut
// off would otherwise hold them until their timeout, an event stream for hours).
type Forwarder struct {
	replica  leaderDialer
	clock    clock.Clock
	timeouts ForwardTimeouts
	mu       sync.Mutex
	leader   string
	conns    *leaderConns
	client   *fasthttp.HostClient
	relay    *relay.Client
	// detours are the clients to the replicas requests went by while this one was out of
	// touch with the leader, by address.
	detours map[string]*fasthttp.HostClient
}

// ForwardTimeouts are how long a request handed to the leader may take: a small write
// (Request), or a transfer (Transfer).
type ForwardTimeouts struct{ Request, Transfer time.Duration }

// NewForwarder makes the forwarder of a replica (r: *Replica).
func NewForwarder(r leaderDialer, clk clock.Clock, t ForwardTimeouts) *Forwarder {
	fw := &Forwarder{replica: r, clock: clk, timeouts: t}
	r.OnLeaderChange(fw.leaderChanged)
	return fw
}

// leaderWait bounds how long a request handed to the leader waits for the replicas to know
// one (an election takes a heartbeat timeout or two): short of the 5 s the README promises an
// answer within, the rest of the request's way included.
const leaderWait = 4500 * time.Millisecond

// Forward sends the request as it came (its body streamed on) and puts the leader's answer in
// ctx. While the replicas choose a leader, it waits for them rather than refuse the request.
func (fw *Forwarder) Forward(ctx *fasthttp.RequestCtx) error {
	if _, err := fw.replica.AwaitLeader(time.Now().Add(leaderWait)); err != nil {
		return err
	}
	client, relayed, err := fw.clients()
	if err != nil {
		return err
	}
	return send(ctx, func(req *fasthttp.Request, resp *fasthttp.Response) error {
		if relay.Carries(req) {
			return relayed.Do(req, resp)
		}
		return client.Do(req, resp)
	})
}

// Detour hands the request as it came to another replica in touch with the leader, this one
// being out of touch (detour.go), and puts its answer in ctx.
func (fw *Forwarder) Detour(ctx *fasthttp.RequestCtx) error {
	addr, err := fw.replica.DetourPeer()
	if err != nil {
		return err
	}
	fw.mu.Lock()
	client := fw.detours[addr]
	if client == nil {
		client = fw.httpClient(context.Background(), addr, func(conn net.Conn, err error) (net.Conn, error) { return conn, err })
		if fw.detours == nil {
			fw.detours = map[string]*fasthttp.HostClient{}
		}
		fw.detours[addr] = client
	}
	fw.mu.Unlock()
	return send(ctx, client.Do)
}

// send sends ctx's request by do, its body streamed on as the client sends it, and keeps the
// answer in ctx.
func send(ctx *fasthttp.RequestCtx, do func(*fasthttp.Request, *fasthttp.Response) error) error {
	body := &clientBody{}
	if stream := ctx.RequestBodyStream(); stream != nil {
		body.r = stream
		ctx.Request.SetBodyStream(body, ctx.Request.Header.ContentLength())
	}
	err := do(&ctx.Request, &ctx.Response)
	if body.err != nil {
		return fmt.Errorf("%w: %w", ErrUnreadableBody, body.err)
	}
	return err
}

// ErrUnreadableBody is a request whose body could not be read from its client (a malformed
// chunk, a client gone): the client's fault, not the leader's.
var ErrUnreadableBody = errors.New("the body could not be read")

// clientBody is a request's body as the client sends it, keeping the error reading it met.
type clientBody struct {
	r   io.Reader
	err error
}

func (b *clientBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return n, err
}

// clients is the clients to the current leader, made anew when the leader changed.
func (fw *Forwarder) clients() (*fasthttp.HostClient, *relay.Client, error) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	_, leader := fw.replica.Leader()
	if leader == "" {
		return nil, nil, ErrUnavailable
	}
	if fw.leader != leader {
		fw.dropClients()
		conns := newLeaderConns()
		fw.leader, fw.conns = leader, conns
		fw.client = fw.httpClient(conns.ctx, leader, conns.track)
		fw.relay = relay.NewClient(func() (net.Conn, error) { return fw.replica.DialRelay(conns.ctx, leader, dialTimeout) }, fw.timeouts.Request, fw.clock)
	}
	return fw.client, fw.relay, nil
}

// httpClient is an HTTP client of the replica at addr's forward listener, its dials ended by
// ctx and each connection kept by keep. Answers are streamed through as they come (event
// streams never end by themselves).
func (fw *Forwarder) httpClient(ctx context.Context, addr string, keep func(net.Conn, error) (net.Conn, error)) *fasthttp.HostClient {
	return &fasthttp.HostClient{Addr: addr, MaxConns: 128, ReadTimeout: fw.timeouts.Transfer, WriteTimeout: fw.timeouts.Transfer, StreamResponseBody: true,
		MaxIdleConnDuration: time.Minute, DisablePathNormalizing: true, NoDefaultUserAgentHeader: true,
		Dial: func(string) (net.Conn, error) { return keep(fw.replica.DialForward(ctx, addr, dialTimeout)) }}
}

// leaderChanged drops the clients to a replica that no longer leads. A change the clients
// already followed (a request came first and saw the new leader) leaves them.
func (fw *Forwarder) leaderChanged() {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if _, leader := fw.replica.Leader(); leader != fw.leader {
		fw.dropClients()
	}
}

// dropClients closes the clients to the leader they were made for: requests still waiting on
// it fail with 503, for their clients to send again. fw.mu is held.
func (fw *Forwarder) dropClients() {
	if fw.client == nil {
		return
	}
	fw.conns.end() // first: the relay's Close waits for a dial in progress
	fw.client.CloseIdleConnections()
	fw.relay.Close()
	fw.leader, fw.conns, fw.client, fw.relay = "", nil, nil, nil
}

// leaderConns are the connections to one leader, those being dialled included, ended together
// when it no longer leads (the relay closes its one connection itself).
type leaderConns struct {
	ctx    context.Context // the dials'
	cancel context.CancelFunc
	mu     sync.Mutex
	open   map[net.Conn]bool // the HTTP client's
}

func newLeaderConns() *leaderConns {
	ctx, cancel := context.WithCancel(context.Background())
	return &leaderConns{ctx: ctx, cancel: cancel, open: map[net.Conn]bool{}}
}

// track keeps conn (from a dial that returned err) among the open ones.
func (l *leaderConns) track(conn net.Conn, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		conn.Close()
		return nil, ErrUnavailable
	}
	l.open[conn] = true
	return trackedConn{conn, l}, nil
}

// end stops the dials in progress and closes the open connections.
func (l *leaderConns) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel()
	for conn := range l.open {
		conn.Close()
	}
	clear(l.open)
}

// trackedConn leaves its leaderConns when closed.
type trackedConn struct {
	net.Conn
	of *leaderConns
}

func (c trackedConn) Close() error {
	c.of.mu.Lock()
	delete(c.of.open, c.Conn)
	c.of.mu.Unlock()
	return c.Conn.Close()
}

// dialTimeout bounds opening a connection to the leader.
const dialTimeout = 10 * time.Second
