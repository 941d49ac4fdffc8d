// Package relay carries many small HTTP requests, and their answers, over one connection at
// once: what a follower replica hands to its leader. A plain HTTP connection carries one request
// at a time, so each costs a write and a read on both sides; here a request waiting for the
// raft commit holds back no other, and the requests (and the answers) that come together go out
// in one write.
//
// On the wire each request is its sequence number (8 bytes, big-endian) followed by the request
// as HTTP/1.1 with a Content-Length; each answer is the sequence number of its request followed
// by the answer as HTTP/1.1. Answers come in the order they are ready.
package relay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/cluster/clock"
)

// MaxBody is the largest request body the relay carries; larger ones go by plain HTTP.
const MaxBody = 64 << 10

// maxAnswer bounds an answer's body.
const maxAnswer = 64 << 20

// bufferSize is each connection's read and write buffer.
const bufferSize = 64 << 10

// ErrClosed is the error of a request whose connection closed before its answer came.
var ErrClosed = errors.New("the relay's connection closed")

// Carries reports whether the relay carries req: a write whose body is known and small (a read,
// an upload or a body of unknown length goes by plain HTTP).
func Carries(req *fasthttp.Request) bool {
	if req.Header.IsGet() || req.Header.IsHead() {
		return false
	}
	n := req.Header.ContentLength()
	return n >= 0 && n <= MaxBody
}

// Client sends requests over one connection, opened when the first is sent and again after it
// broke.
type Client struct {
	dial    func() (net.Conn, error)
	timeout time.Duration
	clock   clock.Clock

	mu     sync.Mutex
	conn   *clientConn
	closed bool
}

// NewClient makes a client that opens its connection with dial and waits at most timeout, on clk,
// for an answer.
func NewClient(dial func() (net.Conn, error), timeout time.Duration, clk clock.Clock) *Client {
	return &Client{dial: dial, timeout: timeout, clock: clk}
}

// Do sends req, whose body must be whole (Carries), and puts the answer in resp.
func (c *Client) Do(req *fasthttp.Request, resp *fasthttp.Response) error {
	cc, err := c.connection()
	if err != nil {
		return err
	}
	call := &call{resp: resp, done: make(chan error, 1)}
	if err := cc.send(call, req); err != nil {
		return err
	}
	expired := make(chan struct{})
	timer := c.clock.AfterFunc(c.timeout, func() { close(expired) })
	defer timer.Stop()
	select {
	case err := <-call.done:
		return err
	case <-expired:
		if cc.forget(call) {
			return fmt.Errorf("no answer within %s", c.timeout)
		}
		return <-call.done // the answer was being read into resp: wait for it
	}
}

// Close closes the connection; requests waiting for answers fail with ErrClosed.
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	cc := c.conn
	c.conn = nil
	c.mu.Unlock()
	if cc != nil {
		cc.fail(ErrClosed)
	}
}

func (c *Client) connection() (*clientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.conn != nil && !c.conn.broken() {
		return c.conn, nil
	}
	conn, err := c.dial()
	if err != nil {
		return nil, err
	}
	c.conn = newClientConn(conn)
	return c.conn, nil
}

// call is one request waiting for its answer.
type call struct {
	seq   uint64
	frame *bytes.Buffer // the request as sent: its sequence number, then HTTP
	resp  *fasthttp.Response
	done  chan error
}

var frames = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// clientConn is one connection: a writer sends what Do queues, a reader hands each answer to its
// request.
type clientConn struct {
	conn  net.Conn
	queue chan *call

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*call
	err     error // set once the connection broke
	stop    chan struct{}
}

func newClientConn(conn net.Conn) *clientConn {
	cc := &clientConn{conn: conn, queue: make(chan *call, 256), pending: map[uint64]*call{}, stop: make(chan struct{})}
	go cc.write()
	go cc.read()
	return cc
}

func (cc *clientConn) broken() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.err != nil
}

