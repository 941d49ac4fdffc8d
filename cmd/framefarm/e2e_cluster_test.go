package main

// Render nodes as separate processes: a coordinator (`serve` with a [cluster] table and no
// embedded node) and `framefarm node` processes on 127.0.0.1, rendering with the test renderer
// the test drives. Nodes are killed, stopped and restarted for real; tests wait on signals.

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/persistence/porttest"
)

const clusterKey = "test-cluster-key-0123456789"

// renderNode is one `framefarm node` process (and its restarts).
type renderNode struct {
	t      testing.TB
	id     string
	args   []string
	env    []string
	cmd    *exec.Cmd
	exited chan error
	stderr *lockedBuffer
	// cpus, when set, pins the node and what it runs to these CPUs (taskset), as a machine of
	// that many cores would have them.
	cpus string
	// binary is the program the node runs: this test binary unless set (another release's).
	binary string
	// netns, when set, is the network namespace the node runs in (one the test made).
	netns string
}

func (c *coordinator) startNode(id string, slots int, extra ...string) *renderNode {
	c.t.Helper()
	return c.startNodeIn(c.t.TempDir(), id, slots, append([]string{"--id", id}, extra...)...)
}

// startNodeWithoutID starts a node given no --id (and no certificate naming one): its id is the
// host name and the suffix kept in its data folder, written here beforehand so the test knows it.
func (c *coordinator) startNodeWithoutID(suffix string, slots int) *renderNode {
	c.t.Helper()
	dir := c.t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", nodeIDFile), []byte(suffix+"\n"), 0o600); err != nil {
		c.t.Fatal(err)
	}
	host, _ := os.Hostname()
	return c.startNodeIn(dir, host+"-"+suffix, slots)
}

// startNodeOnCPUs starts a node pinned to some CPUs (taskset's list, such as "1").
func (c *coordinator) startNodeOnCPUs(id string, slots int, cpus string) *renderNode {
	c.t.Helper()
	n := c.newNode(c.t.TempDir(), id, slots, "--id", id)
	n.cpus = cpus
	return c.runNode(n)
}

// startNodeIn starts a node whose files are in dir; id is what the node will call itself.
func (c *coordinator) startNodeIn(dir, id string, slots int, extra ...string) *renderNode {
	c.t.Helper()
	return c.runNode(c.newNode(dir, id, slots, extra...))
}

// newNode prepares a node process whose files are in dir, stopped when the test ends.
func (c *coordinator) newNode(dir, id string, slots int, extra ...string) *renderNode {
	c.t.Helper()
	n := &renderNode{
		t: c.t, id: id, stderr: &lockedBuffer{},
		args: append([]string{"node", "--join", c.gossip, "--slots", fmt.Sprint(slots),
			"--bind", porttest.FreeAddr(c.t), "--actors-bind", porttest.FreeAddr(c.t), "--data-dir", filepath.Join(dir, "data"),
			"--engines", "lottie,ffmpeg", "--allow-private-urls"}, append(c.nodeTLS(id), extra...)...),
		env: append(os.Environ(), envRun+"=1", envControl+"="+c.control.url, envNodeName+"="+id, envClusterKey+"="+clusterKey),
	}
	if c.opts.realEngines {
		// The production engines, configured as on another machine: the worker by absolute path.
		worker, err := filepath.Abs("../../renderer/lottie/worker")
		if err != nil {
			c.t.Fatal(err)
		}
		config := filepath.Join(dir, "node.toml")
		if err := os.WriteFile(config, []byte(fmt.Sprintf("[engines]\nlottie_worker = %q\n", worker)), 0o600); err != nil {
			c.t.Fatal(err)
		}
		n.args = append(n.args, "--config", config)
		n.env = append(n.env, envRealEngines+"=1")
	}
	c.t.Cleanup(func() {
		n.kill()
		if log := n.stderr.String(); strings.Contains(log, "WARNING: DATA RACE") {
			c.t.Errorf("node %s reported a data race:\n%s", id, log[strings.Index(log, "WARNING: DATA RACE"):])
		}
		if c.t.Failed() {
			c.t.Logf("node %s log:\n%s", id, n.stderr.tail(60))
		}
	})
	return n
}

