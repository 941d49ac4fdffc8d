package balancer

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
)

// replica is an HTTP server on loopback that names itself in every answer and answers its
// readiness check as ready says.
type replica struct {
	name  string
	addr  string
	ready atomic.Bool
	srv   *http.Server
}

func startReplica(t *testing.T, name string) *replica {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, addr: l.Addr().String()}
	r.ready.Store(true)
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/readyz" && !r.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(req.Body)
		io.WriteString(w, r.name+":"+string(body))
	})}
	go r.srv.Serve(l)
	t.Cleanup(func() { r.srv.Close() })
	return r
}

type testBalancer struct {
	url     string
	clock   *clock.Fake
	changes chan string
}

func startBalancer(t *testing.T, replicas ...*replica) *testBalancer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, r := range replicas {
		addrs = append(addrs, r.addr)
	}
	tb := &testBalancer{url: "http://" + l.Addr().String(), clock: clock.NewFake(time.Unix(0, 0)), changes: make(chan string, 16)}
	b := New(l, addrs, time.Second, tb.clock, slog.New(slog.DiscardHandler))
	b.onChange = func(replica string, ready bool) {
		for _, r := range replicas {
			if r.addr == replica {
				tb.changes <- map[bool]string{true: "ready ", false: "down "}[ready] + r.name
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return tb
}

// ask posts body through the balancer on a new connection and returns who answered.
func (tb *testBalancer) ask(t *testing.T, body string) string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Post(tb.url, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	who, echoed, _ := strings.Cut(string(answer), ":")
	if echoed != body {
		t.Fatalf("%s answered %q to %q", who, echoed, body)
	}
	return who
}

// waitChanges waits until every change wanted was heard, in any order.
func (tb *testBalancer) waitChanges(t *testing.T, want ...string) {
	t.Helper()
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	for len(missing) > 0 {
		select {
		case got := <-tb.changes:
			delete(missing, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("no change %v", missing)
		}
	}
}

// TestConnectionsGoToTheReadyReplicas: connections take turns over the replicas; one that
// stops answering is passed over at once (the connection goes to the next), one whose check
// says it is not ready gets none after the check, and each is back once ready.
func TestConnectionsGoToTheReadyReplicas(t *testing.T) {
	a, b, c := startReplica(t, "a"), startReplica(t, "b"), startReplica(t, "c")
	tb := startBalancer(t, a, b, c)
	tb.waitChanges(t, "ready a", "ready b", "ready c")
	seen := map[string]int{}
	for range 6 {
		seen[tb.ask(t, strings.Repeat("x", 100_000))]++
	}
	if seen["a"] != 2 || seen["b"] != 2 || seen["c"] != 2 {
		t.Fatalf("6 connections went %v, not 2 to each", seen)
	}

	b.srv.Close()
	for range 6 {
		if who := tb.ask(t, "after b stopped"); who == "b" {
			t.Fatal("a connection went to a replica that stopped")
		}
	}
	tb.waitChanges(t, "down b")

	c.ready.Store(false)
	tb.clock.Advance(time.Second)
	tb.waitChanges(t, "down c")
	for range 4 {
		if who := tb.ask(t, "only a"); who != "a" {
			t.Fatalf("a connection went to %s while only a was ready", who)
		}
	}
	c.ready.Store(true)
	tb.clock.Advance(time.Second)
	tb.waitChanges(t, "ready c")
	seen = map[string]int{}
	for range 4 {
		seen[tb.ask(t, "c is back")]++
	}
	if seen["a"] != 2 || seen["c"] != 2 {
		t.Fatalf("4 connections went %v, not 2 to each of a and c", seen)
	}
}