// send queues req for c. The request is copied out, so the caller may reuse it once Do returns,
// even without an answer.
func (cc *clientConn) send(c *call, req *fasthttp.Request) error {
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return cc.err
	}
	cc.next++
	c.seq = cc.next
	cc.pending[c.seq] = c
	cc.mu.Unlock()
	c.frame = frames.Get().(*bytes.Buffer)
	c.frame.Reset()
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], c.seq)
	c.frame.Write(seq[:])
	if _, err := req.WriteTo(c.frame); err != nil {
		cc.forget(c)
		frames.Put(c.frame)
		return err
	}
	select {
	case cc.queue <- c:
		return nil
	case <-cc.stop:
		cc.forget(c)
		return ErrClosed
	}
}

// forget drops a request no longer waited for; false if its answer is already being read.
func (cc *clientConn) forget(c *call) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.pending[c.seq] != c {
		return false
	}
	delete(cc.pending, c.seq)
	return true
}

// take removes the request an answer is for.
func (cc *clientConn) take(seq uint64) *call {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	c := cc.pending[seq]
	delete(cc.pending, seq)
	return c
}

// fail breaks the connection: every request waiting fails with err.
func (cc *clientConn) fail(err error) {
	cc.mu.Lock()
	if cc.err != nil {
		cc.mu.Unlock()
		return
	}
	cc.err = err
	waiting := cc.pending
	cc.pending = map[uint64]*call{}
	close(cc.stop)
	cc.mu.Unlock()
	cc.conn.Close()
	for _, c := range waiting {
		c.done <- err
	}
}

// write sends queued requests, several per write when they come together.
func (cc *clientConn) write() {
	w := bufio.NewWriterSize(cc.conn, bufferSize)
	for {
		var c *call
		select {
		case c = <-cc.queue:
		case <-cc.stop:
			return
		}
		for c != nil {
			_, err := w.Write(c.frame.Bytes())
			frames.Put(c.frame)
			if err != nil {
				cc.fail(fmt.Errorf("sending requests: %w", err))
				return
			}
			c, _ = next(cc.queue)
		}
		if err := w.Flush(); err != nil {
			cc.fail(fmt.Errorf("sending requests: %w", err))
			return
		}
	}
}

// next takes what waits on ch. When nothing does, it first lets the goroutines ready to run go
// once: what they are about to send then goes out in the same write.
func next[T any](ch <-chan T) (T, bool) {
	select {
	case v, ok := <-ch:
		return v, ok
	default:
	}
	runtime.Gosched()
	select {
	case v, ok := <-ch:
		return v, ok
	default:
		var none T
		return none, false
	}
}

// read hands each answer to its request.
func (cc *clientConn) read() {
	r := bufio.NewReaderSize(cc.conn, bufferSize)
	var seq [8]byte
	for {
		if _, err := io.ReadFull(r, seq[:]); err != nil {
			cc.fail(readError(err))
			return
		}
		c := cc.take(binary.BigEndian.Uint64(seq[:]))
		var resp *fasthttp.Response
		if c != nil {
			resp = c.resp
		} else {
			resp = &fasthttp.Response{} // an answer no longer waited for, read to be dropped
		}
		err := resp.ReadLimitBody(r, maxAnswer)
		if c != nil {
			if err != nil {
				err = fmt.Errorf("reading an answer: %w", err)
			}
			c.done <- err
		}
		if err != nil {
			cc.fail(fmt.Errorf("reading an answer: %w", err))
			return
		}
	}
}

func readError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("reading answers: %w", err)
}

// Server answers the requests that come on relay connections with a fasthttp handler.
type Server struct {
	Handler fasthttp.RequestHandler

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool
	serving sync.WaitGroup // connections being served
}

// maxInFlight bounds the requests of one connection being answered at once; past it the server
// reads no more until one is answered.
const maxInFlight = 1024

// Serve answers the connections l yields, until l fails; after Shutdown it refuses them.
func (s *Server) Serve(l net.Listener) error {
	for {
		conn, err := l.Accept()
		if err != nil {
			return err
		}
		if !s.track(conn) {
			conn.Close() // shut down: every connection is refused
			continue
		}
		go func() {
			defer s.serving.Done()
			s.serve(conn)
		}()
	}
}

func (s *Server) track(conn net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[conn] = struct{}{}
	s.serving.Add(1)
	return true
}