// runNode launches a prepared node and waits until it is ready.
func (c *coordinator) runNode(n *renderNode) *renderNode {
	c.t.Helper()
	n.launch()
	c.waitNode(n.id, actors.NodeReady)
	return n
}

func (n *renderNode) launch() {
	n.t.Helper()
	program := cmp.Or(n.binary, os.Args[0])
	cmd := dieWithTheTest(exec.Command(program, n.args...))
	switch {
	case n.cpus != "":
		cmd = dieWithTheTest(exec.Command("taskset", append([]string{"-c", n.cpus, program}, n.args...)...))
	case n.netns != "":
		cmd = dieWithTheTest(exec.Command("ip", append([]string{"netns", "exec", n.netns, program}, n.args...)...))
	}
	cmd.Env = n.env
	cmd.Stderr = n.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	started := make(chan struct{})
	n.cmd, n.exited = cmd, make(chan error, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		once := false
		for scanner.Scan() {
			if !once && strings.HasPrefix(scanner.Text(), "framefarm node "+n.id+" started") {
				once = true
				close(started)
			}
		}
		n.exited <- cmd.Wait()
	}()
	select {
	case <-started:
	case err := <-n.exited:
		n.t.Fatalf("node %s exited at start: %v\n%s", n.id, err, n.stderr.tail(30))
	case <-time.After(waitLimit):
		n.t.Fatalf("node %s did not start\n%s", n.id, n.stderr.tail(30))
	}
}

func (n *renderNode) signal(sig syscall.Signal) {
	n.t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		n.t.Fatal(err)
	}
}

// kill ends the node at once (SIGKILL).
func (n *renderNode) kill() {
	if n.cmd == nil || n.cmd.ProcessState != nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once it runs again
	n.cmd.Process.Kill()
	<-n.exited
	n.cmd = nil
}

// waitExit waits for the node to end by itself and checks it exited cleanly.
func (n *renderNode) waitExit() {
	n.t.Helper()
	select {
	case err := <-n.exited:
		if err != nil {
			n.t.Fatalf("node %s exit: %v\n%s", n.id, err, n.stderr.tail(30))
		}
		n.cmd = nil
	case <-time.After(waitLimit):
		n.t.Fatalf("node %s did not exit\n%s", n.id, n.stderr.tail(30))
	}
}

// clusterFarm starts a coordinator without an embedded node and render nodes n1..nN.
func clusterFarm(t *testing.T, nodes int) (*coordinator, *client, []*renderNode) {
	t.Helper()
	c := startCoordinator(t, options{cluster: true})
	cl := c.team("cluster")
	var ns []*renderNode
	for i := 1; i <= nodes; i++ {
		ns = append(ns, c.startNode(fmt.Sprintf("n%d", i), 1))
	}
	return c, cl, ns
}

// createJobs creates count jobs of one template and returns their ids.
func (cl *client) createJobs(templateID string, count int) []string {
	var ids []string
	for range count {
		var j created
		cl.must(http.MethodPost, "/api/v2/jobs", renderJob(templateID), http.StatusCreated, &j)
		ids = append(ids, j.ID)
	}
	return ids
}

// renderOutput returns the call the test renderer wrote as a finished job's output.
func (cl *client) renderOutput(id string) renderCall {
	t := cl.c.t
	t.Helper()
	status, body := get(t, cl.job(id).OutputURL)
	if status != 200 {
		t.Fatalf("output of %s: %d", id, status)
	}
	var call renderCall
	if err := json.Unmarshal(body, &call); err != nil {
		t.Fatalf("output of %s: %v", id, err)
	}
	return call
}

// logs returns a job's log.
func (cl *client) logs(id string) string {
	_, body, _ := cl.call("GET", "/api/v2/jobs/"+id+"/logs", nil)
	return string(body)
}

// exactlyOnce checks every job finished, once.
func (c *coordinator) exactlyOnce(ids []string) {
	c.t.Helper()
	for _, id := range ids {
		c.waitJob(id, "finished")
	}
	c.Read(func() {
		for _, id := range ids {
			if n := c.counts["job "+id+" finished"]; n != 1 {
				c.t.Errorf("job %s finished %d times", id, n)
			}
		}
	})
}

