package main

// A farm many teams share, as its admin governs it: team policies (weights, guarantees, caps),
// and no team delaying another beyond its share.

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/framefarm/framefarm/http/api"
	"github.com/framefarm/framefarm/renderer"
)

// teams reads every team as the admin sees it, by name.
func (c *coordinator) teams() map[string]api.TeamView {
	c.t.Helper()
	var list []api.TeamView
	(&client{c: c, token: adminToken}).must(http.MethodGet, "/api/v2/admin/teams", nil, http.StatusOK, &list)
	out := map[string]api.TeamView{}
	for _, team := range list {
		out[team.Name] = team
	}
	return out
}

// admin runs a framefarm command against the coordinator with its admin token.
func (c *coordinator) admin(args ...string) string {
	c.t.Helper()
	out, err := framefarm(append(args, "--url", c.url, "--admin-token", adminToken)...)
	if err != nil {
		c.t.Fatalf("framefarm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestATeamsPolicyShapesItsWork: the admin caps a team from the command line; its jobs may not
// ask a priority above its cap, its waiting jobs stop at their cap with a 429 that names it, it
// never renders more at once than its maxRunning while another team takes the other slots, its
// waiting jobs say why, and the policy outlives a restart.
func TestATeamsPolicyShapesItsWork(t *testing.T) {
	c := startCoordinator(t, options{slots: 3})
	a, b := c.team("a"), c.team("b")
	tplA, tplB := a.uploadTemplate(inspection()), b.uploadTemplate(inspection())
	set := c.admin("team", "set", "a", "--max-running", "1", "--max-queued-jobs", "4", "--max-priority", "10", "--weight", "2")
	if !strings.Contains(set, "TEAM") || !strings.Contains(set, "a ") {
		t.Fatalf("team set printed:\n%s", set)
	}

	urgent := renderJob(tplA)
	urgent["priority"] = 11
	if e := a.fails(http.MethodPost, "/api/v2/jobs", urgent, http.StatusBadRequest, "validation_error"); !strings.Contains(e.Error, "maxPriority") {
		t.Fatalf("a priority above the cap refused without naming it: %s", e.Error)
	}
	var jobs []created
	post := func() {
		var made created
		a.must(http.MethodPost, "/api/v2/jobs", renderJob(tplA), http.StatusCreated, &made)
		jobs = append(jobs, made)
	}
	post()
	running := map[string][]*renderCall{"a": {c.control.next(t)}}
	// Rendering, a's first job no longer waits: four more fit under its cap, a fifth does not.
	for range 4 {
		post()
	}
	if e := a.fails(http.MethodPost, "/api/v2/jobs", renderJob(tplA), http.StatusTooManyRequests, "queue_cap"); !strings.Contains(e.Error, "maxQueuedJobs is 4") {
		t.Fatalf("the queue cap's 429 does not name it: %s", e.Error)
	}
	if e := a.fails(http.MethodPatch, "/api/v2/jobs/"+jobs[3].ID, map[string]any{"priority": 50}, http.StatusBadRequest, "validation_error"); !strings.Contains(e.Error, "maxPriority") {
		t.Fatalf("a new priority above the cap: %s", e.Error)
	}
	var fromB []created
	for range 3 {
		var made created
		b.must(http.MethodPost, "/api/v2/jobs", renderJob(tplB), http.StatusCreated, &made)
		fromB = append(fromB, made)
	}

	// Three slots: a holds one (its maxRunning), b the two others.
	teamOf := map[string]string{}
	for _, j := range jobs {
		teamOf[j.ID] = "a"
	}
	for _, j := range fromB {
		teamOf[j.ID] = "b"
	}
	for range 2 {
		call := c.control.next(t)
		running[teamOf[call.JobID]] = append(running[teamOf[call.JobID]], call)
	}
	if len(running["a"]) != 1 || len(running["b"]) != 2 {
		t.Fatalf("renders by team %v, want a 1 and b 2", map[string]int{"a": len(running["a"]), "b": len(running["b"])})
	}
	c.waitUntil("a's running render and waiting jobs counted", func() bool {
		team := c.teams()["a"]
		return team.Running == 1 && team.Waiting.Jobs == 4
	})
	teams := c.teams()
	if got := teams["b"]; got.Running != 2 || got.Policy.Weight != 1 || got.Policy.MaxRunning != nil {
		t.Fatalf("team b: %+v", got)
	}
	if got := teams["a"]; *got.Policy.MaxRunning != 1 || got.Policy.Weight != 2 || *got.Policy.MaxPriority != 10 || got.Share < 0.33 || got.Share > 0.34 {
		t.Fatalf("team a: %+v", got)
	}
	waiting := jobs[1].ID
	c.waitUntil("the waiting job says why", func() bool { return strings.Contains(a.logs(waiting), "maxRunning (1)") })
	if w := a.job(waiting).Stats.WaitingFor; !strings.Contains(w, "maxRunning") {
		t.Fatalf("a waiting job's waitingFor: %q", w)
	}

	// A slot of b's frees: b's third job takes it, not a's.
	running["b"][0].answer(renderReply{Result: "finish"})
	if call := c.control.next(t); teamOf[call.JobID] != "b" {
		t.Fatalf("the slot b freed went to team %s's job, though a is at its maxRunning", teamOf[call.JobID])
	} else {
		running["b"] = append(running["b"][1:], call)
	}
	// Without the cap, a's next waiting job takes the next free slot.
	c.admin("team", "set", "a", "--max-running", "none")
	running["b"][0].answer(renderReply{Result: "finish"})
	running["b"] = running["b"][1:]
	if call := c.control.next(t); teamOf[call.JobID] != "a" {
		t.Fatalf("with its cap lifted, the next free slot went to team %s's job", teamOf[call.JobID])
	} else {
		running["a"] = append(running["a"], call)
	}
	c.waitUntil("the wait is over in the log", func() bool { return strings.Contains(a.logs(waiting), "waiting over") })
	c.control.answerAll(finishAll)
	for _, call := range append(running["a"], running["b"]...) {
		call.answer(renderReply{Result: "finish"})
	}
	for _, j := range jobs {
		c.waitJob(j.ID, "finished")
	}

	c.stop()
	c.restart()
	list := c.admin("team", "list")
	for _, want := range []string{"MAX QUEUED JOBS", "\na ", "\nb "} {
		if !strings.Contains(list, want) {
			t.Fatalf("team list lacks %q:\n%s", want, list)
		}
	}
	if got := c.teams()["a"]; got.Policy.MaxRunning != nil || *got.Policy.MaxQueuedJobs != 4 || *got.Policy.MaxPriority != 10 || got.Policy.Weight != 2 {
		t.Fatalf("team a's policy after a restart: %+v", got.Policy)
	}
	admin := &client{c: c, token: adminToken}
	admin.fails(http.MethodPatch, "/api/v2/admin/teams/nobody", map[string]any{"weight": 2}, http.StatusNotFound, "not_found")
	admin.fails(http.MethodPatch, "/api/v2/admin/teams/a", map[string]any{"weight": 0}, http.StatusBadRequest, "validation_error")
	admin.fails(http.MethodPatch, "/api/v2/admin/teams/a", map[string]any{"colour": "red"}, http.StatusBadRequest, "validation_error")
	a.fails(http.MethodPatch, "/api/v2/admin/teams/a", map[string]any{"weight": 5}, http.StatusForbidden, "forbidden")
}

// longTemplate is the test template with a composition of 20,000 frames, enough for 5,000
// chunks.
func longTemplate() renderer.Inspection {
	in := inspection()
	in.Compositions = append(in.Compositions, renderer.Composition{Name: "long", Width: 64, Height: 64, FPS: 40, Duration: 500})
	return in
}

// TestNoTeamJumpsAnotherByPriority, the noisy neighbour: team a fills two render nodes with 64
// jobs at its highest priority and a job of 5,000 chunks; team b sends one job of priority 0.
// The next slot to free goes to b's job, and the one after goes back to a.
func TestNoTeamJumpsAnotherByPriority(t *testing.T) {
	c := startCoordinator(t, options{cluster: true})
	c.startNode("n1", 2)
	c.startNode("n2", 2)
	a, b := c.team("a"), c.team("b")
	c.admin("team", "set", "a", "--max-priority", "1000")
	tplA, tplB := a.uploadTemplate(longTemplate()), b.uploadTemplate(inspection())
	teamOf := map[string]string{}
	for i := range 64 {
		j := renderJob(tplA)
		j["priority"] = 1000
		var made created
		a.must(http.MethodPost, "/api/v2/jobs", j, http.StatusCreated, &made)
		teamOf[made.ID] = fmt.Sprint("a", i)
	}
	split := map[string]any{"template": map[string]any{"id": tplA, "composition": "long"}, "assets": []any{},
		"priority": 1000, "chunks": map[string]any{"count": 5000}}
	var huge created
	a.must(http.MethodPost, "/api/v2/jobs", split, http.StatusCreated, &huge)
	var held []*renderCall
	for range 4 {
		call := c.control.next(t)
		if _, ok := teamOf[call.JobID]; !ok && !call.Chunk {
			t.Fatalf("a render of neither a's jobs nor its chunks: %+v", call)
		}
		held = append(held, call)
	}
	c.waitUntil("a's work waits", func() bool {
		team := c.teams()["a"]
		return team.Running == 4 && team.Waiting.Chunks > 4900
	})

	var urgent created
	b.must(http.MethodPost, "/api/v2/jobs", renderJob(tplB), http.StatusCreated, &urgent)
	sent := time.Now()
	held[0].answer(renderReply{Result: "finish"})
	next := c.control.next(t)
	if next.JobID != urgent.ID {
		t.Fatalf("the first slot to free after b's job went to %s (chunk %v), not b's job", next.JobID, next.Chunk)
	}
	t.Logf("b's job started %s after it was sent, on the first slot to free", time.Since(sent).Round(time.Millisecond))
	held[1].answer(renderReply{Result: "finish"})
	if after := c.control.next(t); after.JobID == urgent.ID || (teamOf[after.JobID] == "" && !after.Chunk) {
		t.Fatalf("the slot after went to %+v, not back to a", after)
	}
}

// TestWeightsShareTheFarm: teams a (weight 3) and b (weight 1) both keep more work queued than two
// render nodes of four slots each can take; renders last 0.3 to 0.9 s. Over a minute, the slots
// their renders hold split 3:1 within 10%.
func TestWeightsShareTheFarm(t *testing.T) {
	c := startCoordinator(t, options{cluster: true})
	rng := rand.New(rand.NewPCG(7, 8))
	var rngMu sync.Mutex
	c.control.answerAll(func(*renderCall) renderReply {
		rngMu.Lock()
		d := 300*time.Millisecond + time.Duration(rng.IntN(600))*time.Millisecond
		rngMu.Unlock()
		time.Sleep(d)
		return renderReply{Result: "finish"}
	})
	c.startNode("n1", 4)
	c.startNode("n2", 4)
	a, b := c.team("a"), c.team("b")
	c.admin("team", "set", "a", "--weight", "3")
	for _, cl := range []*client{a, b} {
		tpl := cl.uploadTemplate(inspection())
		jobs := make([]map[string]any, 600)
		for i := range jobs {
			jobs[i] = renderJob(tpl)
		}
		cl.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": jobs}, http.StatusCreated, nil)
	}
	c.waitUntil("every slot held", func() bool { return c.teams()["a"].Running+c.teams()["b"].Running == 8 })
	var heldA, heldB, samples int
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		teams := c.teams()
		if teams["a"].Waiting.Jobs == 0 || teams["b"].Waiting.Jobs == 0 {
			t.Fatalf("a team ran out of work: %+v", teams)
		}
		heldA, heldB, samples = heldA+teams["a"].Running, heldB+teams["b"].Running, samples+1
	}
	ratio := float64(heldA) / float64(heldB)
	t.Logf("over %d samples a held %.2f slots and b %.2f on average: %.2f to 1", samples,
		float64(heldA)/float64(samples), float64(heldB)/float64(samples), ratio)
	if ratio < 2.7 || ratio > 3.3 {
		t.Fatalf("a's and b's slots split %.2f to 1, want 3 to 1 within 10%%", ratio)
	}
}

// noMoreCalls fails if a render starts within a while: what a cap must hold back.
func noMoreCalls(t *testing.T, rc *renderControl, while time.Duration, why string) {
	t.Helper()
	select {
	case call := <-rc.calls:
		t.Fatalf("%s, yet job %s started", why, call.JobID)
	case <-time.After(while):
	}
}

// TestPoolsAndLimitsPlaceTheRenders: on two render node processes, one in pool gpu, a job naming
// gpu renders there and nowhere else, a team may name only the pools its policy allows, and a
// job of a pool no node is in waits saying so; jobs holding a limit of one never render two at
// once, while other work goes on beside them, and a limit's use is shown to the admin.
func TestPoolsAndLimitsPlaceTheRenders(t *testing.T) {
	c := startCoordinator(t, options{cluster: true})
	c.startNode("n1", 2, "--pools", "gpu,4k")
	c.startNode("n2", 2)
	// A team made before its first token: its policy is set before anyone submits.
	if out := c.admin("team", "create", "a"); !strings.Contains(out, "created team a") {
		t.Fatalf("team create printed:\n%s", out)
	}
	if out, err := framefarm("team", "create", "a", "--url", c.url, "--admin-token", adminToken); err == nil || !strings.Contains(string(out), `team "a" exists`) {
		t.Fatalf("a second team create: %v\n%s", err, out)
	}
	c.admin("team", "set", "a", "--pools", "gpu")
	a, b := c.team("a"), c.team("b")
	admin := &client{c: c, token: adminToken}
	if list := c.admin("node", "list"); !strings.Contains(list, "POOLS") || !strings.Contains(list, "gpu,4k") {
		t.Fatalf("node list does not show the pools:\n%s", list)
	}
	tplA, tplB := a.uploadTemplate(inspection()), b.uploadTemplate(inspection())
	job := func(tpl string, fields map[string]any) map[string]any {
		j := renderJob(tpl)
		maps.Copy(j, fields)
		return j
	}
	if e := a.fails(http.MethodPost, "/api/v2/jobs", job(tplA, map[string]any{"pool": "4k"}), http.StatusBadRequest, "validation_error"); !strings.Contains(e.Error, `only the pools ["gpu"]`) {
		t.Fatalf("a pool outside the team's: %s", e.Error)
	}
	var onGPU created
	a.must(http.MethodPost, "/api/v2/jobs", job(tplA, map[string]any{"pool": "gpu", "name": "Spot GPU"}), http.StatusCreated, &onGPU)
	if call := c.control.next(t); call.JobID != onGPU.ID || call.Node != "n1" {
		t.Fatalf("the gpu job rendered on %s", call.Node)
	} else {
		call.answer(renderReply{Result: "finish"})
	}
	// Held to pool gpu, the team's job naming no pool renders there too, not on n2.
	var anyPool created
	a.must(http.MethodPost, "/api/v2/jobs", renderJob(tplA), http.StatusCreated, &anyPool)
	if call := c.control.next(t); call.JobID != anyPool.ID || call.Node != "n1" {
		t.Fatalf("the job naming no pool of a team held to pool gpu rendered on %s", call.Node)
	} else {
		call.answer(renderReply{Result: "finish"})
	}
	var nowhere created
	b.must(http.MethodPost, "/api/v2/jobs", job(tplB, map[string]any{"pool": "8k"}), http.StatusCreated, &nowhere)
	c.waitUntil("the job of a pool no node is in says why it waits", func() bool {
		return strings.Contains(b.logs(nowhere.ID), `no ready render node of pool "8k" offers the "lottie" engine`)
	})
	if w := b.job(nowhere.ID).Stats.WaitingFor; !strings.Contains(w, `pool "8k"`) {
		t.Fatalf("waitingFor %q", w)
	}

	// A limit of one: one render at a time, the other work beside it.
	a.fails(http.MethodPost, "/api/v2/jobs", job(tplA, map[string]any{"limits": []string{"lic"}}), http.StatusBadRequest, "validation_error")
	if out := c.admin("limit", "set", "lic", "1"); !strings.Contains(out, "lic") {
		t.Fatalf("limit set printed:\n%s", out)
	}
	if list := c.admin("team", "set", "a", "--limits", "other"); !strings.Contains(list, "LIMITS") || !strings.Contains(list, "other") {
		t.Fatalf("team set --limits:\n%s", list)
	}
	if e := a.fails(http.MethodPost, "/api/v2/jobs", job(tplA, map[string]any{"pool": "gpu", "limits": []string{"lic"}}), http.StatusBadRequest,
		"validation_error"); !strings.Contains(e.Error, `only the limits ["other"]`) {
		t.Fatalf("a limit outside the team's: %s", e.Error)
	}
	c.admin("team", "set", "a", "--limits", "any")
	var licensed []created
	for range 3 {
		var made created
		b.must(http.MethodPost, "/api/v2/jobs", job(tplB, map[string]any{"limits": []string{"lic"}}), http.StatusCreated, &made)
		licensed = append(licensed, made)
	}
	var free created
	b.must(http.MethodPost, "/api/v2/jobs", renderJob(tplB), http.StatusCreated, &free)
	calls := map[string]*renderCall{}
	for range 2 {
		call := c.control.next(t)
		calls[call.JobID] = call
	}
	if calls[licensed[0].ID] == nil || calls[free.ID] == nil {
		t.Fatalf("the first renders were %v, not the first licensed job and the free one", slices.Collect(maps.Keys(calls)))
	}
	noMoreCalls(t, c.control, 500*time.Millisecond, "the limit of one is held")
	var limits []struct {
		Name   string `json:"name"`
		Count  int    `json:"count"`
		InUse  int    `json:"inUse"`
		HeldBy []struct {
			Job  string `json:"job"`
			Team string `json:"team"`
		} `json:"heldBy"`
	}
	var teamB struct {
		ID string `json:"id"`
	}
	b.must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, &teamB)
	admin.must(http.MethodGet, "/api/v2/admin/limits", nil, http.StatusOK, &limits)
	if len(limits) != 1 || limits[0].Name != "lic" || limits[0].InUse != 1 || limits[0].Count != 1 ||
		len(limits[0].HeldBy) != 1 || limits[0].HeldBy[0].Job != licensed[0].ID || limits[0].HeldBy[0].Team != teamB.ID {
		t.Fatalf("limits %+v", limits)
	}
	if list := c.admin("limit", "list"); !strings.Contains(list, "HELD BY") || !strings.Contains(list, licensed[0].ID) {
		t.Fatalf("limit list does not name the render holding it:\n%s", list)
	}
	c.waitUntil("a licensed job says why it waits", func() bool {
		return strings.Contains(b.logs(licensed[1].ID), `the one render of limit "lic" is in use`)
	})
	calls[free.ID].answer(renderReply{Result: "finish"})
	noMoreCalls(t, c.control, 500*time.Millisecond, "a slot freed by other work, the limit still held")
	calls[licensed[0].ID].answer(renderReply{Result: "finish"})
	if call := c.control.next(t); call.JobID != licensed[1].ID {
		t.Fatalf("after the licensed render ended, %s started", call.JobID)
	} else {
		call.answer(renderReply{Result: "finish"})
	}
	if call := c.control.next(t); call.JobID != licensed[2].ID {
		t.Fatalf("then %s started", call.JobID)
	} else {
		call.answer(renderReply{Result: "finish"})
	}
	c.waitJob(licensed[2].ID, "finished")
	if j := a.job(onGPU.ID); j.Name != "Spot GPU" {
		t.Fatalf("the job's name %q", j.Name)
	}

	// A retry asks for what the first request asked: it renders in the job's pool, under its name
	// and its limits, and only while the team may still name that pool.
	var failing created
	a.must(http.MethodPost, "/api/v2/jobs", job(tplA, map[string]any{"pool": "gpu", "name": "Spot GPU", "limits": []string{"lic"}}), http.StatusCreated, &failing)
	if call := c.control.next(t); call.JobID != failing.ID || call.Node != "n1" {
		t.Fatalf("the gpu job rendered on %s", call.Node)
	} else {
		call.answer(renderReply{Result: "fail", Message: "a plug-in crashed"})
	}
	c.waitJob(failing.ID, "error")
	var again created
	a.must(http.MethodPost, "/api/v2/jobs/"+failing.ID+"/retry", nil, http.StatusCreated, &again)
	if call := c.control.next(t); call.JobID != again.ID || call.Node != "n1" {
		t.Fatalf("the retried gpu job rendered on %s", call.Node)
	} else {
		call.answer(renderReply{Result: "finish"})
	}
	c.waitJob(again.ID, "finished")
	if j := a.job(again.ID); j.Name != "Spot GPU" || j.Pool != "gpu" || !slices.Equal(j.Limits, []string{"lic"}) {
		t.Fatalf("the retry's name %q, pool %q, limits %v", j.Name, j.Pool, j.Limits)
	}
	c.admin("team", "set", "a", "--pools", "4k")
	if e := a.fails(http.MethodPost, "/api/v2/jobs/"+failing.ID+"/retry", nil, http.StatusForbidden, "forbidden"); !strings.Contains(e.Error, `pool "gpu", which the team may no longer name`) {
		t.Fatalf("a retry in a pool the team may no longer name: %s", e.Error)
	}

	c.admin("limit", "delete", "lic")
	admin.fails(http.MethodDelete, "/api/v2/admin/limits/lic", nil, http.StatusNotFound, "not_found")
}

// TestALimitHoldsAcrossAFailover: with a limit of one, the leader is killed while one of three
// jobs holding it renders; the next leader counts that render (its node carries it on) and
// starts no other until it ends, then the next, one at a time.
func TestALimitHoldsAcrossAFailover(t *testing.T) {
	rs := newReplicaSet(t, 3, testTimings)
	rs.start()
	first := rs.leader()
	control := rs.members[0].control // the nodes' renderer asks the first member's control
	rs.startNode("n1")
	rs.startNode("n2")
	(&client{c: first, token: adminToken}).must(http.MethodPut, "/api/v2/admin/limits/lic", map[string]any{"count": 1}, http.StatusOK, nil)
	acme := first.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var ids []string
	for range 3 {
		j := renderJob(tplID)
		j["limits"] = []string{"lic"}
		var made created
		acme.must(http.MethodPost, "/api/v2/jobs", j, http.StatusCreated, &made)
		ids = append(ids, made.ID)
	}
	held := control.next(t)
	noMoreCalls(t, control, 500*time.Millisecond, "the limit of one is held")
	first.kill()
	next := rs.leader()
	on := &client{c: next, token: acme.token}
	for deadline := time.Now().Add(waitLimit); !strings.Contains(on.logs(held.JobID), "carried on across a failover"); {
		if time.Now().After(deadline) {
			t.Fatalf("the render held at the failover did not carry on:\n%s", on.logs(held.JobID))
		}
		noMoreCalls(t, control, 200*time.Millisecond, "the next leader has not yet counted the render holding the limit")
	}
	// The adopt window (a lease and a heartbeat) is over once the render carried on; the rest
	// wait for the limit.
	noMoreCalls(t, control, 2*time.Second, "the render at the failover still holds the limit")
	held.answer(renderReply{Result: "finish"})
	for range 2 {
		call := control.next(t)
		if call.JobID == held.JobID {
			t.Fatalf("job %s rendered again", call.JobID)
		}
		noMoreCalls(t, control, 300*time.Millisecond, "one licensed render runs")
		call.answer(renderReply{Result: "finish"})
	}
	for _, id := range ids {
		next.waitJob(id, "finished")
	}
}

// TestTheAdminSeesAndActsOnEveryTeamsJobs: the farm's admin lists every team's jobs, each with
// its team, filtered by team, engine, state and name; changes one team's job's priority, cancels
// another's, sends a split job's rendering chunk again (its node abandons it, it renders again
// as a new attempt that does not count) and stops the job. A team finds its own jobs by name.
func TestTheAdminSeesAndActsOnEveryTeamsJobs(t *testing.T) {
	c := startCoordinator(t, options{slots: 2})
	a, b := c.team("a"), c.team("b")
	admin := &client{c: c, token: adminToken}
	tplA, tplB := a.uploadTemplate(inspection()), b.uploadTemplate(inspection())
	named := func(cl *client, tpl, name string, extra map[string]any) created {
		j := renderJob(tpl)
		j["name"] = name
		maps.Copy(j, extra)
		var made created
		cl.must(http.MethodPost, "/api/v2/jobs", j, http.StatusCreated, &made)
		return made
	}
	split := named(a, tplA, "Spot Lyon (split)", map[string]any{"chunks": map[string]any{"frames": 50}})
	first, second := c.control.next(t), c.control.next(t) // two of its three chunks hold both slots
	waitingA := named(a, tplA, "spot lyon 2", nil)
	waitingB := named(b, tplB, "Trailer", nil)

	type listed struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Team struct {
			Name string `json:"name"`
		} `json:"team"`
	}
	list := func(query string) ([]listed, string) {
		var out []listed
		h := admin.must(http.MethodGet, "/api/v2/admin/jobs"+query, nil, http.StatusOK, &out)
		return out, h.Get("X-Total-Count")
	}
	all, total := list("")
	if len(all) != 3 || total != "3" || all[0].ID != split.ID || all[0].Team.Name != "a" || all[2].Team.Name != "b" {
		t.Fatalf("every team's jobs: %+v (total %s)", all, total)
	}
	if onlyB, _ := list("?team=b"); len(onlyB) != 1 || onlyB[0].ID != waitingB.ID {
		t.Fatalf("team b's: %+v", onlyB)
	}
	if lottie, _ := list("?engine=lottie&states=queued"); len(lottie) != 2 {
		t.Fatalf("queued lottie jobs: %+v", lottie)
	}
	if none, _ := list("?engine=ae2026"); len(none) != 0 {
		t.Fatalf("ae2026 jobs: %+v", none)
	}
	if spots, _ := list("?name=SPOT"); len(spots) != 2 || spots[0].ID != split.ID || spots[1].ID != waitingA.ID { // "(" before "2"
		t.Fatalf("jobs named spot..., by name: %+v", spots)
	}
	admin.fails(http.MethodGet, "/api/v2/admin/jobs?tags=x", nil, http.StatusBadRequest, "validation_error")
	var own []listed
	a.must(http.MethodGet, "/api/v2/jobs?name=spot%20lyon%202", nil, http.StatusOK, &own)
	if len(own) != 1 || own[0].ID != waitingA.ID || own[0].Name != "spot lyon 2" {
		t.Fatalf("a's jobs named spot lyon 2: %+v", own)
	}

	admin.must(http.MethodPatch, "/api/v2/admin/jobs/"+waitingB.ID, map[string]any{"priority": 7}, http.StatusOK, nil)
	if j := b.job(waitingB.ID); j.Priority != 7 || !strings.Contains(b.logs(waitingB.ID), "the farm's admin") {
		t.Fatalf("b's job after the admin's change: priority %d\n%s", j.Priority, b.logs(waitingB.ID))
	}
	admin.must(http.MethodPatch, "/api/v2/admin/jobs/"+waitingA.ID+"/cancel", nil, http.StatusOK, nil)
	c.waitJob(waitingA.ID, "manually_cancelled")

	// The split job's first chunk goes back to the queue, and renders again.
	var chunk struct {
		Index  int    `json:"index"`
		Status string `json:"status"`
	}
	admin.must(http.MethodPost, "/api/v2/admin/jobs/"+split.ID+"/chunks/0/retry", nil, http.StatusOK, &chunk)
	if chunk.Status != "queued" {
		t.Fatalf("the chunk sent again: %+v", chunk)
	}
	stopped := first
	if first.Settings.Frames.Start != 0 {
		stopped = second
	}
	select {
	case <-stopped.gone:
	case <-time.After(waitLimit):
		t.Fatal("the node did not abandon the chunk sent again")
	}
	// The slot it freed goes to team b, which holds none (fair share); then the chunk, the oldest
	// of team a's work, renders again.
	if other := c.control.next(t); other.JobID != waitingB.ID {
		t.Fatalf("the slot the chunk freed went to %s, not team b's job", other.JobID)
	} else {
		other.answer(renderReply{Result: "finish"})
	}
	again := c.control.next(t)
	if !again.Chunk || again.Settings.Frames.Start != 0 || again.Attempt != 2 {
		t.Fatalf("after it was sent again: %+v", again)
	}
	admin.fails(http.MethodPost, "/api/v2/admin/jobs/"+split.ID+"/chunks/9/retry", nil, http.StatusNotFound, "not_found")
	admin.fails(http.MethodPost, "/api/v2/admin/jobs/"+waitingB.ID+"/chunks/0/retry", nil, http.StatusConflict, "conflict")
	var view struct {
		Team   struct{ Name string } `json:"team"`
		Chunks []struct {
			Node           string `json:"node"`
			Attempts       int    `json:"attempts"`
			FailedAttempts int    `json:"failedAttempts"`
		} `json:"chunks"`
	}
	admin.must(http.MethodGet, "/api/v2/admin/jobs/"+split.ID, nil, http.StatusOK, &view)
	if view.Team.Name != "a" || len(view.Chunks) != 3 || view.Chunks[0].Attempts != 2 || view.Chunks[0].FailedAttempts != 0 {
		t.Fatalf("the admin's view of the split job: %+v", view)
	}
	// The job's log, the one its client reads, says what the admin did to its chunk.
	logHas(t, a, split.ID, "split into 3 chunks",
		"frames 0 to 49: attempt 1 on node "+view.Chunks[0].Node+" taken back by the farm's admin (token", "queued again, not counted against the attempts")
	admin.must(http.MethodPost, "/api/v2/admin/jobs/"+split.ID+"/stop", nil, http.StatusOK, nil)
	c.waitJob(split.ID, "manually_cancelled")
	c.waitUntil("the split job's log says which chunks the stop took from their nodes", func() bool {
		log := a.logs(split.ID)
		return strings.Contains(log, "cancelled by the farm's admin (token") && strings.Contains(log, "frames 0 to 49: attempt 2 on node "+view.Chunks[0].Node+" stopped: the job was cancelled")
	})
	a.fails(http.MethodGet, "/api/v2/admin/jobs", nil, http.StatusForbidden, "forbidden")
}

