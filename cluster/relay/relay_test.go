package relay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/cluster/clock"
)

// relayed is a relay server on a loopback port, the connections it accepted, and a client.
type relayed struct {
	t      *testing.T
	server *Server
	client *Client
	clock  *clock.Fake
	addr   string // the server's

	mu       sync.Mutex
	accepted []net.Conn
}

// countingListener records the connections it yields.
type countingListener struct {
	net.Listener
	r *relayed
}

func (l countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err == nil {
		l.r.mu.Lock()
		l.r.accepted = append(l.r.accepted, conn)
		l.r.mu.Unlock()
	}
	return conn, err
}

func newRelayed(t *testing.T, handler fasthttp.RequestHandler) *relayed {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relayed{t: t, server: &Server{Handler: handler}, clock: clock.NewFake(time.Unix(0, 0)), addr: l.Addr().String()}
	go r.server.Serve(countingListener{l, r})
	r.client = NewClient(func() (net.Conn, error) { return net.Dial("tcp", l.Addr().String()) }, time.Minute, r.clock)
	t.Cleanup(func() {
		r.client.Close()
		l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.server.Shutdown(ctx)
	})
	return r
}

func (r *relayed) connections() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.accepted)
}

// post sends POST path with body and returns the answer's status and body.
func (r *relayed) post(path, body string) (int, string, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://leader" + path)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetBodyString(body)
	if err := r.client.Do(req, resp); err != nil {
		return 0, "", err
	}
	return resp.StatusCode(), string(resp.Body()), nil
}

// echo answers with the request's path and body, read as the API reads it: from the stream.
func echo(ctx *fasthttp.RequestCtx) {
	var body bytes.Buffer
	body.ReadFrom(ctx.RequestBodyStream())
	ctx.SetStatusCode(fasthttp.StatusCreated)
	fmt.Fprintf(ctx, "%s %s", ctx.Path(), body.String())
}

// holding answers /hold only once release is closed, after saying it was entered.
type holding struct {
	entered chan struct{}
	release chan struct{}
}

func newHolding() *holding {
	return &holding{entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (h *holding) handle(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) == "/hold" {
		h.entered <- struct{}{}
		<-h.release
	}
	echo(ctx)
}

// held sends POST /hold with body and returns, once the handler holds it, where its outcome
// comes: nil for the right answer.
func (r *relayed) held(h *holding, body string) <-chan error {
	outcome := make(chan error, 1)
	go func() {
		status, got, err := r.post("/hold", body)
		if err == nil && (status != fasthttp.StatusCreated || got != "/hold "+body) {
			err = fmt.Errorf("answer %d %q", status, got)
		}
		outcome <- err
	}()
	<-h.entered
	return outcome
}

// echoes checks that a request is answered, then that the requests took want connections.
func (r *relayed) echoes(body string, want int) {
	r.t.Helper()
	if status, got, err := r.post("/echo", body); err != nil || status != fasthttp.StatusCreated || got != "/echo "+body {
		r.t.Fatalf("the request after: %d %q %v", status, got, err)
	}
	if n := r.connections(); n != want {
		r.t.Fatalf("the requests took %d connections, want %d", n, want)
	}
}

func TestRequestsShareOneConnectionAndNoneHoldsAnotherBack(t *testing.T) {
	h := newHolding()
	r := newRelayed(t, h.handle)
	held := r.held(h, "first")
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path, body := fmt.Sprintf("/echo/%d", i), strings.Repeat(fmt.Sprint(i), i)
			status, got, err := r.post(path, body)
			if err == nil && (status != fasthttp.StatusCreated || got != path+" "+body) {
				err = fmt.Errorf("request %d got someone else's answer: %d %q", i, status, got)
			}
			errs <- err
		}()
	}
	wg.Wait() // while the first request is still held
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	close(h.release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	r.echoes("last", 1)
}