// TestClusterNodeKilledMidRender: jobs spread over three node processes; a node SIGKILLed
// mid-render has its job re-run elsewhere as attempt 2; restarted under the same id, it reports
// its interrupted attempt 1, which is fenced off; every job finishes exactly once.
func TestClusterNodeKilledMidRender(t *testing.T) {
	c, cl, nodes := clusterFarm(t, 3)
	tpl := cl.uploadTemplate(inspection())
	ids := cl.createJobs(tpl, 6)

	// The first three renders start on three different nodes.
	calls := map[string]*renderCall{}
	for range 3 {
		call := c.control.next(t)
		if calls[call.Node] != nil {
			t.Fatalf("node %s got a second render while others were idle", call.Node)
		}
		calls[call.Node] = call
	}
	victim := calls["n1"]
	nodes[0].kill()
	c.waitNode("n1", actors.NodeLost)
	c.control.answerAll(finishAll)
	for node, call := range calls {
		if node != "n1" {
			call.answer(renderReply{Result: "finish"})
		}
	}
	c.exactlyOnce(ids)
	if j := cl.job(victim.JobID); j.Attempts != 2 || !strings.Contains(cl.logs(victim.JobID), "attempt 1 on node n1 ended: render node lost") {
		t.Fatalf("the killed node's job: attempts %d\n%s", j.Attempts, cl.logs(victim.JobID))
	}
	if out := cl.renderOutput(victim.JobID); out.Attempt != 2 || out.Node == "n1" {
		t.Fatalf("the killed node's job was delivered by %s attempt %d", out.Node, out.Attempt)
	}

	// Restarted with the same id, the node reports the attempt its death interrupted: fenced.
	nodes[0].launch()
	c.waitFor("fenced", victim.JobID, "1:failure")
	c.waitNode("n1", actors.NodeReady)
	if j := cl.job(victim.JobID); j.Status != "finished" || j.Attempts != 2 {
		t.Fatalf("after the late report: %s attempt %d", j.Status, j.Attempts)
	}
	if log := cl.logs(victim.JobID); !strings.Contains(log, "rejected the failure report of attempt 1 from node n1") {
		t.Fatalf("the rejected report is not in the job's log:\n%s", log)
	}
	c.exactlyOnce(ids)
}

// TestClusterNodeStoppedPastItsLease is the partition: a node SIGSTOPped past its lease loses
// its job to another node; once it runs again, what it still says of its old attempt changes
// nothing, and the output is the other node's.
func TestClusterNodeStoppedPastItsLease(t *testing.T) {
	c, cl, nodes := clusterFarm(t, 2)
	tpl := cl.uploadTemplate(inspection())
	id := cl.createJobs(tpl, 1)[0]
	first := c.control.next(t)
	stopped := nodes[0]
	if first.Node != "n1" {
		stopped = nodes[1]
	}
	stopped.signal(syscall.SIGSTOP)
	second := c.control.next(t)
	if second.JobID != id || second.Attempt != 2 || second.Node == first.Node {
		t.Fatalf("re-run %s attempt %d on %s", second.JobID, second.Attempt, second.Node)
	}
	second.answer(renderReply{Result: "finish"})
	c.waitJob(id, "finished")
	// The stopped node's render is told to finish before the node runs again: it uploads and
	// reports attempt 1 unless the coordinator's abandon reaches it first. Either way the job
	// stays as attempt 2 delivered it.
	first.answer(renderReply{Result: "finish"})
	stopped.signal(syscall.SIGCONT)
	c.waitNode(first.Node, actors.NodeReady)
	// Whichever comes first: the coordinator logs the fenced report, or the node the abandon.
	found := make(chan string, 2)
	go func() { found <- c.stderr.waitFor(waitLimit, "rejected a report from a stale attempt") }()
	go func() { found <- stopped.stderr.waitFor(waitLimit, "abandoned an attempt") }()
	if first := <-found; first == "" && <-found == "" {
		t.Fatalf("attempt 1 was neither fenced nor abandoned\n%s", stopped.stderr.tail(30))
	}
	if out := cl.renderOutput(id); out.Attempt != 2 || out.Node != second.Node {
		t.Fatalf("output from %s attempt %d", out.Node, out.Attempt)
	}
	c.exactlyOnce([]string{id})
}