// TestRolesDecideWhatATokenMayDo: a manager's token makes, lists and revokes its own team's
// tokens and no other team's; a viewer's reads and streams and changes nothing, and is not told
// the team's webhook signing secret; a submitter's reaches no token route.
func TestRolesDecideWhatATokenMayDo(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	submitter, other := c.team("a"), c.team("b")
	admin := &client{c: c, token: adminToken}
	var made struct {
		ID    string `json:"id"`
		Token string `json:"token"`
		Role  string `json:"role"`
	}
	admin.must(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": "a", "role": "manager"}, http.StatusCreated, &made)
	manager := &client{c: c, token: made.Token}
	admin.fails(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": "a", "role": "owner"}, http.StatusBadRequest, "validation_error")

	manager.must(http.MethodPost, "/api/v2/tokens", map[string]string{"role": "viewer"}, http.StatusCreated, &made)
	if made.Role != "viewer" {
		t.Fatalf("the manager made a %q token", made.Role)
	}
	viewer, viewerID := &client{c: c, token: made.Token}, made.ID
	manager.fails(http.MethodPost, "/api/v2/tokens", map[string]string{"team": "b"}, http.StatusBadRequest, "validation_error")
	var listed []struct {
		ID   string            `json:"id"`
		Role string            `json:"role"`
		Team map[string]string `json:"team"`
	}
	manager.must(http.MethodGet, "/api/v2/tokens", nil, http.StatusOK, &listed)
	roles := map[string]int{}
	for _, tok := range listed {
		if tok.Team["name"] != "a" {
			t.Fatalf("a manager of team a sees a token of team %s", tok.Team["name"])
		}
		roles[tok.Role]++
	}
	if roles["manager"] != 1 || roles["viewer"] != 1 || roles["submitter"] != 1 {
		t.Fatalf("team a's tokens by role: %v", roles)
	}

	tpl := submitter.uploadTemplate(inspection())
	var job created
	submitter.must(http.MethodPost, "/api/v2/jobs", renderJob(tpl), http.StatusCreated, &job)
	viewer.must(http.MethodGet, "/api/v2/jobs/"+job.ID, nil, http.StatusOK, nil)
	viewer.must(http.MethodGet, "/api/v2/jobs", nil, http.StatusOK, nil)
	viewer.fails(http.MethodPost, "/api/v2/jobs", renderJob(tpl), http.StatusForbidden, "forbidden")
	viewer.fails(http.MethodPatch, "/api/v2/jobs/"+job.ID+"/cancel", nil, http.StatusForbidden, "forbidden")
	var team struct {
		Role          string `json:"role"`
		SigningSecret string `json:"webhookSigningSecret"`
	}
	viewer.must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, &team)
	if team.Role != "viewer" || team.SigningSecret != "" {
		t.Fatalf("a viewer's team view: %+v", team)
	}
	submitter.must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, &team)
	if team.Role != "submitter" || team.SigningSecret == "" {
		t.Fatalf("a submitter's team view: %+v", team)
	}
	submitter.fails(http.MethodGet, "/api/v2/tokens", nil, http.StatusForbidden, "forbidden")

	// A template awaiting its file: its signed upload URL is shown to whom may upload, never
	// to a viewer.
	type uploadable struct {
		ID         string          `json:"id"`
		UploadInfo json.RawMessage `json:"uploadInfo"`
	}
	var waiting uploadable
	submitter.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "Awaiting its file"}, http.StatusCreated, &waiting)
	if len(waiting.UploadInfo) == 0 {
		t.Fatal("the submitter who made the template was not told where to upload it")
	}
	var seen uploadable
	submitter.must(http.MethodGet, "/api/v2/templates/"+waiting.ID, nil, http.StatusOK, &seen)
	if len(seen.UploadInfo) == 0 {
		t.Fatal("a submitter reading the template is not told where to upload it")
	}
	var seenByViewer uploadable
	viewer.must(http.MethodGet, "/api/v2/templates/"+waiting.ID, nil, http.StatusOK, &seenByViewer)
	var listedTemplates []uploadable
	viewer.must(http.MethodGet, "/api/v2/templates", nil, http.StatusOK, &listedTemplates)
	for _, tp := range append(listedTemplates, seenByViewer) {
		if len(tp.UploadInfo) != 0 {
			t.Fatalf("a viewer was given template %s's upload URL: %s", tp.ID, tp.UploadInfo)
		}
	}
	viewer.fails(http.MethodPut, "/api/v2/templates/"+waiting.ID+"/upload", nil, http.StatusForbidden, "forbidden")

	// The manager can neither revoke another team's token nor tell it exists.
	var all []struct {
		ID   string            `json:"id"`
		Team map[string]string `json:"team"`
	}
	admin.must(http.MethodGet, "/api/v2/admin/tokens", nil, http.StatusOK, &all)
	for _, tok := range all {
		if tok.Team["name"] == "b" {
			manager.fails(http.MethodDelete, "/api/v2/tokens/"+tok.ID, nil, http.StatusNotFound, "not_found")
		}
	}
	other.must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, nil) // b's token still works
	manager.must(http.MethodDelete, "/api/v2/tokens/"+viewerID, nil, http.StatusOK, nil)
	viewer.fails(http.MethodGet, "/api/v2/jobs", nil, http.StatusUnauthorized, "unauthorized")

	out, err := framefarm("token", "list", "--data-dir", c.dataDir())
	if err != nil || !strings.Contains(string(out), "ROLE") || !strings.Contains(string(out), "manager") {
		t.Fatalf("token list: %v\n%s", err, out)
	}
}

