// Package s3test runs a real S3 server for tests: SeaweedFS (`weed mini`), which `make test`
// builds from its Go module into a cache folder outside the checkout and names by
// $FRAMEFARM_WEED. Every port it opens is a loopback port chosen free, so several servers (and
// test packages) run side by side.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/framefarm/framefarm/persistence/porttest"
)

// EnvWeed names the SeaweedFS binary.
const EnvWeed = "FRAMEFARM_WEED"

// Server is a running SeaweedFS with an S3 endpoint, credentials and one bucket.
type Server struct {
	Endpoint             string
	AccessKey, SecretKey string
	Bucket               string

	bin, dir string
	args     []string
	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	log      *os.File
}

// Start starts a server for t, stopped when t ends. Without $FRAMEFARM_WEED t is skipped,
// saying how to get one: `make test` builds it.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := os.Getenv(EnvWeed)
	if bin == "" {
		t.Skipf("$%s names no SeaweedFS binary: make test builds one and sets it", EnvWeed)
	}
	s, err := Launch(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Launch starts the weed binary bin keeping its data in dir, on free loopback ports, and waits
// until its S3 endpoint answers with the bucket there.
func Launch(bin, dir string) (*Server, error) {
	var portErr error
	port := func() string {
		addr, err := porttest.Free()
		if err != nil {
			portErr = err
		}
		_, p, _ := net.SplitHostPort(addr)
		return p
	}
	s := &Server{AccessKey: "framefarm-test", SecretKey: "framefarm-test-secret-0123456789", Bucket: "framefarm", bin: bin, dir: dir}
	s3Port := port()
	s.Endpoint = "http://127.0.0.1:" + s3Port
	s.args = []string{"mini", "-dir=" + filepath.Join(dir, "data"), "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-s3.port=" + s3Port, "-s3.port.grpc=" + port(), "-s3.port.iceberg=0", "-s3.port.lance=0",
		"-master.port=" + port(), "-master.port.grpc=" + port(), "-volume.port=" + port(), "-volume.port.grpc=" + port(),
		"-filer.port=" + port(), "-filer.port.grpc=" + port(), "-webdav.port=" + port(),
		"-admin.port=" + port(), "-admin.port.grpc=" + port(), "-admin.port.legacy=0"}
	if portErr != nil {
		return nil, portErr
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, err
	}
	if err := s.start(); err != nil {
		return nil, err
	}
	if err := s.makeBucket(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Client is a client of the server with its credentials.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")})
}

// NewBucket makes another bucket, as a team's own bucket named in its jobs.
func (s *Server) NewBucket(name string) error {
	_, err := s.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)})
	return err
}

// makeBucket makes sure the bucket is there (the server makes it while it starts, maybe after
// its endpoint answers).
func (s *Server) makeBucket() error {
	client := s.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		_, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.Bucket)})
		if err == nil {
			return nil
		}
		client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
		select {
		case <-ctx.Done():
			return fmt.Errorf("the bucket %s is not there: %w", s.Bucket, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Server) start() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "weed.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	// The mini server makes these its S3 credentials and pre-creates the bucket.
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+s.AccessKey, "AWS_SECRET_ACCESS_KEY="+s.SecretKey, "S3_BUCKET="+s.Bucket)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.exited, s.log = cmd, exited, log
	s.mu.Unlock()
	return s.waitReady(exited)
}

// waitReady waits until the S3 endpoint answers (any status: it is serving).
func (s *Server) waitReady(exited chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Endpoint+"/"+s.Bucket+"/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusNotFound {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("SeaweedFS exited while starting: " + s.Log())
		case <-ctx.Done():
			s.Stop()
			return errors.New("SeaweedFS did not serve S3 within 90 s: " + s.Log())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Log is the end of the server's output.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop ends the server (its process group).
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited, log := s.cmd, s.exited, s.log
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
	log.Close()
}

// String names the server for messages.
func (s *Server) String() string {
	return "SeaweedFS at " + s.Endpoint + " (" + strconv.Quote(s.dir) + ")"
}

// Gate is a way to the server that a test closes and opens again: closed, connections are
// refused and those open are cut, as when the store is out of reach; the server keeps running,
// so opening is instant.
type Gate struct {
	// Endpoint is the server's S3 endpoint through the gate.
	Endpoint string

	addr, target string
	mu           sync.Mutex
	listener     net.Listener
	conns        map[net.Conn]bool
}

// Gate opens a gate to s on a free loopback port, closed when t ends.
func (s *Server) Gate(t testing.TB) *Gate {
	t.Helper()
	addr, err := porttest.Free()
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{Endpoint: "http://" + addr, addr: addr, target: strings.TrimPrefix(s.Endpoint, "http://"), conns: map[net.Conn]bool{}}
	if err := g.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// Open lets connections through again.
func (g *Gate) Open() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.listener != nil {
		return nil
	}
	l, err := net.Listen("tcp", g.addr)
	if err != nil {
		return err
	}
	g.listener = l
	go g.accept(l)
	return nil
}

// Close refuses new connections and cuts those open.
func (g *Gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.listener != nil {
		g.listener.Close()
		g.listener = nil
	}
	for c := range g.conns {
		c.Close()
	}
	clear(g.conns)
}

func (g *Gate) accept(l net.Listener) {
	for {
		client, err := l.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", g.target)
		if err != nil {
			client.Close()
			continue
		}
		g.mu.Lock()
		if g.listener != l { // closed meanwhile
			g.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		g.conns[client], g.conns[server] = true, true
		g.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			io.Copy(dst, src)
			dst.Close()
			src.Close()
			g.mu.Lock()
			delete(g.conns, dst)
			delete(g.conns, src)
			g.mu.Unlock()
		}
		go pipe(server, client)
		go pipe(client, server)
	}
}
