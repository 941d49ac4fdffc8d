package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/renderer/ffmpeg"
	"github.com/framefarm/framefarm/renderer/framediff"
)

// splitJob is a render of the test template's "main" composition (150 frames) split into chunks
// of frames frames.
func splitJob(templateID string, frames int) map[string]any {
	j := renderJob(templateID)
	j["chunks"] = map[string]any{"frames": frames}
	return j
}

// submitSplit uploads the test template and creates a job of its 150 frames split into three
// 50-frame chunks.
func submitSplit(cl *client) created {
	cl.c.t.Helper()
	var made created
	cl.must(http.MethodPost, "/api/v2/jobs", splitJob(cl.uploadTemplate(inspection()), 50), http.StatusCreated, &made)
	return made
}

// logHas fails the test unless the job's log holds every line.
func logHas(t *testing.T, cl *client, id string, lines ...string) {
	t.Helper()
	log := cl.logs(id)
	for _, want := range lines {
		if !strings.Contains(log, want) {
			t.Fatalf("the log lacks %q:\n%s", want, log)
		}
	}
}

// chunkCalls takes the next n render calls, which must be chunks, by their first frame.
func chunkCalls(t *testing.T, c *coordinator, n int) map[int]*renderCall {
	t.Helper()
	calls := map[int]*renderCall{}
	for range n {
		call := c.control.next(t)
		if !call.Chunk || call.Settings.Frames == nil {
			t.Fatalf("a render that is not a chunk: %+v", call)
		}
		calls[call.Settings.Frames.Start] = call
	}
	return calls
}