// TestClusterCoordinatorKilledWhileNodesRender: the coordinator is SIGKILLed and restarted
// while both nodes render; the nodes reconnect and their renders complete under their attempts
// (adopted within a lease), the queued jobs run, nothing is lost and nothing finishes twice.
func TestClusterCoordinatorKilledWhileNodesRender(t *testing.T) {
	// A lease long enough for the nodes' remote connections to come back (they retry every 2 s,
	// and CI machines are slow); adoption takes only as long as the reconnection.
	c := startCoordinator(t, options{cluster: true, heartbeat: "200ms", lease: "10s"})
	cl := c.team("cluster")
	c.startNode("n1", 1)
	c.startNode("n2", 1)
	tpl := cl.uploadTemplate(inspection())
	ids := cl.createJobs(tpl, 4)
	rendering := []*renderCall{c.control.next(t), c.control.next(t)}
	c.kill()
	c.restart()
	c.waitNode("n1", actors.NodeReady)
	c.waitNode("n2", actors.NodeReady)
	c.control.answerAll(finishAll)
	for _, call := range rendering {
		call.answer(renderReply{Result: "finish"})
	}
	c.exactlyOnce(ids)
	for _, call := range rendering {
		if j := cl.job(call.JobID); j.Attempts != 1 {
			t.Fatalf("job %s rendering at the restart ended at attempt %d, not adopted\n%s", call.JobID, j.Attempts, cl.logs(call.JobID))
		}
	}
	for _, id := range ids {
		if out := cl.renderOutput(id); out.Attempt != cl.job(id).Attempts {
			t.Fatalf("job %s delivered by attempt %d, its current is %d", id, out.Attempt, cl.job(id).Attempts)
		}
	}
}

// TestClusterResultAcknowledgedOnlyOnceDurable: the coordinator is SIGKILLed after a node's
// result reached it and before the job's change was committed. The node, not acknowledged,
// still holds the result, hands it to the restarted coordinator, and the job finishes under its
// first attempt: nothing renders twice.
func TestClusterResultAcknowledgedOnlyOnceDurable(t *testing.T) {
	c := newCoordinator(t, options{cluster: true, heartbeat: "200ms", lease: "10s"})
	c.env = []string{envHoldFinish + "=1"}
	c.launch("127.0.0.1:0")
	cl := c.team("cluster")
	c.startNode("n1", 1)
	id := cl.createJobs(cl.uploadTemplate(inspection()), 1)[0]
	c.control.next(t).answer(renderReply{Result: "finish"})
	c.waitFor("commit", "held", "finished")
	c.kill()
	c.env = nil
	c.restart()
	c.waitJob(id, "finished")
	if j := cl.job(id); j.Attempts != 1 {
		t.Fatalf("the job finished at attempt %d\n%s", j.Attempts, cl.logs(id))
	}
	if out := cl.renderOutput(id); out.Attempt != 1 {
		t.Fatalf("the output is attempt %d's", out.Attempt)
	}
	select {
	case call := <-c.control.calls:
		t.Fatalf("job %s rendered again (attempt %d)", call.JobID, call.Attempt)
	default:
	}
}

