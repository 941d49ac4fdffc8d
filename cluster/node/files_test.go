package node

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/renderer"
)

// TestFailuresNameWhoseFaultTheyAre: what a node reports of a failed transfer or render says whose
// failure it is, because only the node's own count toward its quarantine: a file a user's URL
// does not give or the farm says is gone is the job's; the farm's store out of reach is the
// farm's; the node's disk, and a render gone silent, are the node's.
func TestFailuresNameWhoseFaultTheyAre(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("data"))
		case "/gone":
			http.NotFound(w, r)
		default:
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	f := &fileMover{Transfers: Transfers{Internal: srv.Client(), External: srv.Client()}, cacheDir: dir, maxBytes: 1 << 20, timeout: time.Minute, log: slog.New(slog.DiscardHandler)}
	fetch := func(path string, internal bool, dst string) protocol.Fault {
		err := f.fetch(context.Background(), protocol.Source{URL: srv.URL + path, Internal: internal}, dst)
		if err == nil {
			t.Fatalf("%s (internal %v) to %s: no error", path, internal, dst)
		}
		return faultOf(err, nil)
	}
	file := filepath.Join(dir, "file")
	noFolder := filepath.Join(dir, "missing", "file")
	cases := []struct {
		name string
		got  protocol.Fault
		want protocol.Fault
	}{
		{"a user's URL answering 404", fetch("/gone", false, file), protocol.FaultJob},
		{"a user's URL answering 503", fetch("/down", false, file), protocol.FaultJob},
		{"the farm saying its file is gone", fetch("/gone", true, file), protocol.FaultJob},
		{"the farm's store answering 503", fetch("/down", true, file), protocol.FaultFarm},
		{"the node's disk refusing the file", fetch("/ok", false, noFolder), protocol.FaultNode},
		{"an output the engine did not leave", faultOf(f.upload(context.Background(), protocol.Output{PutURL: srv.URL + "/ok"}, noFolder), nil), protocol.FaultNode},
		{"the farm refusing the output", faultOf(f.upload(context.Background(), protocol.Output{PutURL: srv.URL + "/down"}, writeFile(t, file)), nil), protocol.FaultFarm},
		{"a full disk", faultOf(&os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}, nil), protocol.FaultNode},
		{"a render gone silent", faultOf(context.Canceled, errSilent), protocol.FaultNode},
		{"an engine that died", faultOf(errors.Join(renderer.ErrNodeFault, errors.New("exit")), nil), protocol.FaultNode},
		{"the engine refusing the job's project", faultOf(errors.New("aerender: layer missing"), nil), protocol.FaultJob},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: fault %q, want %q", c.name, c.got, c.want)
		}
	}
	if !errors.Is(renderer.ErrNodeFault, renderer.ErrRetryable) || !errors.Is(renderer.ErrFarmFault, renderer.ErrRetryable) {
		t.Error("faults that are not the job's are not retryable")
	}
}

func writeFile(t *testing.T, p string) string {
	t.Helper()
	if err := os.WriteFile(p, []byte("output"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