// TestASplitJobSpreadsOverNodesAndJoinsItsChunks: a job asking for 50-frame chunks of 150 frames
// renders as three chunks on two nodes; to its client it stays one job, queued, then rendering
// with a frame-weighted progress and its chunks in GET /jobs/{id}; its log says which node
// rendered which frames; the join gets the chunks in frame order, and the job's output is the
// join's.
func TestASplitJobSpreadsOverNodesAndJoinsItsChunks(t *testing.T) {
	c, cl, _ := clusterFarm(t, 2)
	made := submitSplit(cl)
	if made.Status != "queued" || len(made.Children) != 0 {
		t.Fatalf("created %+v", made)
	}
	calls := chunkCalls(t, c, 2)
	nodes := map[string]bool{}
	for _, call := range calls {
		nodes[call.Node] = true
	}
	if len(nodes) != 2 || calls[0] == nil || calls[50] == nil {
		t.Fatalf("the first two chunks did not start on both nodes: %v", calls)
	}
	for start, call := range calls {
		if f := call.Settings.Frames; f.End != start+49 || !f.Range {
			t.Fatalf("chunk from %d renders %+v", start, f)
		}
	}
	half := 50.0
	calls[0].answer(renderReply{Progress: &half})
	if calls[0] = c.control.next(t); calls[0].Settings.Frames.Start != 0 || calls[0].Step != 1 {
		t.Fatalf("the first chunk's next step is %+v", calls[0])
	}
	var j job
	c.waitUntil("the job's progress saved", func() bool { j = cl.job(made.ID); return j.Progress > 0 })
	if want := 50.0 * 50 / 150 * 0.95; j.Progress < want-0.01 || j.Progress > want+0.01 {
		t.Fatalf("progress %v with one chunk of three half done, want %v", j.Progress, want)
	}
	if j.Status != "render:dorender" || len(j.Chunks) != 3 || j.Stats.StartedAt == nil {
		t.Fatalf("while its chunks render: %+v", j)
	}
	for i, ch := range j.Chunks {
		want := []int{i * 50, i*50 + 49}
		if ch.Index != i || !slices.Equal(ch.Frames, want) {
			t.Fatalf("chunk %d: %+v, want frames %v", i, ch, want)
		}
	}
	if j.Chunks[2].Status != "queued" || j.Chunks[0].Status != "render:dorender" || j.Chunks[0].Node == "" {
		t.Fatalf("chunks %+v", j.Chunks)
	}

	// The listing, counts and lookups know the job only.
	var list []job
	h := cl.must(http.MethodGet, "/api/v2/jobs", nil, http.StatusOK, &list)
	if h.Get("X-Total-Count") != "1" || len(list) != 1 || list[0].ID != made.ID || list[0].Status != "render:dorender" {
		t.Fatalf("listing of %s jobs: %+v", h.Get("X-Total-Count"), list)
	}
	chunkID := calls[50].JobID
	cl.fails(http.MethodGet, "/api/v2/jobs/"+chunkID, nil, http.StatusNotFound, "not_found")

	calls[0].answer(renderReply{Result: "finish"})
	calls[50].answer(renderReply{Result: "finish"})
	last := chunkCalls(t, c, 1)[100]
	if last == nil {
		t.Fatal("the third chunk did not start")
	}
	last.answer(renderReply{Result: "finish"})
	join := c.control.next(t)
	if join.JobID != made.ID || join.Chunk || len(join.Chunks) != 3 {
		t.Fatalf("the join: %+v", join)
	}
	for i, ch := range join.Chunks {
		if ch.Settings.Frames.Start != i*50 || !ch.Chunk {
			t.Fatalf("the join's chunk %d is %+v", i, ch)
		}
	}
	join.answer(renderReply{Result: "finish"})
	c.waitJob(made.ID, "finished")
	j = cl.job(made.ID)
	if j.Status != "finished" || j.Progress != 100 || len(j.Chunks) != 3 || j.Chunks[2].Status != "finished" {
		t.Fatalf("finished: %+v", j)
	}
	if out := cl.renderOutput(made.ID); out.JobID != made.ID || len(out.Chunks) != 3 {
		t.Fatalf("the output is not the join's: %+v", out)
	}
	// Its render time is the wall time from its first chunk's start to the end of its join;
	// the chunks' own render times add up beside it.
	started, _ := time.Parse(time.RFC3339Nano, *j.Stats.StartedAt)
	finished, _ := time.Parse(time.RFC3339Nano, *j.Stats.FinishedAt)
	if j.Stats.RenderDuration == nil || math.Abs(*j.Stats.RenderDuration-finished.Sub(started).Seconds()) > 0.001 {
		t.Fatalf("render duration %v, from %s to %s", j.Stats.RenderDuration, started, finished)
	}
	sum := 0.0
	for _, ch := range j.Chunks {
		if ch.Render == nil {
			t.Fatalf("chunk %d has no render duration", ch.Index)
		}
		sum += *ch.Render
	}
	if j.ChunksRender == nil || math.Abs(*j.ChunksRender-sum) > 1e-9 {
		t.Fatalf("the chunks' render time %v, their durations add up to %v", j.ChunksRender, sum)
	}
	logHas(t, cl, made.ID, "split into 3 chunks of 50 frames", "frames 0 to 49 rendered on node "+calls[0].Node,
		"frames 50 to 99 rendered on node "+calls[50].Node, "all 3 chunks rendered", "finished on node")
}