// usageOf reads what a team used in the last day, as its token or the admin sees it.
func usageOf(t *testing.T, cl *client, path string) (total struct {
	RenderSeconds float64 `json:"renderSeconds"`
	Frames        int     `json:"frames"`
	JobsFinished  int     `json:"jobsFinished"`
	JobsFailed    int     `json:"jobsFailed"`
}) {
	t.Helper()
	var report struct {
		Teams []struct {
			Total json.RawMessage `json:"total"`
			Hours []struct {
				RenderSeconds float64 `json:"renderSeconds"`
			} `json:"hours"`
		} `json:"teams"`
	}
	cl.must(http.MethodGet, path, nil, http.StatusOK, &report)
	if len(report.Teams) != 1 {
		t.Fatalf("%s: %d teams", path, len(report.Teams))
	}
	if err := json.Unmarshal(report.Teams[0].Total, &total); err != nil {
		t.Fatal(err)
	}
	return total
}

// TestUsageOutlivesARestartAndAFailover: what a team's finished and failed jobs used is there
// after the coordinator restarts, and on the next leader after a leader is killed.
func TestUsageOutlivesARestartAndAFailover(t *testing.T) {
	c := startCoordinator(t, options{slots: 1, config: "\n[jobs]\nmax_attempts = 1\n"})
	c.control.answerAll(func(call *renderCall) renderReply {
		if call.Composition == "outro" {
			return renderReply{Result: "fail", Message: "the outro failed"}
		}
		return renderReply{Result: "finish"}
	})
	a := c.team("a")
	tpl := a.uploadTemplate(inspection())
	ids := a.createJobs(tpl, 2)
	outro := renderJob(tpl)
	outro["template"] = map[string]any{"id": tpl, "composition": "outro"}
	var failed created
	a.must(http.MethodPost, "/api/v2/jobs", outro, http.StatusCreated, &failed)
	for _, id := range ids {
		c.waitJob(id, "finished")
	}
	c.waitJob(failed.ID, "error")
	c.stop()
	c.restart()
	used := usageOf(t, a, "/api/v2/usage")
	if used.JobsFinished != 2 || used.JobsFailed != 1 || used.Frames != 300 || used.RenderSeconds <= 0 {
		t.Fatalf("a's usage after a restart: %+v", used)
	}
	if report := c.admin("usage", "--team", "a"); !strings.Contains(report, "RENDER TIME") || !regexp.MustCompile(`(?m)^a\s+all\s+\S+\s+300\s+2\s+1\s`).MatchString(report) {
		t.Fatalf("framefarm usage --team a:\n%s", report)
	}

	rs := newReplicaSet(t, 3, testTimings)
	rs.start()
	first := rs.leader()
	rs.members[0].control.answerAll(finishAll)
	rs.startNode("n1")
	b := first.team("b")
	tplB := b.uploadTemplate(inspection())
	for _, id := range b.createJobs(tplB, 3) {
		first.waitJob(id, "finished")
	}
	first.kill()
	next := rs.leader()
	if used := usageOf(t, &client{c: next, token: adminToken}, "/api/v2/admin/usage?team=b"); used.JobsFinished != 3 || used.Frames != 450 {
		t.Fatalf("b's usage on the next leader: %+v", used)
	}
}