// TestClusterNodeDrains: a SIGTERMed node finishes its render, takes nothing new, and leaves;
// an operator's drain and clear through the API hold a node back and let it go.
func TestClusterNodeDrains(t *testing.T) {
	c, cl, nodes := clusterFarm(t, 2)
	tpl := cl.uploadTemplate(inspection())
	first := cl.createJobs(tpl, 1)[0]
	call := c.control.next(t)
	var draining, other *renderNode
	for _, n := range nodes {
		if n.id == call.Node {
			draining = n
		} else {
			other = n
		}
	}
	draining.signal(syscall.SIGTERM)
	c.waitNode(draining.id, actors.NodeDraining)
	more := cl.createJobs(tpl, 3)
	for range more {
		next := c.control.next(t)
		if next.Node != other.id {
			t.Fatalf("a draining node got job %s", next.JobID)
		}
		next.answer(renderReply{Result: "finish"})
	}
	call.answer(renderReply{Result: "finish"})
	draining.waitExit()
	c.waitNode(draining.id, actors.NodeLeft)
	c.exactlyOnce(append(more, first))

	// An operator drains the remaining node: new work waits; cleared, it runs.
	admin := &client{c: c, token: adminToken}
	var info actors.NodeInfo
	admin.must("POST", "/api/v2/nodes/"+other.id+"/drain", nil, 200, &info)
	if info.State != actors.NodeDraining {
		t.Fatalf("drained node is %s", info.State)
	}
	admin.fails("POST", "/api/v2/nodes/nosuch/clear", nil, 404, "not_found")
	waiting := cl.createJobs(tpl, 1)[0]
	var list []actors.NodeInfo
	admin.must("GET", "/api/v2/nodes", nil, 200, &list)
	states := map[string]actors.NodeState{}
	for _, n := range list {
		states[n.ID] = n.State
	}
	if states[other.id] != actors.NodeDraining || states[draining.id] != actors.NodeLeft {
		t.Fatalf("nodes %v", states)
	}
	select {
	case call := <-c.control.calls:
		t.Fatalf("job %s went to a drained node", call.JobID)
	default:
	}
	admin.must("POST", "/api/v2/nodes/"+other.id+"/clear", nil, 200, &info)
	c.control.next(t).answer(renderReply{Result: "finish"})
	c.exactlyOnce([]string{waiting})
	_, metrics := get(t, c.url+"/metrics")
	for _, line := range []string{`framefarm_nodes{state="ready"} 1`, `framefarm_nodes{state="left"} 1`,
		`framefarm_slots{engine="lottie",kind="total"} 1`, `framefarm_node_renders_total{node="` + other.id + `",result="finished"} 4`} {
		if !strings.Contains(string(metrics), line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}
	out, err := framefarm("node", "list", "--url", c.url, "--admin-token", adminToken)
	listed := map[string]actors.NodeState{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			listed[f[0]] = actors.NodeState(f[1])
		}
	}
	if err != nil || listed[other.id] != actors.NodeReady || listed[draining.id] != actors.NodeLeft {
		t.Fatalf("node list: %v\n%s", err, out)
	}
	// A node that left can be forgotten; one in the farm cannot.
	admin.fails("DELETE", "/api/v2/nodes/"+other.id, nil, 409, "conflict")
	if out, err := framefarm("node", "forget", draining.id, "--url", c.url, "--admin-token", adminToken); err != nil {
		t.Fatalf("node forget: %v\n%s", err, out)
	}
	admin.must("GET", "/api/v2/nodes", nil, 200, &list)
	if len(list) != 1 || list[0].ID != other.id {
		t.Fatalf("after forgetting: %+v", list)
	}
}

// TestClusterRefusesANodeWithoutTheKey: a node process holding another cluster key cannot join
// the membership, is never welcomed and never listed, and says why.
func TestClusterRefusesANodeWithoutTheKey(t *testing.T) {
	c := startCoordinator(t, options{cluster: true})
	n := &renderNode{t: t, id: "intruder", stderr: &lockedBuffer{},
		args: append([]string{"node", "--join", c.gossip, "--id", "intruder", "--bind", porttest.FreeAddr(t), "--actors-bind", porttest.FreeAddr(t),
			"--data-dir", filepath.Join(t.TempDir(), "data"), "--engines", "lottie"}, c.nodeTLS("intruder")...),
		env: append(os.Environ(), envRun+"=1", envClusterKey+"=another-key-0123456789"),
	}
	t.Cleanup(n.kill)
	n.launch()
	if n.stderr.waitFor(waitLimit, "cannot join the cluster") == "" {
		t.Fatalf("the node did not say it cannot join:\n%s", n.stderr.tail(20))
	}
	if c.stderr.waitFor(waitLimit, "no installed keys could decrypt the message") == "" {
		t.Fatalf("the coordinator did not refuse the gossip:\n%s", c.stderr.tail(20))
	}
	var list []actors.NodeInfo
	(&client{c: c, token: adminToken}).must("GET", "/api/v2/nodes", nil, 200, &list)
	if len(list) != 0 {
		t.Fatalf("nodes %+v", list)
	}
}