// TestASplitJobsKilledNodeRerunsOnlyItsChunk: the node rendering one chunk is killed; that chunk
// renders again elsewhere as attempt 2, the others keep attempt 1, and the join gets all three.
func TestASplitJobsKilledNodeRerunsOnlyItsChunk(t *testing.T) {
	c, cl, nodes := clusterFarm(t, 2)
	hooks := newWebhookReceiver(t)
	body := splitJob(cl.uploadTemplate(inspection()), 50)
	body["webhook"] = map[string]any{"url": hooks.url + "/done"}
	var made created
	cl.must(http.MethodPost, "/api/v2/jobs", body, http.StatusCreated, &made)
	calls := chunkCalls(t, c, 2)
	var victim, survivor *renderCall
	for _, call := range calls {
		if call.Node == "n1" {
			victim = call
		} else {
			survivor = call
		}
	}
	nodes[0].kill()
	c.waitNode("n1", actors.NodeLost)
	survivor.answer(renderReply{Result: "finish"})
	c.control.answerAll(finishAll)
	c.waitJob(made.ID, "finished")
	j := cl.job(made.ID)
	for _, ch := range j.Chunks {
		want := 1
		if ch.Frames[0] == victim.Settings.Frames.Start {
			want = 2
		}
		if ch.Attempts != want || ch.Status != "finished" || ch.Node != "n2" && want == 2 {
			t.Fatalf("chunk %+v: want attempt %d (the killed node's chunk was frames %d on)", ch, want, victim.Settings.Frames.Start)
		}
	}
	out := cl.renderOutput(made.ID)
	for i, ch := range out.Chunks {
		if ch.Settings.Frames.Start != i*50 {
			t.Fatalf("the join's chunks are out of order: %+v", out.Chunks)
		}
	}
	logHas(t, cl, made.ID, fmt.Sprintf("frames %d to %d rendered on node n2", victim.Settings.Frames.Start, victim.Settings.Frames.End))

	// One webhook, the job's: its chunks send none.
	var payload job
	if err := json.Unmarshal(hooks.next(t).Body, &payload); err != nil || payload.ID != made.ID || payload.Status != "finished" || len(payload.Chunks) != 0 {
		t.Fatalf("the webhook: %+v, %v", payload, err)
	}
	c.waitFor("webhook", made.ID, "delivered")
	select {
	case extra := <-hooks.received:
		t.Fatalf("a second webhook: %s", extra.Body)
	default:
	}
}

// TestASplitJobOutlivesACoordinatorRestart: the coordinator is killed while two chunks render
// and one waits; restarted, it adopts the chunks from their nodes (attempt 1 each), renders the
// last, joins them once, and the job's log still says which node rendered which frames.
func TestASplitJobOutlivesACoordinatorRestart(t *testing.T) {
	c := startCoordinator(t, options{cluster: true, heartbeat: "200ms", lease: "10s"})
	cl := c.team("cluster")
	c.startNode("n1", 1)
	c.startNode("n2", 1)
	made := submitSplit(cl)
	rendering := chunkCalls(t, c, 2)
	c.kill()
	c.restart()
	c.waitNode("n1", actors.NodeReady)
	c.waitNode("n2", actors.NodeReady)
	c.control.answerAll(finishAll)
	for _, call := range rendering {
		call.answer(renderReply{Result: "finish"})
	}
	c.waitJob(made.ID, "finished")
	j := cl.job(made.ID)
	for _, ch := range j.Chunks {
		if ch.Status != "finished" || ch.Attempts != 1 {
			t.Fatalf("chunk %+v after the restart", ch)
		}
	}
	c.exactlyOnce([]string{made.ID})
	if out := cl.renderOutput(made.ID); len(out.Chunks) != 3 || out.Chunks[0].Attempt != 1 {
		t.Fatalf("the join: %+v", out.Chunks)
	}
	logHas(t, cl, made.ID, "frames 0 to 49 rendered on node", "frames 50 to 99 rendered on node", "frames 100 to 149 rendered on node")
}

// TestCancellingASplitJobStopsEveryChunk: cancelled while two chunks render and one waits, the
// job's chunks all stop, their nodes abandon them, and the job has no output.
func TestCancellingASplitJobStopsEveryChunk(t *testing.T) {
	c, cl, _ := clusterFarm(t, 2)
	made := submitSplit(cl)
	calls := chunkCalls(t, c, 2)
	var cancelled []job
	cl.must(http.MethodPatch, "/api/v2/jobs/"+made.ID+"/cancel", nil, http.StatusOK, &cancelled)
	if len(cancelled) != 1 || cancelled[0].ID != made.ID || cancelled[0].Status != "manually_cancelled" {
		t.Fatalf("the cancel answered %+v", cancelled)
	}
	for _, call := range calls {
		<-call.gone // its node abandoned it
	}
	c.waitUntil("every chunk cancelled", func() bool {
		for _, ch := range cl.job(made.ID).Chunks {
			if ch.Status != "manually_cancelled" {
				return false
			}
		}
		return true
	})
	if status, _ := get(t, cl.job(made.ID).OutputURL); status != http.StatusNotFound {
		t.Fatalf("a cancelled split job's output answered %d", status)
	}
	// The nodes are free again: the job retried renders.
	c.control.answerAll(finishAll)
	var other created
	cl.must(http.MethodPost, "/api/v2/jobs/"+made.ID+"/retry", nil, http.StatusCreated, &other)
	c.waitJob(other.ID, "finished")
}