// Shutdown stops reading requests and waits for those read to be answered; when ctx ends first,
// it closes the connections and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for conn := range s.conns {
		conn.SetReadDeadline(time.Now()) // the reader stops; answers still go out
	}
	s.mu.Unlock()
	finished := make(chan struct{})
	go func() { s.serving.Wait(); close(finished) }()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for conn := range s.conns {
			conn.Close()
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

// answered is a request with its sequence number: handed to a handler, then answered.
type answered struct {
	seq uint64
	ctx *fasthttp.RequestCtx
}

// serve reads requests off conn and answers each as its handler returns. A request it cannot
// read ends the connection: the peer is another replica, which sends none.
func (s *Server) serve(conn net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
		conn.Close()
	}()
	answers := make(chan answered, maxInFlight)
	slots := make(chan struct{}, maxInFlight)
	var handlers sync.WaitGroup
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		writeAnswers(conn, answers, slots)
	}()
	// Handlers run on goroutines kept for the connection's life: a new goroutine for each request
	// would grow its stack again to the handler's depth, copying it each time.
	work := make(chan answered)
	handle := func(a answered) {
		defer handlers.Done()
		for ok := true; ok; a, ok = <-work {
			s.answer(a.ctx)
			answers <- a
		}
	}
	r := bufio.NewReaderSize(conn, bufferSize)
	for {
		slots <- struct{}{}
		seq, ctx, err := readRequest(conn, r)
		if err != nil {
			break
		}
		select {
		case work <- answered{seq, ctx}: // an idle handler took it
		default:
			handlers.Add(1)
			go handle(answered{seq, ctx})
		}
	}
	close(work)
	handlers.Wait()
	close(answers)
	<-writerDone
}

// readRequest reads the next request.
func readRequest(conn net.Conn, r *bufio.Reader) (uint64, *fasthttp.RequestCtx, error) {
	var seq [8]byte
	if _, err := io.ReadFull(r, seq[:]); err != nil {
		return 0, nil, err
	}
	ctx := &fasthttp.RequestCtx{}
	ctx.Init2(conn, quiet{}, false)
	if err := ctx.Request.Header.Read(r); err != nil {
		return 0, nil, err
	}
	if !Carries(&ctx.Request) {
		return 0, nil, fmt.Errorf("a request the relay does not carry: %s, body of %d bytes", ctx.Request.Header.Method(), ctx.Request.Header.ContentLength())
	}
	if err := ctx.Request.ContinueReadBody(r, MaxBody, false); err != nil {
		return 0, nil, err
	}
	// Handlers read bodies as streams, as the HTTP server gives them.
	body := ctx.Request.Body()
	ctx.Request.SetBodyStream(bytes.NewReader(body), len(body))
	return binary.BigEndian.Uint64(seq[:]), ctx, nil
}

// quiet is the requests' logger: the handler logs what it does itself.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// answer runs the handler; an answer streamed is read whole, up to maxAnswer.
func (s *Server) answer(ctx *fasthttp.RequestCtx) {
	s.Handler(ctx)
	if !ctx.Response.IsBodyStream() {
		return
	}
	body, err := io.ReadAll(io.LimitReader(ctx.Response.BodyStream(), maxAnswer+1))
	ctx.Response.CloseBodyStream()
	if err != nil || len(body) > maxAnswer {
		ctx.Response.Reset()
		ctx.Response.SetStatusCode(fasthttp.StatusBadGateway)
		ctx.Response.SetBodyString("the answer could not be relayed")
		return
	}
	ctx.Response.SetBody(body)
}

// writeAnswers sends answers as they are ready, several per write when they come together,
// freeing a slot for each.
func writeAnswers(conn net.Conn, answers <-chan answered, slots <-chan struct{}) {
	w := bufio.NewWriterSize(conn, bufferSize)
	var seq [8]byte
	failed := false
	for a := range answers {
		for ok := true; ok; {
			if !failed {
				binary.BigEndian.PutUint64(seq[:], a.seq)
				w.Write(seq[:])
				failed = a.ctx.Response.Write(w) != nil
			}
			<-slots
			a, ok = next(answers)
		}
		if !failed && w.Flush() != nil {
			failed = true
		}
		if failed {
			conn.Close() // the reader stops; the answers left are dropped
		}
	}
}
