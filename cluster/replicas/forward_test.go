package replicas

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/cluster/clock"
)

// fakeLeaders is a replica whose leader the test names; it dials the leaders' HTTP servers
// directly.
type fakeLeaders struct {
	mu      sync.Mutex
	leader  string
	changed func()
	// detour is the replica in touch with the leader ("": none).
	detour string
}

func (f *fakeLeaders) DetourPeer() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.detour == "" {
		return "", ErrNoDetour
	}
	return f.detour, nil
}

func (f *fakeLeaders) AwaitLeader(time.Time) (string, error) {
	if _, addr := f.Leader(); addr != "" {
		return addr, nil
	}
	return "", ErrUnavailable
}

func (f *fakeLeaders) Leader() (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, f.leader
}

func (f *fakeLeaders) OnLeaderChange(changed func()) { f.changed = changed }

func (f *fakeLeaders) DialForward(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	return (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
}

func (f *fakeLeaders) DialRelay(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	return f.DialForward(ctx, addr, timeout)
}

// elect makes addr the leader and tells the forwarder, as raft's observer would.
func (f *fakeLeaders) elect(addr string) {
	f.mu.Lock()
	f.leader = addr
	f.mu.Unlock()
	f.changed()
}

// leaderServer serves HTTP on loopback, answering with its name, or, silent, never answering
// (each request it holds is announced on held).
func leaderServer(t *testing.T, name string, silent bool) (addr string, held chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held = make(chan struct{}, 10)
	done := make(chan struct{})
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if silent {
			held <- struct{}{}
			<-done
			return
		}
		ctx.SetBodyString(name)
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { close(done); srv.Shutdown() })
	return ln.Addr().String(), held
}

// get forwards a GET and returns the answer's body.
func get(fw *Forwarder) (string, error) {
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("http://farm/api/v2/jobs")
	ctx.Request.Header.SetMethod(fasthttp.MethodGet)
	if err := fw.Forward(&ctx); err != nil {
		return "", err
	}
	return string(ctx.Response.Body()), nil
}

// TestRequestsFollowTheLeader: requests go to the replica leading now, and after a change of
// leader to the new one; with none, they are refused as unavailable.
func TestRequestsFollowTheLeader(t *testing.T) {
	a, _ := leaderServer(t, "a", false)
	b, _ := leaderServer(t, "b", false)
	leaders := &fakeLeaders{}
	fw := NewForwarder(leaders, clock.Real{}, ForwardTimeouts{Request: time.Minute, Transfer: time.Minute})
	if _, err := get(fw); err != ErrUnavailable {
		t.Fatalf("with no leader: %v", err)
	}
	leaders.elect(a)
	if body, err := get(fw); err != nil || body != "a" {
		t.Fatalf("to leader a: %q, %v", body, err)
	}
	leaders.elect(b)
	if body, err := get(fw); err != nil || body != "b" {
		t.Fatalf("to leader b: %q, %v", body, err)
	}
}

// TestADetourGoesToTheReplicaInTouch: with no leader known, a request detoured goes, whole, to
// the replica in touch with one; with none, it is refused as such.
func TestADetourGoesToTheReplicaInTouch(t *testing.T) {
	peer, _ := leaderServer(t, "peer", false)
	leaders := &fakeLeaders{}
	fw := NewForwarder(leaders, clock.Real{}, ForwardTimeouts{Request: time.Minute, Transfer: time.Minute})
	detour := func() (string, error) {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI("http://farm/api/v2/jobs")
		ctx.Request.Header.SetMethod(fasthttp.MethodPost)
		ctx.Request.SetBodyString(`{"template": {}}`)
		if err := fw.Detour(&ctx); err != nil {
			return "", err
		}
		return string(ctx.Response.Body()), nil
	}
	if _, err := detour(); !errors.Is(err, ErrNoDetour) {
		t.Fatalf("with no replica in touch: %v", err)
	}
	leaders.mu.Lock()
	leaders.detour = peer
	leaders.mu.Unlock()
	if body, err := detour(); err != nil || body != "peer" {
		t.Fatalf("by the replica in touch: %q, %v", body, err)
	}
}

// TestARequestOnASilentLeaderEndsWhenTheLeaderChanges: a request held by a leader that fell
// silent (paused, cut off) fails as soon as another replica leads, long before its own
// timeout, and the next one goes to the new leader.
func TestARequestOnASilentLeaderEndsWhenTheLeaderChanges(t *testing.T) {
	silent, held := leaderServer(t, "silent", true)
	b, _ := leaderServer(t, "b", false)
	leaders := &fakeLeaders{}
	fw := NewForwarder(leaders, clock.Real{}, ForwardTimeouts{Request: time.Hour, Transfer: time.Hour})
	leaders.elect(silent)
	ended := make(chan error, 1)
	go func() {
		_, err := get(fw)
		ended <- err
	}()
	<-held
	leaders.elect(b)
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the request held by the old leader succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request held by the old leader still waits after the change of leader")
	}
	if body, err := get(fw); err != nil || body != "b" {
		t.Fatalf("after the change: %q, %v", body, err)
	}
}

// brokenBody is a client's body that cannot be read past its first bytes (a malformed chunk).
type brokenBody struct{ sent bool }

func (b *brokenBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, `{"tem`), nil
	}
	return 0, errors.New("empty hex number")
}

// TestABodyTheClientCannotSendIsTheClientsFault: a request whose body breaks off as it is read
// from its client fails as unreadable (the client's fault: 400), not as a leader out of reach,
// whether it goes by HTTP or by the relay.
func TestABodyTheClientCannotSendIsTheClientsFault(t *testing.T) {
	a, _ := leaderServer(t, "a", false)
	leaders := &fakeLeaders{}
	fw := NewForwarder(leaders, clock.Real{}, ForwardTimeouts{Request: time.Minute, Transfer: time.Minute})
	leaders.elect(a)
	t.Cleanup(func() { leaders.elect("") }) // the leader's server waits for no request cut short
	for _, length := range []int{-1, 100} { // chunked (HTTP), and of a known length (the relay)
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI("http://farm/api/v2/jobs")
		ctx.Request.Header.SetMethod(fasthttp.MethodPost)
		ctx.Request.SetBodyStream(&brokenBody{}, length)
		if err := fw.Forward(&ctx); !errors.Is(err, ErrUnreadableBody) {
			t.Errorf("a body of length %d broken off: %v", length, err)
		}
	}
}