// TestAChunkFailingThreeTimesFailsItsJob: one chunk fails on every attempt (the others render);
// after the third the job fails naming that chunk, and retried it is split again. A chunk whose
// failure cannot pass fails its job at once, and the chunk rendering beside it stops.
func TestAChunkFailingThreeTimesFailsItsJob(t *testing.T) {
	c, cl, _ := clusterFarm(t, 2)
	made := submitSplit(cl)
	for failures := 0; failures < 3; {
		switch call := c.control.next(t); call.Settings.Frames.Start {
		case 50:
			call.answer(renderReply{Result: "retry", Message: "the engine crashed"})
			failures++
		default:
			call.answer(renderReply{Result: "finish"})
		}
	}
	c.waitJob(made.ID, "error")
	if j := cl.job(made.ID); j.Stats.Error == nil || !strings.Contains(*j.Stats.Error, "chunk 2 of 3 (frames 50 to 99) failed: render failed after 3 attempts") {
		t.Fatalf("the job's error: %v", j.Stats.Error)
	}
	// Its chunks all end (one caught rendering is stopped); what they still asked is dropped.
	c.waitUntil("the failed job's chunks ended", func() bool {
		for _, ch := range cl.job(made.ID).Chunks {
			if !slices.Contains([]string{"finished", "error", "manually_cancelled"}, ch.Status) {
				return false
			}
		}
		return true
	})
	for drained := false; !drained; {
		select {
		case <-c.control.calls:
		default:
			drained = true
		}
	}
	var again created
	cl.must(http.MethodPost, "/api/v2/jobs/"+made.ID+"/retry", nil, http.StatusCreated, &again)
	if j := cl.job(again.ID); len(j.Chunks) != 3 || j.Chunks[2].Frames[1] != 149 {
		t.Fatalf("the retried job: %+v", j)
	}

	// The retried job's first two chunks render on the two nodes; the second fails for good.
	calls := chunkCalls(t, c, 2)
	calls[50].answer(renderReply{Result: "fail", Message: "the layer is missing"})
	c.waitJob(again.ID, "error")
	if j := cl.job(again.ID); j.Stats.Error == nil || !strings.Contains(*j.Stats.Error, "chunk 2 of 3 (frames 50 to 99) failed: the layer is missing") {
		t.Fatalf("the retried job's error: %v", j.Stats.Error)
	}
	<-calls[0].gone // its node abandoned the first chunk
	c.waitUntil("the first chunk stopped", func() bool { return cl.job(again.ID).Chunks[0].Status == "manually_cancelled" })
}

// TestOfficialClientSubmitsWaitsForAndDownloadsASplitJob: the official CLI's job submit keeps
// fields it does not know (its request type carries them), so a job file asking for chunks is
// split; job wait polls GET /jobs/{id} into its Job type until a terminal status, and the output
// downloads from outputUrl.
func TestOfficialClientSubmitsWaitsForAndDownloadsASplitJob(t *testing.T) {
	c, cl, _ := clusterFarm(t, 2)
	tpl := cl.uploadTemplate(inspection())
	var submitted cliJobCreated
	cl.must(http.MethodPost, "/api/v2/jobs", splitJob(tpl, 50), http.StatusCreated, &submitted)
	if submitted.Status != "queued" || submitted.Children != nil {
		t.Fatalf("submitted %+v", submitted)
	}
	c.control.answerAll(finishAll)
	var seen []string
	c.waitUntil("job wait to see a terminal status", func() bool {
		var polled cliJob
		cl.must(http.MethodGet, "/api/v2/jobs/"+submitted.ID, nil, http.StatusOK, &polled)
		if len(seen) == 0 || seen[len(seen)-1] != *polled.Status {
			seen = append(seen, *polled.Status)
		}
		return *polled.Status == "finished"
	})
	for _, status := range seen {
		if !slices.Contains([]string{"queued", "render:dorender", "finished"}, status) {
			t.Fatalf("job wait saw %v", seen)
		}
	}
	if out := cl.renderOutput(submitted.ID); len(out.Chunks) != 3 {
		t.Fatalf("the download is not the joined chunks: %+v", out)
	}
}

