package main

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// beforeReleases is the commit the upgrade test starts from until the first release is tagged:
// the last one before releases were made (issue 36).
const beforeReleases = "108f135fd07029ed6da12964a971c04e204fcd87"

// previousRelease is what this build upgrades from: the newest release tag among its ancestors
// that is not on its own commit, or beforeReleases while there is none.
func previousRelease(t *testing.T) string {
	out, err := exec.Command("git", "-C", "../..", "tag", "--merged", "HEAD", "--sort=-v:refname", "--list", "v*").Output()
	if err != nil {
		t.Fatalf("git tag (the upgrade test needs the repository's history): %v", err)
	}
	head, err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range strings.Fields(string(out)) {
		commit, err := exec.Command("git", "-C", "../..", "rev-list", "-n", "1", tag).Output()
		if err == nil && strings.TrimSpace(string(commit)) != strings.TrimSpace(string(head)) {
			return tag
		}
	}
	return beforeReleases
}

// buildRelease builds the test binary of cmd/framefarm as a release had it (its harness runs it
// as framefarm with the same test plugins), from the repository's history.
func buildRelease(t *testing.T, rev string) string {
	t.Helper()
	src, tarball := t.TempDir(), filepath.Join(t.TempDir(), "release.tar")
	if out, err := exec.Command("git", "-C", "../..", "archive", "--format=tar", "-o", tarball, rev).CombinedOutput(); err != nil {
		t.Fatalf("git archive %s (the upgrade test needs the repository's history): %v\n%s", rev, err, out)
	}
	if out, err := exec.Command("tar", "-xf", tarball, "-C", src).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	binary := filepath.Join(t.TempDir(), "framefarm-"+rev+".test")
	build := exec.Command("go", "test", "-c", "-o", binary, "./cmd/framefarm")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", rev, err, out)
	}
	return binary
}

// TestARollingUpgradeLosesNothing: three replicas and two render nodes run the previous
// release; while clients create jobs with Idempotency-Keys (each sent again until
// acknowledged), they are upgraded one at a time as the README says: each follower stopped,
// started on this build and caught up, then the leader, then the nodes, drained one by one.
// Every acknowledged job is on every replica afterwards, one per key, and renders to its end.
func TestARollingUpgradeLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release")
	}
	previous := buildRelease(t, previousRelease(t))
	rs := newReplicaSet(t, 3, testTimings)
	for _, c := range rs.members {
		c.binary = previous
	}
	rs.start()
	leader := rs.leader()
	rs.members[0].control.answerAll(func(*renderCall) renderReply { return renderReply{Result: "finish"} })
	nodes := []*renderNode{}
	for _, id := range []string{"n1", "n2"} {
		on, n := rs.newNode(id)
		n.binary = previous
		nodes = append(nodes, on.runNode(n))
	}
	acme := leader.team("acme")
	tplID := acme.uploadTemplate(inspection())

	creations := startKeyedCreations(t, 2, "upgrade-", acme.token, tplID, func(int, int, int) string { return rs.balancer.url })
	upgrade := func(c *coordinator) {
		c.stop()
		c.binary = ""
		c.restart()
		reached, _ := rs.leader().status()
		pollUntil(t, fmt.Sprintf("replica %s reaches applied index %d after its upgrade", c.addr, reached.Applied), func() bool {
			s, ok := c.status()
			return ok && s.Applied >= reached.Applied
		})
	}
	time.Sleep(time.Second) // some creations under the previous release
	first := rs.leader()
	for _, c := range rs.members {
		if c != first {
			upgrade(c)
		}
	}
	upgrade(first)
	for _, n := range nodes {
		n.signal(syscall.SIGTERM)
		n.waitExit()
		n.binary = ""
		n.launch()
	}
	time.Sleep(time.Second) // some creations on this build
	acknowledged := creations.finish()
	if t.Failed() {
		return
	}
	if len(acknowledged) == 0 {
		t.Fatal("no creation was acknowledged")
	}
	t.Logf("%d jobs acknowledged across the upgrade from %s", len(acknowledged), previousRelease(t))

	final := rs.leader()
	onFinal := &client{c: final, token: acme.token}
	for key, id := range acknowledged {
		final.waitUntil("job "+id+" (key "+key+") finishes", func() bool { return onFinal.job(id).Status == "finished" })
	}
	rs.settle(acme)
	for _, c := range rs.members {
		on := &client{c: c, token: acme.token}
		listed := 0
		for from := 0; ; from += 1000 {
			var page []map[string]any
			on.must(http.MethodGet, fmt.Sprintf("/api/v2/jobs?limit=1000&from=%d", from), nil, http.StatusOK, &page)
			if listed += len(page); len(page) < 1000 {
				break
			}
		}
		if listed != len(acknowledged) {
			t.Fatalf("replica %s lists %d jobs for %d keys", c.addr, listed, len(acknowledged))
		}
		for key, id := range acknowledged {
			if j := on.job(id); j.Status != "finished" {
				t.Fatalf("replica %s shows job %s (key %s) %s", c.addr, id, key, j.Status)
			}
		}
	}
}