func TestABrokenConnectionFailsItsRequestsAndTheNextOneRedials(t *testing.T) {
	h := newHolding()
	r := newRelayed(t, h.handle)
	defer close(h.release)
	held := r.held(h, "lost")
	r.mu.Lock()
	r.accepted[0].Close()
	r.mu.Unlock()
	if err := <-held; !errors.Is(err, ErrClosed) {
		t.Fatalf("a request whose connection broke: %v, want ErrClosed", err)
	}
	r.echoes("again", 2)
}

func TestARequestUnansweredInTimeFailsAndItsLateAnswerIsDropped(t *testing.T) {
	h := newHolding()
	r := newRelayed(t, h.handle)
	held := r.held(h, "late")
	<-r.clock.Armed
	r.clock.Advance(time.Minute)
	if err := <-held; err == nil || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("a request past its time: %v", err)
	}
	close(h.release) // the late answer comes, for no one
	r.echoes("next", 1)
}

func TestShutdownAnswersTheRequestsItRead(t *testing.T) {
	h := newHolding()
	r := newRelayed(t, h.handle)
	held := r.held(h, "kept")
	shut := make(chan error, 1)
	go func() { shut <- r.server.Shutdown(context.Background()) }()
	// A connection of its own ends once the shutdown began: refused, or no longer read.
	conn, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection during the shutdown: %v", err)
	}
	close(h.release)
	if err := <-held; err != nil {
		t.Fatalf("the request read before the shutdown: %v", err)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.post("/echo", "refused"); err == nil {
		t.Fatal("a request after the shutdown was answered")
	}
}

func TestAStreamedAnswerIsRelayedWhole(t *testing.T) {
	answer := strings.Repeat("frame ", 50000)
	r := newRelayed(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyStream(strings.NewReader(answer), -1) })
	if status, body, err := r.post("/stream", ""); err != nil || status != fasthttp.StatusOK || body != answer {
		t.Fatalf("%d, %d bytes, %v", status, len(body), err)
	}
}

func TestCarries(t *testing.T) {
	for _, c := range []struct {
		method string
		body   int // -1: chunked
		want   bool
	}{
		{fasthttp.MethodPost, 200, true},
		{fasthttp.MethodDelete, 0, true},
		{fasthttp.MethodPut, MaxBody, true},
		{fasthttp.MethodPost, MaxBody + 1, false},
		{fasthttp.MethodPost, -1, false},
		{fasthttp.MethodGet, 0, false},
		{fasthttp.MethodHead, 0, false},
	} {
		var req fasthttp.Request
		req.Header.SetMethod(c.method)
		req.Header.SetContentLength(c.body)
		if got := Carries(&req); got != c.want {
			t.Errorf("%s with a body of %d: %v, want %v", c.method, c.body, got, c.want)
		}
	}
}

func TestAPeerSendingWhatTheRelayDoesNotCarryIsCutOff(t *testing.T) {
	r := newRelayed(t, echo)
	for _, sent := range []string{
		"\x00\x00\x00\x00\x00\x00\x00\x01GET /jobs HTTP/1.1\r\nHost: x\r\n\r\n",
		"\x00\x00\x00\x00\x00\x00\x00\x01POST /jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"\x00\x00\x00\x00\x00\x00\x00\x01not http at all\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte(sent))
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := bufio.NewReader(conn).Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("%q: the server answered instead of closing the connection", sent)
		}
		conn.Close()
	}
	if status, _, err := r.post("/echo", "still"); err != nil || status != fasthttp.StatusCreated {
		t.Fatalf("the server after: %d %v", status, err)
	}
}

// FuzzReadRequest: whatever a peer sends, reading it yields a request or an error.
func FuzzReadRequest(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x01POST /api/v2/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x02DELETE /a HTTP/1.1\r\nContent-Length: 0\r\n\r\n"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x03POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for range 4 {
			_, ctx, err := readRequest(nil, r)
			if err != nil {
				return
			}
			if len(ctx.Request.Body()) > MaxBody {
				t.Fatalf("a body of %d bytes read", len(ctx.Request.Body()))
			}
		}
	})
}
