package replicas

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Every connection between replicas opens with one byte naming what it carries, so one port
// (authenticated by mutual TLS) serves them all.
const (
	kindRaft      byte = 'R' // raft's own RPCs
	kindForward   byte = 'H' // HTTP: an API request a follower hands to the leader
	kindRelay     byte = 'B' // small API writes a follower hands to the leader, many at once (package relay)
	kindReadIndex byte = 'I' // what the leader has applied, for a follower's read
	kindStatus    byte = 'S' // what a replica says of itself, for the status of the set
	kindLease     byte = 'L' // a follower's lease to answer stale reads (staleleases.go)
)

// handshakeTimeout bounds a connection's TLS handshake and first byte.
const handshakeTimeout = 10 * time.Second

// mux accepts the replicas' connections on one listener and sorts them by their first byte.
type mux struct {
	listener  net.Listener
	advertise net.Addr
	client    *tls.Config
	log       *slog.Logger

	raft, forward, relay chan net.Conn
	// readIndex answers a follower's read-index requests on one connection, lease its
	// requests for leases, status a replica's question about this one.
	readIndex, lease, status func(net.Conn)

	closeOnce sync.Once
	closed    chan struct{}
}

func newMux(bind, advertise string, server, client *tls.Config, log *slog.Logger) (*mux, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("replicas' address %s: %w", bind, err)
	}
	if advertise == "" {
		advertise = l.Addr().String()
	}
	addr, err := net.ResolveTCPAddr("tcp", advertise)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("replicas' advertised address %q: %w", advertise, err)
	}
	l = tls.NewListener(l, server)
	return &mux{listener: l, advertise: addr, client: client, log: log,
		raft: make(chan net.Conn), forward: make(chan net.Conn), relay: make(chan net.Conn), closed: make(chan struct{})}, nil
}

// run accepts connections until the listener closes.
func (m *mux) run() {
	for {
		conn, err := m.listener.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		go m.sort(conn)
	}
}

// sort reads a connection's first byte (after its TLS handshake) and hands it on.
func (m *mux) sort(conn net.Conn) {
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	var kind [1]byte
	if _, err := conn.Read(kind[:]); err != nil {
		m.log.Warn("refused a connection to the replicas' port", "from", conn.RemoteAddr().String(), "err", err)
		conn.Close()
		return
	}
	conn.SetDeadline(time.Time{})
	var to chan net.Conn
	switch kind[0] {
	case kindRaft:
		to = m.raft
	case kindForward:
		to = m.forward
	case kindRelay:
		to = m.relay
	case kindReadIndex:
		m.readIndex(conn)
		return
	case kindStatus:
		m.status(conn)
		return
	case kindLease:
		m.lease(conn)
		return
	default:
		m.log.Warn("refused a connection to the replicas' port", "from", conn.RemoteAddr().String(), "err", fmt.Sprintf("unknown kind %q", kind[0]))
		conn.Close()
		return
	}
	select {
	case to <- conn:
	case <-m.closed:
		conn.Close()
	}
}

// dial opens a connection of kind to the replica at addr, giving up after timeout or once ctx
// is done (a replica paused or cut off accepts connections it never answers).
func (m *mux) dial(ctx context.Context, addr string, kind byte, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(conn, m.client)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	conn = tc
	if _, err := conn.Write([]byte{kind}); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func (m *mux) close() {
	m.closeOnce.Do(func() {
		close(m.closed)
		m.listener.Close()
	})
}

// accept takes the next connection of one kind.
func (m *mux) accept(from chan net.Conn) (net.Conn, error) {
	select {
	case conn := <-from:
		return conn, nil
	case <-m.closed:
		return nil, net.ErrClosed
	}
}

// raftLayer is raft's transport over the mux; the end of each connection it accepts is told to
// deaths (failover.go).
type raftLayer struct {
	m      *mux
	deaths *deathWatch
}

var _ raft.StreamLayer = raftLayer{}

func (l raftLayer) Accept() (net.Conn, error) {
	conn, err := l.m.accept(l.m.raft)
	if err != nil {
		return nil, err
	}
	return &watched{Conn: conn, w: l.deaths}, nil
}
func (l raftLayer) Close() error   { l.m.close(); return nil }
func (l raftLayer) Addr() net.Addr { return l.m.advertise }
func (l raftLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return l.m.dial(context.Background(), string(addr), kindRaft, timeout)
}

// forwardListener yields the connections of one kind on which followers hand API requests to
// this replica.
type forwardListener struct {
	m    *mux
	from chan net.Conn
}

func (l forwardListener) Accept() (net.Conn, error) {
	conn, err := l.m.accept(l.from)
	if err != nil {
		return nil, err
	}
	return ForwardedConn{conn}, nil
}
func (l forwardListener) Close() error   { return nil } // the mux closes with the replica
func (l forwardListener) Addr() net.Addr { return l.m.advertise }

// ForwardedConn is a connection from another replica, authenticated as one: the API trusts what
// it says of the request's client (X-Forwarded-For).
type ForwardedConn struct{ net.Conn }

// FromReplica marks the connection as another replica's.
func (ForwardedConn) FromReplica() bool { return true }