// TestClusterNodeRendersWithTheRealEngine: a Lottie job rendered by the production engine in a
// node process, its files fetched from and uploaded to the coordinator over HTTP.
func TestClusterNodeRendersWithTheRealEngine(t *testing.T) {
	c := startCoordinator(t, options{cluster: true, realEngines: true})
	c.startNode("lottie-node", 1)
	acme := c.team("acme")
	tpl := acme.uploadTemplateFile("zip", fixture(t, "lottie/EmbeddedFont.zip"))
	j, video := acme.render(map[string]any{
		"template": map[string]any{"id": tpl.ID, "composition": "Name"},
		"assets":   []any{map[string]any{"type": "text", "layerName": "NAME", "value": "Hello"}},
	})
	if j.Node != "lottie-node" || len(j.MissingFonts) != 0 {
		t.Fatalf("rendered on %q, missing fonts %v (the template brings its Comic Neue)", j.Node, j.MissingFonts)
	}
	if m := probe(t, video, ".mp4"); m.Codec != "h264" || m.Width != 150 || m.Height != 150 {
		t.Fatalf("video %+v", m)
	}
}

// TestClusterTwoNodesOnOneMachineWithoutIDs: two nodes of one machine started without --id take
// the ids their data folders give them, both join, and both render.
func TestClusterTwoNodesOnOneMachineWithoutIDs(t *testing.T) {
	c := startCoordinator(t, options{cluster: true, insecure: true})
	cl := c.team("cluster")
	a, b := c.startNodeWithoutID("aaaaaa", 1), c.startNodeWithoutID("bbbbbb", 1)
	tplID := cl.uploadTemplate(inspection())
	ids := cl.createJobs(tplID, 2)
	first, second := c.control.next(t), c.control.next(t)
	if got, want := []string{first.Node, second.Node}, []string{a.id, b.id}; !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Fatalf("renders ran on %v, want one on each of %v", got, want)
	}
	first.answer(finishAll(nil))
	second.answer(finishAll(nil))
	for _, id := range ids {
		c.waitJob(id, "finished")
	}
}

// TestAWaitingJobSaysWhyInItsLog: a job that cannot start says why in its log (what the official
// CLI's job logs and job diagnose print), once per change of reason however long it waits: no
// node offers its engine; then one does and it renders; then every such node is drained.
func TestAWaitingJobSaysWhyInItsLog(t *testing.T) {
	c := startCoordinator(t, options{cluster: true, heartbeat: "100ms", lease: "500ms"})
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	var first created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &first)
	c.waitCount("waits", "lottie", "recorded", 1)
	const absent, drained = `waiting: no render node offers the "lottie" engine`,
		`waiting: the only render node offering the "lottie" engine is draining`
	if log := acme.logs(first.ID); !strings.Contains(log, absent) {
		t.Fatalf("a job no node can render:\n%s", log)
	}
	var waiting job
	acme.must(http.MethodGet, "/api/v2/jobs/"+first.ID, nil, http.StatusOK, &waiting)
	if waiting.Stats.WaitingFor != strings.TrimPrefix(absent, "waiting: ") {
		t.Fatalf("waitingFor %q, not what its log says", waiting.Stats.WaitingFor)
	}

	c.control.answerAll(finishAll)
	node := c.startNode("n1", 1)
	c.waitJob(first.ID, "finished")
	log := acme.logs(first.ID)
	over := strings.Index(log, `waiting over: a ready render node offers the "lottie" engine`)
	if strings.Count(log, "waiting") != 2 || strings.Index(log, absent) > over || over > strings.Index(log, "finished on node n1") {
		t.Fatalf("the rendered job's log:\n%s", log)
	}

	admin := &client{c: c, token: adminToken}
	admin.must(http.MethodPost, "/api/v2/nodes/"+node.id+"/drain", nil, http.StatusOK, nil)
	c.waitCount("waits", "lottie", "recorded", 3)
	var second created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &second)
	for range 20 {
		acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, nil)
	}
	if log := acme.logs(second.ID); strings.Count(log, "waiting") != 1 || !strings.Contains(log, drained) {
		t.Fatalf("a job behind a drained farm:\n%s", log)
	}
	if j := acme.job(second.ID); j.Stats.WaitingFor != strings.TrimPrefix(drained, "waiting: ") {
		t.Fatalf("a job behind a drained farm is waiting for %q, not what its log says", j.Stats.WaitingFor)
	}
	c.Read(func() {
		if n := c.counts["waits lottie recorded"]; n != 3 {
			t.Errorf("the lottie engine's reason was recorded %d times, want 3", n)
		}
	})
}