// TestRetaggingASplitJobMovesItsChunks: a split job given a higher priority than a job that had
// overtaken it has its waiting chunks rendered first again.
func TestRetaggingASplitJobMovesItsChunks(t *testing.T) {
	c, cl, _ := clusterFarm(t, 1)
	tpl := cl.uploadTemplate(inspection())
	var split created
	cl.must(http.MethodPost, "/api/v2/jobs", splitJob(tpl, 50), http.StatusCreated, &split)
	first := chunkCalls(t, c, 1)[0]
	other := cl.createJobs(tpl, 1)[0]
	cl.must(http.MethodPatch, "/api/v2/jobs/"+other, map[string]any{"priority": 5}, http.StatusOK, nil)
	cl.must(http.MethodPatch, "/api/v2/jobs/"+split.ID, map[string]any{"priority": 7, "tags": []string{"rush"}}, http.StatusOK, nil)
	if j := cl.job(split.ID); j.Priority != 7 {
		t.Fatalf("the split job's priority is %d", j.Priority)
	}
	first.answer(renderReply{Result: "finish"})
	if next := c.control.next(t); next.JobID == other || !next.Chunk || next.Settings.Frames.Start != 50 {
		t.Fatalf("after the first chunk, %s (frames %+v) rendered, not the split job's next chunk", next.JobID, next.Settings.Frames)
	}
}

// TestABatchHoldsAtMost20000Chunks: a batch's split jobs are created while their chunks number
// at most 20,000 together; a job past that is refused in the batch's answer, the others created.
func TestABatchHoldsAtMost20000Chunks(t *testing.T) {
	c := startCoordinator(t, options{})
	cl := c.team("acme")
	long := inspection()
	long.Compositions[0].Duration = 100000 / long.Compositions[0].FPS
	tpl := cl.uploadTemplate(long)
	var jobs []any
	for range 5 {
		j := renderJob(tpl)
		j["chunks"] = map[string]any{"count": 5000}
		jobs = append(jobs, j)
	}
	var answer struct {
		Status string `json:"status"`
		Jobs   []struct {
			ID string `json:"id"`
		} `json:"jobs"`
		Errors []struct {
			Index int    `json:"index"`
			Error string `json:"error"`
		} `json:"errors"`
	}
	cl.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": jobs}, http.StatusCreated, &answer)
	if answer.Status != "partial" || len(answer.Jobs) != 4 || len(answer.Errors) != 1 || answer.Errors[0].Index != 4 ||
		!strings.Contains(answer.Errors[0].Error, "past 20000") {
		t.Fatalf("answer %+v", answer)
	}
	if j := cl.job(answer.Jobs[3].ID); len(j.Chunks) != 5000 {
		t.Fatalf("the fourth job has %d chunks", len(j.Chunks))
	}
}

