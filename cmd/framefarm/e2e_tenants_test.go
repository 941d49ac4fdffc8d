package main

// A hostile tenant against the others: what one team sends must never stop, slow or reveal
// another team's work, shared render nodes included.

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/framefarm/framefarm/actors"
)

// TestBadInputNeverQuarantinesASharedNode: one team's jobs whose input the node refuses (a video
// asset that is an HLS playlist, an image URL that answers 404) fail with that reason and leave
// the node's fail streak alone, while another team's jobs keep rendering on the same node.
func TestBadInputNeverQuarantinesASharedNode(t *testing.T) {
	c := startCoordinator(t, options{slots: 1, realEngines: true})
	acme, mallory := c.team("acme"), c.team("mallory")
	good := acme.uploadTemplateFile("zip", fixtureZip(t, "lottie/synthetic"))
	bad := mallory.uploadTemplateFile("zip", fixtureZip(t, "lottie/synthetic"))
	playlist := "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1.0,\nsegment.ts\n#EXT-X-ENDLIST\n"
	files := newFileServer(t, map[string][]byte{"/clip.mp4": []byte(playlist)})
	short := func(job map[string]any) map[string]any {
		job["settings"] = map[string]any{"type": "video", "frames": []int{0, 4}, "codec": "h264_vbr_1mbps"}
		return job
	}
	submit := func(cl *client, job map[string]any) string {
		var cr created
		cl.must(http.MethodPost, "/api/v2/jobs", short(job), http.StatusCreated, &cr)
		return cr.ID
	}
	badJob := func(i int) string {
		asset := map[string]any{"type": "video", "layerName": "Photo", "src": files + "/clip.mp4"}
		if i%2 == 1 {
			asset = map[string]any{"type": "image", "layerName": "Photo", "src": files + "/gone.jpg"}
		}
		return submit(mallory, kenburnsJob(bad.ID, asset))
	}
	reasons := []string{"not a readable media file", "404"}
	badEnds := func(ids []string) {
		for i, id := range ids {
			if state := c.waitFor("job", id, "finished", "error"); state != "error" {
				t.Fatalf("bad job %s ended %s", id, state)
			}
			if text := errorText(mallory.job(id)); !strings.Contains(text, reasons[i%2]) {
				t.Fatalf("bad job %s failed without its reason (%q): %s", id, reasons[i%2], text)
			}
		}
	}
	goodEnds := func(ids []string) {
		for _, id := range ids {
			if state := c.waitFor("job", id, "finished", "error"); state != "finished" {
				t.Fatalf("acme's job %s ended %s: %s", id, state, errorText(acme.job(id)))
			}
		}
	}
	node := func() (state string, failStreak int) {
		var nodes []struct {
			State      string `json:"state"`
			FailStreak int    `json:"failStreak"`
		}
		(&client{c: c, token: adminToken}).must(http.MethodGet, "/api/v2/nodes", nil, http.StatusOK, &nodes)
		if len(nodes) != 1 {
			t.Fatalf("%d nodes", len(nodes))
		}
		return nodes[0].State, nodes[0].FailStreak
	}

	// Ten bad jobs with acme's among them.
	var badJobs, goodJobs []string
	for i := range 10 {
		badJobs = append(badJobs, badJob(i))
		if i%3 == 0 {
			goodJobs = append(goodJobs, submit(acme, kenburnsJob(good.ID)))
		}
	}
	badEnds(badJobs)
	goodEnds(goodJobs)
	// Three more alone, with no render of acme's between them to clear a streak.
	badEnds([]string{badJob(0), badJob(1), badJob(2)})
	if state, streak := node(); state != "ready" || streak != 0 {
		t.Fatalf("the shared node after thirteen bad jobs: %s, fail streak %d", state, streak)
	}
	goodEnds([]string{submit(acme, kenburnsJob(good.ID))})
}

