package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/persistence/secretbox"
)

// serveForTest runs the API over loopback on a real store and real actors.
func serveForTest(t testing.TB, log io.Writer) (*Server, string) {
	t.Helper()
	return serveWith(t, log, Config{}, clock.Real{})
}

// serveWith is serveForTest with a configuration and a clock.
func serveWith(t testing.TB, log io.Writer, cfg Config, clk clock.Clock) (*Server, string) {
	t.Helper()
	return serveWithDeps(t, log, cfg, clk, func(*Deps) {})
}

// serveWithDeps is serveWith with deps changed by edit before the server starts.
func serveWithDeps(t testing.TB, log io.Writer, cfg Config, clk clock.Clock, edit func(*Deps)) (*Server, string) {
	t.Helper()
	store, err := persistence.Open(filepath.Join(t.TempDir(), "framefarm.db"), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ids := persistence.NewIDs()
	box, _ := secretbox.New(make([]byte, 32))
	coord := actors.New(actors.Config{}, actors.Deps{Store: store, Secrets: box, Clock: clk, IDs: ids, Logger: logger})
	if err := coord.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Stop(context.Background()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	files, err := blobs.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	deps := Deps{Coordinator: coord, Store: store, Blobs: files, URLs: blobs.NewSigner(base, make([]byte, 32)),
		Clock: clk, IDs: ids, Logger: logger}
	edit(&deps)
	s := New(cfg, deps)
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, base
}

func TestDrainRefusesAPIRequestsButNotHealthOrFiles(t *testing.T) {
	s, base := serveForTest(t, io.Discard)
	s.Drain()
	resp, err := http.Get(base + "/api/v2/jobs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "5" || !strings.Contains(string(body), `"code":"unavailable"`) {
		t.Fatalf("while draining: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 503, "/files/outputs/x/1/y.mp4": 403} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s while draining: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

func TestRequestIDsReachTheLogAndTheAnswer(t *testing.T) {
	var log lockedLog
	_, base := serveForTest(t, &log)
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v2/jobs", nil)
	req.Header.Set("X-Request-Id", "trace-42")
	req.Header.Set("Authorization", "Bearer ff_secret_token_value")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("X-Request-Id") != "trace-42" {
		t.Fatalf("status %d, request id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	resp, _ = http.Get(base + "/healthz")
	resp.Body.Close()
	if id := resp.Header.Get("X-Request-Id"); len(id) != 24 {
		t.Fatalf("generated request id %q", id)
	}
	if !strings.Contains(log.String(), "request_id=trace-42") || strings.Contains(log.String(), "ff_secret_token_value") {
		t.Fatalf("log:\n%s", log.String())
	}
}

type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestActorTimeoutsAnswer503: an actor that did not answer in time is an overload the client
// may retry, not an internal error.
func TestActorTimeoutsAnswer503(t *testing.T) {
	var ctx fasthttp.RequestCtx
	r := &request{ctx: &ctx, log: slog.New(slog.DiscardHandler)}
	r.failErr(fmt.Errorf("cancel walk: %w", actors.ErrUnavailable), nil)
	if ctx.Response.StatusCode() != http.StatusServiceUnavailable || string(ctx.Response.Header.Peek("Retry-After")) != "1" ||
		!strings.Contains(string(ctx.Response.Body()), `"code":"unavailable"`) {
		t.Fatalf("answer %d %q %s", ctx.Response.StatusCode(), ctx.Response.Header.Peek("Retry-After"), ctx.Response.Body())
	}
}

// TestLongTransfersHaveTheTransferTimeout: files, event streams and backups (which stream a
// whole farm) may take the transfer timeout; any other request the request timeout.
func TestLongTransfersHaveTheTransferTimeout(t *testing.T) {
	s := &Server{cfg: Config{RequestTimeout: time.Minute, TransferTimeout: time.Hour}}
	for uri, want := range map[string]time.Duration{
		"/files/outputs/x": time.Hour, APIPrefix + "/events": time.Hour, APIPrefix + "/admin/backup": time.Hour,
		APIPrefix + "/jobs": time.Minute, APIPrefix + "/admin/teams": time.Minute,
	} {
		var h fasthttp.RequestHeader
		h.SetRequestURI(uri)
		if got := s.requestLimits(&h); got.WriteTimeout != want || got.ReadTimeout != want {
			t.Errorf("%s: %+v, want %s", uri, got, want)
		}
	}
}
