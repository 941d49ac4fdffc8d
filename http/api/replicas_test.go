package api

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/replicas"
)

// leadingReplica is a replica that leads, counting the reads that catch up first.
type leadingReplica struct{ catchUps atomic.Int32 }

var _ Replicas = (*leadingReplica)(nil)

func (*leadingReplica) Leading() bool { return true }
func (*leadingReplica) Forward(*fasthttp.RequestCtx) error {
	return errors.New("it leads: nothing is handed on")
}
func (*leadingReplica) OutOfTouch() bool { return false }
func (*leadingReplica) Detour(*fasthttp.RequestCtx) error {
	return errors.New("it leads: nothing is detoured")
}
func (r *leadingReplica) CatchUp(time.Time) error          { r.catchUps.Add(1); return nil }
func (*leadingReplica) Staleness() (uint64, time.Duration) { return 42, 1500 * time.Millisecond }
func (*leadingReplica) StaleReadable(time.Time) error      { return nil }
func (*leadingReplica) SealRevocation() error              { return nil }
func (*leadingReplica) Status() replicas.Status            { return replicas.Status{} }
func (*leadingReplica) AddReplica(string, string) error    { return nil }
func (*leadingReplica) RemoveReplica(string) error         { return nil }

// TestAStaleReadAnswersWithoutCatchingUp: ?stale (alone, true or 1) reads a replica's records
// as they are, saying how far behind they may be; false reads as by default; any other value is
// refused; the routes that check their query never see it; a coordinator alone takes it.
func TestAStaleReadAnswersWithoutCatchingUp(t *testing.T) {
	replica := &leadingReplica{}
	_, base := serveWithDeps(t, io.Discard, Config{AdminToken: "stale-admin"}, clock.Real{}, func(d *Deps) { d.Replicas = replica })
	get := func(base, token, path string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	token := issueToken(t, base, "stale-admin")
	for _, c := range []struct {
		path     string
		status   int
		catchUps int32
		stale    bool
	}{
		{"/api/v2/jobs", http.StatusOK, 1, false},
		{"/api/v2/jobs?stale", http.StatusOK, 0, true},
		{"/api/v2/jobs?stale=true&limit=5", http.StatusOK, 0, true},
		{"/api/v2/batches?stale=1", http.StatusOK, 0, true},
		{"/api/v3/templates?stale", http.StatusOK, 0, true},
		{"/api/v3/templates", http.StatusOK, 1, false},
		{"/api/v2/jobs?stale=false", http.StatusOK, 1, false},
		{"/api/v2/jobs?stale=maybe", http.StatusBadRequest, 0, false},
	} {
		before := replica.catchUps.Load()
		resp, body := get(base, token, c.path)
		if resp.StatusCode != c.status {
			t.Fatalf("GET %s: %d, want %d: %s", c.path, resp.StatusCode, c.status, body)
		}
		if got := replica.catchUps.Load() - before; got != c.catchUps {
			t.Errorf("GET %s caught up %d times, want %d", c.path, got, c.catchUps)
		}
		applied, contact := resp.Header.Get("X-Framefarm-Applied-Index"), resp.Header.Get("X-Framefarm-Last-Contact")
		if c.stale != (applied == "42" && contact == "1500") || (!c.stale && (applied != "" || contact != "")) {
			t.Errorf("GET %s: applied index %q, last contact %q", c.path, applied, contact)
		}
		if c.status == http.StatusBadRequest {
			var e struct{ Code string }
			if json.Unmarshal(body, &e); e.Code != "validation_error" {
				t.Errorf("GET %s: %s", c.path, body)
			}
		}
	}

	_, alone := serveWith(t, io.Discard, Config{AdminToken: "stale-admin"}, clock.Real{})
	if resp, _ := get(alone, issueToken(t, alone, "stale-admin"), "/api/v2/jobs?stale"); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Framefarm-Applied-Index") != "" {
		t.Fatalf("a coordinator alone answered ?stale %d, applied index %q", resp.StatusCode, resp.Header.Get("X-Framefarm-Applied-Index"))
	}
}