// TestAJobThatCannotBeSplitRendersWhole: asked to split, a job whose shape cannot be split
// renders whole and says why; a malformed chunks field is refused.
func TestAJobThatCannotBeSplitRendersWhole(t *testing.T) {
	c, cl, _ := clusterFarm(t, 1)
	tpl := cl.uploadTemplate(inspection())
	still := renderJob(tpl)
	still["settings"] = map[string]any{"type": "image", "frames": 10}
	still["chunks"] = map[string]any{"count": 4}
	var made created
	cl.must(http.MethodPost, "/api/v2/jobs", still, http.StatusCreated, &made)
	c.control.answerAll(finishAll)
	c.waitJob(made.ID, "finished")
	if j := cl.job(made.ID); j.Unsplit != "a single frame" || len(j.Chunks) != 0 || !strings.Contains(cl.logs(made.ID), "renders whole on one node: a single frame") {
		t.Fatalf("%+v\n%s", j, cl.logs(made.ID))
	}
	for _, bad := range []any{map[string]any{}, map[string]any{"frames": 1}, map[string]any{"frames": 10, "count": 2}, map[string]any{"count": 0}, "60", map[string]any{"size": 3}} {
		body := renderJob(tpl)
		body["chunks"] = bad
		if e := cl.fails(http.MethodPost, "/api/v2/jobs", body, http.StatusBadRequest, "validation_error"); !strings.Contains(e.Error, "chunks") {
			t.Fatalf("chunks %v: %+v", bad, e)
		}
	}
}