// TestOneTeamsSilentJobsNeverQuarantineANode: on a freshly started coordinator, whose one node
// has rendered no other team's work, one team's renders going silent make the node test itself
// and take no work meanwhile; the test passes, so the node goes back to work and another team's
// job renders there. When the self-test fails, the node is quarantined, saying why.
func TestOneTeamsSilentJobsNeverQuarantineANode(t *testing.T) {
	c := startCoordinator(t, options{slots: 1, config: "\n[node]\nsilence_timeout = \"1s\"\n"})
	admin, mallory, acme := &client{c: c, token: adminToken}, c.team("mallory"), c.team("acme")
	silent, good := mallory.uploadTemplate(inspection()), acme.uploadTemplate(inspection())
	type nodeView struct {
		ID         string `json:"id"`
		State      string `json:"state"`
		Reason     string `json:"reason"`
		FailStreak int    `json:"failStreak"`
	}
	node := func() nodeView {
		var nodes []nodeView
		admin.must(http.MethodGet, "/api/v2/nodes", nil, http.StatusOK, &nodes)
		if len(nodes) != 1 {
			t.Fatalf("%d nodes", len(nodes))
		}
		return nodes[0]
	}
	submit := func(cl *client, tpl string) string {
		var cr created
		cl.must(http.MethodPost, "/api/v2/jobs", renderJob(tpl), http.StatusCreated, &cr)
		return cr.ID
	}
	id := node().ID
	// silentUntilSelfTest leaves every render unanswered, so the node stops each as silent,
	// until the node runs its self-test, which it answers with reply.
	silentUntilSelfTest := func(reply renderReply) {
		for {
			if call := c.control.next(t); call.SelfTest {
				if call.Node != "" && call.Node != id || call.Engine != "lottie" {
					t.Fatalf("a self-test of %q on %q, want lottie on %s", call.Engine, call.Node, id)
				}
				call.answer(reply)
				return
			}
		}
	}

	var readyBefore int
	c.Read(func() { readyBefore = c.counts["node "+id+" ready"] })
	for range 3 {
		submit(mallory, silent)
	}
	silentUntilSelfTest(renderReply{Result: "finish"})
	c.waitNode(id, actors.NodeTesting)
	c.waitCount("node", id, string(actors.NodeReady), readyBefore+1)
	if n := node(); n.State != "ready" || n.FailStreak != 0 {
		t.Fatalf("the node after its self-test passed: %+v", n)
	}
	c.control.answerAll(finishAll)
	acmes := submit(acme, good)
	if state := c.waitFor("job", acmes, "finished", "error"); state != "finished" {
		t.Fatalf("acme's job on the node mallory's jobs failed on ended %s: %s", state, errorText(acme.job(acmes)))
	}

	// The same again, but the self-test fails: the node is at fault.
	c.control.answerAll(nil)
	for range 3 {
		submit(mallory, silent)
	}
	silentUntilSelfTest(renderReply{Result: "fail", Message: "the engine cannot start"})
	c.waitNode(id, actors.NodeQuarantined)
	if n := node(); n.State != "quarantined" || !strings.Contains(n.Reason, "self-test failed: the engine cannot start") {
		t.Fatalf("the node after its self-test failed: %+v", n)
	}
}

// errorText is a job's error, or what it has instead.
func errorText(j job) string {
	if j.Stats.Error == nil {
		return "no error, status " + j.Status
	}
	return *j.Stats.Error
}

// TestEventStreamsEndWithTheirToken: a token revoked while its event streams are open closes
// them at once (the farm's stream of the admin too), a token that expires closes them when it
// expires, and one token holds at most 8 streams at a time.
func TestEventStreamsEndWithTheirToken(t *testing.T) {
	c := startCoordinator(t, options{})
	admin := &client{c: c, token: adminToken}
	issue := func(expires time.Time) (*client, string) {
		var issued struct {
			ID    string `json:"id"`
			Token string `json:"token"`
		}
		body := map[string]any{"team": "acme"}
		if !expires.IsZero() {
			body["expiresAt"] = expires
		}
		admin.must(http.MethodPost, "/api/v2/admin/tokens", body, http.StatusCreated, &issued)
		return &client{c: c, token: issued.Token}, issued.ID
	}

	revoked, id := issue(time.Time{})
	streams := []*eventStream{revoked.events(), revoked.events()}
	other, _ := issue(time.Time{})
	kept := other.events()
	admin.must(http.MethodDelete, "/api/v2/admin/tokens/"+id, nil, http.StatusOK, nil)
	for _, s := range streams {
		if took := s.ends(); took > 5*time.Second {
			t.Fatalf("a revoked token's stream ended %s after the revocation (keep-alives come every 15 s)", took)
		}
	}
	revoked.fails(http.MethodGet, "/api/v2/events", nil, http.StatusUnauthorized, "unauthorized")

	expiring, _ := issue(time.Now().Add(2 * time.Second))
	stream := expiring.events()
	started := time.Now()
	stream.ends()
	if took := time.Since(started); took < time.Second || took > 7*time.Second {
		t.Fatalf("a stream of a token valid for 2 s ended after %s", took)
	}

	// Eight streams of one token; a ninth is refused with the reason, and one closed frees a place.
	eight := []*eventStream{kept}
	for range 7 {
		eight = append(eight, other.events())
	}
	if e := other.fails(http.MethodGet, "/api/v2/events", nil, http.StatusTooManyRequests, "rate_limited"); !strings.Contains(e.Error, "event streams") {
		t.Fatalf("the ninth stream: %+v", e)
	}
	eight[1].resp.Body.Close()
	// The server notices a closed stream when a write to it fails (the first may still reach
	// the connection's buffers): each new template of the team is an event written to every
	// stream of it, which the stream left open sees.
	for written := 1; ; written++ {
		other.uploadTemplate(inspection())
		kept.next(func(ev streamedEvent) bool { return ev.Type == "template" })
		resp := other.openEvents()
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if written == 5 {
			t.Fatalf("a closed stream still holds its place after %d events written to it", written)
		}
	}
}

// ends reads the stream until it ends and says how long that took; it fails the test if the
// stream is still open after waitLimit.
func (s *eventStream) ends() time.Duration {
	s.t.Helper()
	started := time.Now()
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, s.resp.Body)
		close(done)
	}()
	select {
	case <-done:
		return time.Since(started)
	case <-time.After(waitLimit):
		s.resp.Body.Close()
		s.t.Fatalf("the event stream is still open after %s", waitLimit)
	}
	return 0
}