// TestALicenceGoesToTheTeamServedFirst: two node processes with a free slot each, n1 (sorting
// first) of no pool, n2 of pool p; team busy holds a slot on n1 and waits with a job needing the
// farm's licence, team idle holds none and waits with one that only n2 may render. The licence,
// once there is one, goes to team idle's job, on n2; then, freed, to team busy's.
func TestALicenceGoesToTheTeamServedFirst(t *testing.T) {
	c := startCoordinator(t, options{cluster: true})
	c.startNode("n1", 2)
	c.startNode("n2", 1, "--pools", "p")
	busy, idle := c.team("busy"), c.team("idle")
	admin := &client{c: c, token: adminToken}
	admin.must(http.MethodPut, "/api/v2/admin/limits/lic", map[string]any{"count": 0}, http.StatusOK, nil)
	tplBusy, tplIdle := busy.uploadTemplate(inspection()), idle.uploadTemplate(inspection())
	var holding, busyLicensed, idleLicensed created
	busy.must(http.MethodPost, "/api/v2/jobs", renderJob(tplBusy), http.StatusCreated, &holding)
	running := c.control.next(t)
	if running.JobID != holding.ID || running.Node != "n1" {
		t.Fatalf("the busy team's first render went to %s", running.Node)
	}
	licensed := func(tpl string, fields map[string]any) map[string]any {
		j := renderJob(tpl)
		j["limits"] = []string{"lic"}
		maps.Copy(j, fields)
		return j
	}
	busy.must(http.MethodPost, "/api/v2/jobs", licensed(tplBusy, nil), http.StatusCreated, &busyLicensed)
	idle.must(http.MethodPost, "/api/v2/jobs", licensed(tplIdle, map[string]any{"pool": "p"}), http.StatusCreated, &idleLicensed)
	c.waitUntil("both licensed jobs wait for the licence", func() bool {
		return strings.Contains(busy.job(busyLicensed.ID).Stats.WaitingFor, `limit "lic"`) &&
			strings.Contains(idle.job(idleLicensed.ID).Stats.WaitingFor, `limit "lic"`)
	})
	admin.must(http.MethodPut, "/api/v2/admin/limits/lic", map[string]any{"count": 1}, http.StatusOK, nil)
	first := c.control.next(t)
	if first.JobID != idleLicensed.ID || first.Node != "n2" {
		t.Fatalf("the licence went to job %s on %s, not to the idle team's job on n2", first.JobID, first.Node)
	}
	noMoreCalls(t, c.control, 500*time.Millisecond, "the licence is held")
	first.answer(renderReply{Result: "finish"})
	if next := c.control.next(t); next.JobID != busyLicensed.ID || next.Node != "n1" {
		t.Fatalf("the freed licence went to job %s on %s", next.JobID, next.Node)
	} else {
		next.answer(renderReply{Result: "finish"})
	}
	running.answer(renderReply{Result: "finish"})
	c.exactlyOnce([]string{holding.ID, busyLicensed.ID, idleLicensed.ID})
}