// TestASplitRenderIsTheUnsplitRender: the 300 frames of the 1080p Lottie fixture, with a sound
// and a replaced image, rendered whole on one node and split into 60-frame chunks over two real
// render nodes: the same frame count, every frame the same within H.264's tolerance (each chunk
// is an encoding of its own; x264's threads make even two renders of one job differ a little),
// the same duration and sound. A ProRes render (each frame coded alone) split across chunk edges
// is the same frame for frame, and an image sequence split in three is zipped frame for frame as
// the whole one.
func TestASplitRenderIsTheUnsplitRender(t *testing.T) {
	tools, err := ffmpeg.Find("", "")
	if err != nil {
		t.Fatal(err)
	}
	tone := filepath.Join(t.TempDir(), "tone.wav")
	if out, err := exec.Command(tools.FFmpeg, "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=330:duration=12", tone).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	sound, err := os.ReadFile(tone)
	if err != nil {
		t.Fatal(err)
	}
	c := startCoordinator(t, options{cluster: true, realEngines: true})
	c.startNode("n1", 1)
	c.startNode("n2", 1)
	acme := c.team("acme")
	tpl := acme.uploadTemplateFile("zip", fixtureZip(t, "lottie/synthetic"))
	files := newFileServer(t, map[string][]byte{"/tone.wav": sound, "/replacement.jpg": fixture(t, "lottie/synthetic/images/replacement.jpg")})
	body := func(settings map[string]any, chunks any) map[string]any {
		b := kenburnsJob(tpl.ID,
			map[string]any{"type": "image", "layerName": "Photo", "src": files + "/replacement.jpg"},
			map[string]any{"type": "audio", "layerName": "Bar", "src": files + "/tone.wav"})
		b["settings"] = settings
		if chunks != nil {
			b["chunks"] = chunks
		}
		return b
	}
	video := map[string]any{"type": "video", "codec": "h264_vbr_5mbps"}
	_, whole := acme.render(body(video, nil))
	split, joined := acme.render(body(video, map[string]any{"frames": 60}))
	// A chunk may render twice: a machine loaded enough for its node to miss its lease loses the
	// first attempt, and the frames are what this test compares.
	for _, ch := range split.Chunks {
		if ch.Frames[1]-ch.Frames[0] != 59 {
			t.Fatalf("chunk %+v", ch)
		}
	}
	if len(split.Chunks) != 5 {
		t.Fatalf("%d chunks", len(split.Chunks))
	}
	dir := t.TempDir()
	wholeFile, joinedFile := filepath.Join(dir, "whole.mp4"), filepath.Join(dir, "joined.mp4")
	os.WriteFile(wholeFile, whole, 0o600)
	os.WriteFile(joinedFile, joined, 0o600)
	a, b, worst, err := framediff.Videos(tools.FFmpeg, tools.FFprobe, wholeFile, joinedFile)
	t.Logf("H.264: the most different frame of 300 differs by %.3f of 255", worst)
	if err != nil || a != 300 || b != 300 || worst > 2 {
		t.Fatalf("whole %d frames, split %d; the most different frame differs by %.3f; %v", a, b, worst, err)
	}
	mw, mj := probe(t, whole, ".mp4"), probe(t, joined, ".mp4")
	if mw != mj || !mj.HasAudio {
		t.Fatalf("whole %+v, split %+v", mw, mj)
	}
	for _, f := range []string{wholeFile, joinedFile} {
		if d := audioDuration(t, tools, f); d < 9.95 || d > 10.05 {
			t.Fatalf("%s: the sound lasts %.3fs, the video 10s", filepath.Base(f), d)
		}
	}

	prores := map[string]any{"type": "video", "codec": "prores_422", "frames": []int{45, 134}, "quality": "draft"}
	_, wholeProRes := acme.render(body(prores, nil))
	_, joinedProRes := acme.render(body(prores, map[string]any{"frames": 25}))
	wholeFile, joinedFile = filepath.Join(dir, "whole.mov"), filepath.Join(dir, "joined.mov")
	os.WriteFile(wholeFile, wholeProRes, 0o600)
	os.WriteFile(joinedFile, joinedProRes, 0o600)
	if a, b, worst, err := framediff.Videos(tools.FFmpeg, tools.FFprobe, wholeFile, joinedFile); err != nil || a != 90 || b != 90 || worst != 0 {
		t.Fatalf("ProRes: whole %d frames, split %d; the most different frame differs by %.3f; %v", a, b, worst, err)
	}

	// Constant bit rate H.264 is encoded once, at the join, from lossless chunks.
	cbr := map[string]any{"type": "video", "codec": "h264_cbr_5mbps", "frames": []int{45, 134}, "quality": "draft"}
	_, wholeCBR := acme.render(body(cbr, nil))
	cbrJob, joinedCBR := acme.render(body(cbr, map[string]any{"frames": 25}))
	os.WriteFile(wholeFile, wholeCBR, 0o600)
	os.WriteFile(joinedFile, joinedCBR, 0o600)
	if a, b, worst, err := framediff.Videos(tools.FFmpeg, tools.FFprobe, wholeFile, joinedFile); err != nil || a != 90 || b != 90 || worst > 2 {
		t.Fatalf("CBR: whole %d frames, split %d; the most different frame differs by %.3f; %v", a, b, worst, err)
	}
	if len(cbrJob.Chunks) != 3 || !strings.Contains(acme.logs(cbrJob.ID), "joining 3 chunks") {
		t.Fatalf("the CBR job: %+v\n%s", cbrJob.Chunks, acme.logs(cbrJob.ID))
	}

	frames := map[string]any{"type": "image", "frames": []int{100, 129}, "quality": "draft"}
	_, wholeZip := acme.render(body(frames, nil))
	_, joinedZip := acme.render(body(frames, map[string]any{"count": 3}))
	za, err := zip.NewReader(bytes.NewReader(wholeZip), int64(len(wholeZip)))
	if err != nil {
		t.Fatal(err)
	}
	zb, err := zip.NewReader(bytes.NewReader(joinedZip), int64(len(joinedZip)))
	if err != nil {
		t.Fatal(err)
	}
	if len(za.File) != 30 || len(zb.File) != 30 {
		t.Fatalf("%d frames whole, %d split", len(za.File), len(zb.File))
	}
	for i := range za.File {
		if za.File[i].Name != zb.File[i].Name || za.File[i].CRC32 != zb.File[i].CRC32 {
			t.Fatalf("frame %d: %s whole, %s split, or their pixels differ", i, za.File[i].Name, zb.File[i].Name)
		}
	}
}

func audioDuration(t *testing.T, tools ffmpeg.Tools, file string) float64 {
	t.Helper()
	out, err := exec.Command(tools.FFprobe, "-v", "error", "-select_streams", "a:0", "-show_entries", "stream=duration", "-of", "csv=p=0", file).Output()
	if err != nil {
		t.Fatal(err)
	}
	d, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		t.Fatalf("the sound's duration %q: %v", out, err)
	}
	return d
}
