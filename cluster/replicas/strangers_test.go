package replicas

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/relay"
	"github.com/framefarm/framefarm/persistence"
)

// TestAReplicaRefusesToStartWithoutTLS: the replicas' port carries every record of the farm
// and requests vouched for as the admin's, so it never listens in the clear.
func TestAReplicaRefusesToStartWithoutTLS(t *testing.T) {
	s := newSet(t, "c1")
	store := s.open("c1")
	defer store.Close()
	for name, cfg := range map[string]Config{
		"no TLS":        {},
		"no server TLS": {ClientTLS: s.client},
		"no client TLS": {ServerTLS: s.server},
	} {
		cfg.ID, cfg.Bind, cfg.Peers, cfg.Dir, cfg.Store = "c1", s.peers[0].Addr, s.peers, t.TempDir(), store
		cfg.Logger, cfg.Fail = slog.New(slog.DiscardHandler), func(error) {}
		if r, err := Start(cfg); !errors.Is(err, ErrNoTLS) {
			if r != nil {
				r.Shutdown()
			}
			t.Errorf("%s: started (%v)", name, err)
		}
	}
}

// stranger opens connections to the replicas' port as someone who is not a replica.
type stranger func(addr string) (net.Conn, error)

// TestTheReplicasPortHearsOnlyReplicas: what a stranger sends to the replicas' port (in the
// clear, with a render node's certificate of the farm's own CA, or with a coordinator's
// certificate of another CA) is refused before anything of it is read: a raft AppendEntries
// carrying a write, a vote for a later term, an API request handed on as another replica's and
// vouched for as the admin's (by HTTP and by the relay), a question about what a replica has
// applied. No replica changes, none hands a request to the API, and the set goes on writing.
func TestTheReplicasPortHearsOnlyReplicas(t *testing.T) {
	s := newSet(t, "c1", "c2", "c3")
	var handedOn atomic.Int32
	for _, id := range []string{"c1", "c2", "c3"} {
		m := s.start(id, s.open(id))
		for _, l := range []net.Listener{m.replica.ForwardListener(), m.replica.RelayListener()} {
			go func() {
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					handedOn.Add(1)
					conn.Close()
				}
			}()
		}
	}
	s.write("before", "set")
	_, leader := s.leader()
	termBefore := leader.replica.Term()

	node, nodeKey, err := s.ca.Issue(certs.Identity{Role: certs.RoleNode, NodeID: "n1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherCA, err := certs.NewAuthority("another farm", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreign, foreignKey, err := otherCA.Issue(certs.Identity{Role: certs.RoleCoordinator}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	withCertificate := func(certPEM, keyPEM []byte) stranger {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return func(addr string) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
				&tls.Config{Certificates: []tls.Certificate{pair}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
		}
	}
	strangers := map[string]stranger{
		"in the clear": func(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 10*time.Second) },
		"with a render node's certificate of the farm's CA": withCertificate(node, nodeKey),
		"with a coordinator's certificate of another CA":    withCertificate(foreign, foreignKey),
	}
	write, err := persistence.EncodeEntry(&persistence.SetMeta{Name: "intruder", Value: "in"})
	if err != nil {
		t.Fatal(err)
	}
	for name, dial := range strangers {
		for _, p := range s.peers {
			open := func(kind byte) (net.Conn, error) {
				conn, err := dial(p.Addr)
				if err != nil {
					return nil, err
				}
				conn.SetDeadline(time.Now().Add(time.Minute))
				if _, err := conn.Write([]byte{kind}); err != nil {
					conn.Close()
					return nil, err
				}
				return conn, nil
			}
			transport := raft.NewNetworkTransport(strangerLayer{open: open, closed: make(chan struct{})}, 1, time.Minute, io.Discard)
			var appended raft.AppendEntriesResponse
			err := transport.AppendEntries(raft.ServerID(p.ID), raft.ServerAddress(p.Addr), &raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ID: []byte("intruder"), Addr: []byte(p.Addr)},
				Term:      termBefore + 100, LeaderCommitIndex: 1 << 20,
				Entries: []*raft.Log{{Index: 1, Term: termBefore + 100, Type: raft.LogCommand, Data: write}},
			}, &appended)
			if err == nil {
				t.Errorf("%s, %s took a raft AppendEntries: %+v", name, p.ID, appended)
			}
			var voted raft.RequestVoteResponse
			if err := transport.RequestVote(raft.ServerID(p.ID), raft.ServerAddress(p.Addr), &raft.RequestVoteRequest{
				RPCHeader: raft.RPCHeader{ID: []byte("intruder"), Addr: []byte(p.Addr)}, Term: termBefore + 100,
				LastLogIndex: 1 << 20, LastLogTerm: termBefore + 100,
			}, &voted); err == nil {
				t.Errorf("%s, %s took a raft vote request: %+v", name, p.ID, voted)
			}
			transport.Close()

			admin := "POST /api/v2/admin/tokens HTTP/1.1\r\nHost: farm\r\nAuthorization: Bearer x\r\n" +
				"X-Framefarm-Admin-Vouched: 1\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"team\":\"rival\"}\n"
			for _, kind := range []byte{kindForward, kindReadIndex, kindStatus} {
				if answer, err := exchange(open, kind, admin); err == nil {
					t.Errorf("%s, %s answered a connection of kind %q: %.80q", name, p.ID, kind, answer)
				}
			}
			client := relay.NewClient(func() (net.Conn, error) { return open(kindRelay) }, time.Minute, clock.Real{})
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.SetRequestURI("http://farm/api/v2/admin/tokens")
			req.Header.SetMethod(fasthttp.MethodPost)
			req.Header.Set("X-Framefarm-Admin-Vouched", "1")
			req.SetBodyString(`{"team":"rival"}`)
			if err := client.Do(req, resp); err == nil {
				t.Errorf("%s, %s answered a relayed request: %d %s", name, p.ID, resp.StatusCode(), resp.Body())
			}
			client.Close()
		}
	}

	s.write("after", "set")
	for id, m := range s.members {
		if got := s.read(id, "intruder"); got != "" {
			t.Errorf("replica %s holds the stranger's write %q", id, got)
		}
		if term := m.replica.Term(); term >= termBefore+100 {
			t.Errorf("replica %s took the stranger's term %d", id, term)
		}
	}
	if n := handedOn.Load(); n != 0 {
		t.Errorf("%d of the strangers' connections reached the API", n)
	}
}

// exchange opens a connection of kind, sends text and reads what comes back: an error unless
// the replica answered something.
func exchange(open func(byte) (net.Conn, error), kind byte, text string) (string, error) {
	conn, err := open(kind)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, text); err != nil {
		return "", err
	}
	answer, err := bufio.NewReader(conn).ReadString('\n')
	if answer != "" {
		return answer, nil
	}
	if err == nil {
		err = fmt.Errorf("an empty line")
	}
	return "", err
}

// strangerLayer is raft's transport as a stranger dials it; it accepts nothing.
type strangerLayer struct {
	open   func(kind byte) (net.Conn, error)
	closed chan struct{}
}

func (l strangerLayer) Dial(raft.ServerAddress, time.Duration) (net.Conn, error) {
	return l.open(kindRaft)
}
func (l strangerLayer) Accept() (net.Conn, error) { <-l.closed; return nil, net.ErrClosed }
func (l strangerLayer) Close() error              { close(l.closed); return nil }
func (l strangerLayer) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
