package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/framefarm/framefarm/persistence/porttest"
)

// envProfiles names a folder: the benchmarks that take profiles write there each process's CPU
// profile of their load (FRAMEFARM_PROFILES=DIR make bench; go tool pprof DIR/NAME.pprof).
const envProfiles = "FRAMEFARM_PROFILES"

// profiled serves Go's profiles on the coordinators of members when $FRAMEFARM_PROFILES is set
// (call it before they start): their configuration gets a [debug] table.
func profiled(t testing.TB, members ...*coordinator) {
	if os.Getenv(envProfiles) == "" {
		return
	}
	for _, c := range members {
		c.debugAddr = porttest.FreeAddr(t)
		f, err := os.OpenFile(filepath.Join(c.dir, "framefarm.toml"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fmt.Fprintf(f, "\n[debug]\nlisten = %q\n", c.debugAddr)
		if err := errors.Join(err, f.Close()); err != nil {
			t.Fatal(err)
		}
	}
}

// underProfile, when profiles are asked for ($FRAMEFARM_PROFILES), takes a 3-second CPU profile
// of each of members that serves them (profiled) while load runs again and again, and writes
// DIR/name-ID.pprof. The load's figures are not the benchmark's.
func underProfile(t testing.TB, name string, members map[string]*coordinator, load func()) {
	if os.Getenv(envProfiles) == "" {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		profiling(t, name, 3, members)()
	}()
	for {
		load()
		select {
		case <-done:
			return
		default:
		}
	}
}

// profiling takes a CPU profile of seconds from each of members that serves them (profiled),
// starting now; the returned function waits for them and writes DIR/name-ID.pprof.
func profiling(t testing.TB, name string, seconds int, members map[string]*coordinator) (wait func()) {
	dir := os.Getenv(envProfiles)
	if dir == "" {
		return func() {}
	}
	var wg sync.WaitGroup
	for id, c := range members {
		if c.debugAddr == "" {
			continue
		}
		wg.Go(func() {
			client := &http.Client{Timeout: time.Duration(seconds)*time.Second + 30*time.Second}
			resp, err := client.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", c.debugAddr, seconds))
			if err != nil {
				t.Errorf("profile of %s: %v", id, err)
				return
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			if err == nil {
				file := strings.NewReplacer("/", "-", "=", "").Replace(name) + "-" + id + ".pprof"
				err = os.WriteFile(filepath.Join(dir, file), raw, 0o644)
			}
			if err != nil {
				t.Errorf("profile of %s: %v", id, err)
			}
		})
	}
	return wg.Wait
}
