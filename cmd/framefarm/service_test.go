package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAServiceIsInstalledWithTheNodesFlags: `node service install` registers `node service run`
// with the node's own flags, takes --user out of them with its password from the environment,
// and refuses what would fail only once the service manager starts it: a flag the node does
// not know, a relative path (a service starts in the system's folder), no data folder.
func TestAServiceIsInstalledWithTheNodesFlags(t *testing.T) {
	t.Setenv(envClusterKey, "a-cluster-key-of-enough-length")
	config := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(config, []byte("[node]\npools = [\"ae\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	node := []string{"--join", "10.0.0.1:7946", "--slots", "2", "--data-dir", `C:\framefarm\node`, "--config=" + config, "--insecure"}
	env := func(password string) func(string) string {
		return func(name string) string {
			if name == envServicePassword {
				return password
			}
			return ""
		}
	}
	s, err := nodeServiceInstall(`C:\framefarm\framefarm.exe`, append([]string{"--user", `.\render`}, node...), env("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if want := append([]string{"node", "service", "run"}, node...); !slices.Equal(s.args, want) {
		t.Fatalf("args %q, want %q", s.args, want)
	}
	if s.name != "framefarm-node" || s.executable != `C:\framefarm\framefarm.exe` || s.user != `.\render` || s.password != "s3cret" {
		t.Fatalf("service %+v", s)
	}
	if s, err := nodeServiceInstall("/usr/local/bin/framefarm", append(slices.Clone(node[:4]), "--data-dir=/var/lib/node", "--insecure"), env("")); err != nil || s.user != "" {
		t.Fatalf("as LocalSystem: %+v, %v", s, err)
	}

	for _, c := range []struct {
		name     string
		args     []string
		password string
		want     string
	}{
		{"a user without a password", append([]string{"--user=.\\render"}, node...), "", envServicePassword},
		{"a user without a name", append(slices.Clone(node), "--user="), "pw", "--user needs an account"},
		{"a flag the node does not know", append(slices.Clone(node), "--colour", "red"), "", "colour"},
		{"a relative data folder", []string{"--join", "10.0.0.1:7946", "--data-dir", "node-data"}, "", "--data-dir node-data: a service needs an absolute path"},
		{"a relative configuration", append(slices.Clone(node), "--config", "config.toml"), "", "--config config.toml"},
		{"a relative certificate", append(slices.Clone(node[:6]), "--tls-cert", "node.pem", "--tls-key", `C:\k.pem`, "--tls-ca", `C:\ca.pem`), "", "--tls-cert node.pem"},
		{"no data folder", []string{"--join", "10.0.0.1:7946"}, "", "--data-dir is needed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := nodeServiceInstall(`C:\framefarm.exe`, c.args, env(c.password))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// serviceRun is a node run by superviseService in a test: it tells when its stop and now
// contexts end, and ends when told to.
type serviceRun struct {
	started, drained, stoppedNow chan struct{}
	end                          chan error
}

func newServiceRun() *serviceRun {
	return &serviceRun{started: make(chan struct{}), drained: make(chan struct{}), stoppedNow: make(chan struct{}), end: make(chan error)}
}

func (r *serviceRun) run(stop, now context.Context) error {
	close(r.started)
	go func() {
		<-stop.Done()
		close(r.drained)
	}()
	go func() {
		<-now.Done()
		close(r.stoppedNow)
	}()
	return <-r.end
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// superviseInTest runs superviseService and returns its requests, its reports and its result.
func superviseInTest(r *serviceRun) (chan<- serviceRequest, <-chan serviceState, <-chan error) {
	requests, reports, result := make(chan serviceRequest), make(chan serviceState, 16), make(chan error, 1)
	go func() { result <- superviseService(requests, func(s serviceState) { reports <- s }, r.run) }()
	return requests, reports, result
}

func expectReports(t *testing.T, reports <-chan serviceState, want ...serviceState) {
	t.Helper()
	for _, w := range want {
		if got := <-reports; got != w {
			t.Fatalf("reported %s, want %s", got, w)
		}
	}
}

// TestAServiceStopDrainsTheNode: the first stop drains the node (its renders finish), a second
// one stops it at once; the manager hears pending, running, stop pending and, once the node
// ended, stopped, and an interrogation hears the state again.
func TestAServiceStopDrainsTheNode(t *testing.T) {
	r := newServiceRun()
	requests, reports, result := superviseInTest(r)
	expectReports(t, reports, serviceStartPending, serviceRunning)
	<-r.started
	requests <- serviceInterrogate
	expectReports(t, reports, serviceRunning)
	requests <- serviceStop
	expectReports(t, reports, serviceStopPending)
	<-r.drained
	if closed(r.stoppedNow) {
		t.Fatal("the first stop stopped the node at once")
	}
	requests <- serviceStop
	expectReports(t, reports, serviceStopPending)
	<-r.stoppedNow
	r.end <- nil
	expectReports(t, reports, serviceStopped)
	if err := <-result; err != nil {
		t.Fatal(err)
	}
}

// TestAShutdownStopsTheNodeAtOnce: when the machine shuts down there is no time to drain.
func TestAShutdownStopsTheNodeAtOnce(t *testing.T) {
	r := newServiceRun()
	requests, reports, result := superviseInTest(r)
	expectReports(t, reports, serviceStartPending, serviceRunning)
	requests <- serviceShutdown
	expectReports(t, reports, serviceStopPending)
	<-r.drained
	<-r.stoppedNow
	r.end <- nil
	expectReports(t, reports, serviceStopped)
	if err := <-result; err != nil {
		t.Fatal(err)
	}
}

// TestANodeThatFailsStopsItsService: a node that ends on its own with an error reports
// stopped and hands the error on (the service manager's recovery then starts it again).
func TestANodeThatFailsStopsItsService(t *testing.T) {
	r := newServiceRun()
	_, reports, result := superviseInTest(r)
	expectReports(t, reports, serviceStartPending, serviceRunning)
	failure := errors.New("the coordinator refused this node's certificate")
	r.end <- failure
	expectReports(t, reports, serviceStopped)
	if err := <-result; !errors.Is(err, failure) {
		t.Fatalf("result %v", err)
	}
}
