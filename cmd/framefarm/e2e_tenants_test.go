package main

// A hostile tenant against the others: what one team sends must never stop, slow or reveal
// another team's work, shared render nodes included.

import (
	"net/http"
	"strings"
	"testing"
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

// errorText is a job's error, or what it has instead.
func errorText(j job) string {
	if j.Stats.Error == nil {
		return "no error, status " + j.Status
	}
	return *j.Stats.Error
}
