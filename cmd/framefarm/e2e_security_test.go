package main

// The cluster link under attack: a coordinator and a node process on 127.0.0.1, and strangers
// who reach their ports. Strangers that need an actors endpoint of their own (to be answered)
// run as child processes of this test binary (stranger below), so this process never starts
// Proto.Actor's remote (whose start writes gRPC's global logger, a race within one process).

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/node"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/cluster/remoting"
	"github.com/framefarm/framefarm/cluster/remoting/remotingtest"
	"github.com/framefarm/framefarm/persistence/porttest"
)

// envStranger makes this test binary run strangerMain with the plan it holds (JSON).
const envStranger = "FRAMEFARM_E2E_STRANGER"

// strangerPlan is what a stranger process does: from its own actors endpoint (TLS files, or
// insecure), each step in turn, printing one line per step.
type strangerPlan struct {
	TLS     remoting.TLS `json:"tls"`
	Gateway string       `json:"gateway"`
	Key     string       `json:"key"`
	Steps   []string     `json:"steps"`
	// Node is the id the stranger says hello as (its certificate's); Job and Attempt the
	// attempt its forge step reports.
	Node    string `json:"node"`
	Job     string `json:"job"`
	Attempt int    `json:"attempt"`
}

// strangerMain runs a plan. Steps:
//   - unknown-kind: sends a kind no coordinator knows; prints the kind of the error answered.
//   - hello-wrong-key: answers a challenge without the cluster key; prints "welcomed" or "refused".
//   - replay: says a proper hello (it holds the key), then sends that same hello again; prints
//     what the first and the second got.
//   - forge: says a proper hello as plan.Node and, welcomed with its own session, reports the
//     plan's attempt (another node's): progress with a log line, a failure, then a result;
//     prints "forged" and what the results were answered.
func strangerMain(raw string) int {
	var plan strangerPlan
	if err := json.Unmarshal([]byte(raw), &plan); err != nil {
		fmt.Println("plan:", err)
		return 1
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	e, err := remoting.Start(system, remoting.Options{Bind: "127.0.0.1:0", TLS: plan.TLS, Insecure: !plan.TLS.Enabled(),
		Self: certs.RoleNode, Accept: certs.RoleCoordinator})
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	defer e.Shutdown(false)
	gateway := actor.NewPID(plan.Gateway, actors.GatewayName)
	ask := func(env *protocol.Envelope, wait time.Duration) any {
		res, err := system.Root.RequestFuture(gateway, env, wait).Result()
		if err != nil {
			return "unanswered"
		}
		msg, err := protocol.Open(res.(*protocol.Envelope))
		if err != nil {
			return err.Error()
		}
		return msg
	}
	hello := func(key []byte) (*protocol.Hello, any) {
		id := plan.Node
		if id == "" {
			id = "stranger"
		}
		h := &protocol.Hello{NodeID: id, Slots: 1, Engines: []string{"lottie"}, AgentAddress: e.Addr, AgentID: "nobody", Incarnation: "1"}
		c, ok := ask(protocol.Wrap(h), waitLimit).(*protocol.Challenge)
		if !ok {
			return h, "no challenge"
		}
		h.Nonce = c.Nonce
		h.KeyProof = protocol.HelloProof(key, h.Nonce, h)
		return h, ask(protocol.Wrap(h), waitLimit)
	}
	describe := func(answer any) string {
		if w, ok := answer.(*protocol.Welcome); ok {
			if w.Accepted {
				return "welcomed"
			}
			return "refused"
		}
		return fmt.Sprint(answer)
	}
	for _, step := range plan.Steps {
		switch step {
		case "unknown-kind":
			answer := ask(&protocol.Envelope{Kind: "gpu-stats", Version: 7, Payload: []byte(`{"temperature":71}`)}, waitLimit)
			if e, ok := answer.(*protocol.Error); ok {
				fmt.Println("unknown-kind error", e.Kind)
			} else {
				fmt.Println("unknown-kind", answer)
			}
		case "hello-wrong-key":
			_, answer := hello([]byte("another key 0123456789"))
			fmt.Println("hello-wrong-key", describe(answer))
		case "replay":
			h, first := hello([]byte(plan.Key))
			again := ask(protocol.Wrap(h), 3*time.Second)
			fmt.Println("replay", describe(first), describe(again))
		case "forge":
			h, answer := hello([]byte(plan.Key))
			w, ok := answer.(*protocol.Welcome)
			if !ok || !w.Accepted {
				fmt.Println("forge", describe(answer))
				continue
			}
			from := protocol.Sender{NodeID: h.NodeID, Session: w.Session}
			system.Root.Send(gateway, protocol.Wrap(&protocol.Progress{Sender: from, JobID: plan.Job, Attempt: plan.Attempt, Percent: 66,
				Log: []string{"forged line"}}))
			system.Root.Send(gateway, protocol.Wrap(&protocol.Failed{Sender: from, JobID: plan.Job, Attempt: plan.Attempt, Error: "forged failure"}))
			system.Root.Send(gateway, protocol.Wrap(&protocol.Done{Sender: from, JobID: plan.Job, Attempt: plan.Attempt, Duration: time.Second}))
			// A heartbeat asked behind them answers once they reached the gateway.
			ask(protocol.Wrap(&protocol.Heartbeat{Sender: from, Incarnation: h.Incarnation}), waitLimit)
			fmt.Println("forged")
		}
	}
	return 0
}

// stranger runs a plan in a child process and returns its lines.
func stranger(t *testing.T, plan strangerPlan) []string {
	t.Helper()
	raw, _ := json.Marshal(plan)
	cmd := dieWithTheTest(exec.Command(os.Args[0], "-test.run=^$"))
	cmd.Env = append(os.Environ(), envStranger+"="+string(raw))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("stranger: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestClusterRefusesToStartWithoutTLS: a [cluster] table without certificates, as every farm
// configured before TLS was the default, stops serve and node with a message giving both ways
// forward; insecure = true starts and says so (where it binds is TestNodeFlags'), except with
// [ha].
func TestClusterRefusesToStartWithoutTLS(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "framefarm.toml")
	gossip := porttest.FreeAddr(t)
	os.WriteFile(config, []byte(fmt.Sprintf("[cluster]\nbind = %q\nkey = %q\n", gossip, clusterKey)), 0o600)
	out, err := framefarm("serve", "--config", config, "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0")
	for _, want := range []string{"framefarm cluster tls ca create", "[cluster.tls]", "insecure = true"} {
		if err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("serve without certificates: %v, output lacks %q:\n%s", err, want, out)
		}
	}
	out, err = framefarm("node", "--join", gossip, "--data-dir", filepath.Join(dir, "node"))
	for _, want := range []string{"framefarm cluster tls cert create", "--tls-cert", "--insecure"} {
		if err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("node without certificates: %v, output lacks %q:\n%s", err, want, out)
		}
	}

	// A replica's port carries every record of the farm: insecure = true, which a lone
	// coordinator may use for its actors port, does not start a replica.
	replica := filepath.Join(dir, "replica.toml")
	haPort := porttest.FreeAddr(t)
	os.WriteFile(replica, []byte(fmt.Sprintf("[cluster]\nbind = %q\nkey = %q\ninsecure = true\n", gossip, clusterKey)+
		sharedConfig("\n[objects]\nbackend = \"s3\"\n\n[objects.s3]\nbucket = \"farm\"\n")+"[node]\nlocal_slots = 0\n"+haTable("c1", []string{"c1=" + haPort}, "")), 0o600)
	out, err = framefarm("serve", "--config", replica, "--data-dir", filepath.Join(dir, "replica"), "--listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(string(out), "remove insecure = true from [cluster]") || !strings.Contains(string(out), "[cluster.tls]") ||
		strings.Contains(string(out), "set insecure = true") {
		t.Fatalf("a replica with insecure = true: %v\n%s", err, out)
	}

	c := startCoordinator(t, options{cluster: true, insecure: true})
	if c.stderr.waitFor(waitLimit, "the actors port runs without TLS") == "" {
		t.Fatalf("an insecure coordinator did not say so:\n%s", c.stderr.tail(20))
	}
	n := c.startNode("n1", 1)
	if n.stderr.waitFor(waitLimit, "the actors port runs without TLS") == "" {
		t.Fatalf("an insecure node did not say so:\n%s", n.stderr.tail(20))
	}
}

// TestClusterSurvivesHostilePeers throws what a stranger can at a live coordinator and a live
// node (insecure, so the strangers reach the handlers): stray bytes on the actors and gossip
// ports, every gRPC method of the remote, batches naming unknown types and indexes outside
// themselves, and an assignment to the node's agent without a session. Both processes keep
// working: the node renders the next job, and the stranger's assignment renders nothing.
func TestClusterSurvivesHostilePeers(t *testing.T) {
	c := startCoordinator(t, options{cluster: true, insecure: true})
	cl := c.team("hostile")
	n := c.startNode("n1", 1)
	nodeActors := n.flag("--actors-bind")
	for _, addr := range []string{c.actors, nodeActors} {
		attackActorsPort(t, addr)
	}
	for _, addr := range []string{c.gossip, n.flag("--bind")} {
		for _, network := range []string{"tcp", "udp"} {
			conn, err := net.Dial(network, addr)
			if err != nil {
				t.Fatal(err)
			}
			for range 20 {
				conn.Write(remotingtest.Random(1400))
			}
			conn.Close()
		}
	}

	// A stranger's assignment reaches the agent but is refused and logged: nothing renders.
	forged := protocol.Wrap(&protocol.Assign{Session: "guessed", Seq: 1, JobID: "01FORGEDFORGEDFORGEDFORGED", Attempt: 1,
		Task: protocol.Task{Engine: "lottie", Output: protocol.Output{Name: "out.mp4", PutURL: "http://127.0.0.1:1/steal"}}})
	remotingtest.Send(remotingtest.Dial(t, nodeActors), remotingtest.Envelope(nodeActors, node.AgentName, forged), time.Second)
	if n.stderr.waitFor(waitLimit, "refused an assignment that does not come from the coordinator that welcomed this node") == "" {
		t.Fatalf("the node did not log the stranger's assignment:\n%s", n.stderr.tail(30))
	}

	// Both processes still work together.
	c.control.answerAll(finishAll)
	ids := cl.createJobs(cl.uploadTemplate(inspection()), 2)
	c.exactlyOnce(ids)
	for _, id := range ids {
		if out := cl.renderOutput(id); out.JobID == "01FORGEDFORGEDFORGEDFORGED" || out.Node != "n1" {
			t.Fatalf("job %s rendered as %+v", id, out)
		}
	}
	for who, p := range map[string]*exec.Cmd{"coordinator": c.cmd, "node": n.cmd} {
		if p == nil || p.ProcessState != nil {
			t.Fatalf("the %s process ended", who)
		}
	}
}

// attackActorsPort throws at one actors port stray bytes, every gRPC method of Proto.Actor's
// remote, batches cut short and every hostile batch, aimed at the coordinator's gateway and the
// node's agent.
func attackActorsPort(t *testing.T, addr string) {
	t.Helper()
	remotingtest.StrayBytes(t, addr)
	client := remotingtest.Dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	client.ListProcesses(ctx, &remote.ListProcessesRequest{Pattern: ".*", Type: remote.ListProcessesMatchType_MatchRegex})
	client.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{Pid: &actor.PID{Address: addr, Id: actors.GatewayName}})
	for _, target := range []string{actors.GatewayName, node.AgentName} {
		remotingtest.Truncated(t, addr, remotingtest.Envelope(addr, target, protocol.Wrap(&protocol.Bye{})))
		for name, batch := range remotingtest.HostileBatches(addr, target) {
			if !strings.HasPrefix(name, "nil ") { // those are proper messages once on the wire
				remotingtest.Send(client, remotingtest.Batch(batch), 5*time.Second)
			}
		}
	}
}

// flag returns the value a node process was started with for a flag.
func (n *renderNode) flag(name string) string {
	for i, arg := range n.args {
		if arg == name && i+1 < len(n.args) {
			return n.args[i+1]
		}
	}
	n.t.Fatalf("node %s has no %s", n.id, name)
	return ""
}

// TestClusterRefusesStrangers: with TLS (the default), a node whose certificate another CA
// signed cannot join; a stranger holding the key whose hello is played again is refused; a
// newer node's unknown message kind is answered with an error and the farm goes on.
func TestClusterRefusesStrangers(t *testing.T) {
	c, cl, _ := clusterFarm(t, 1)

	// The intruder trusts the farm's CA (its certificate is no secret) and its own.
	otherPKI := filepath.Join(t.TempDir(), "other")
	tlsCommand(t, "ca", "create", "--dir", otherPKI)
	tlsCommand(t, "cert", "create", "--node", "intruder", "--dir", otherPKI)
	farmCA, _ := os.ReadFile(filepath.Join(c.pki, "farm-ca.pem"))
	ownCA, _ := os.ReadFile(filepath.Join(otherPKI, "farm-ca.pem"))
	os.WriteFile(filepath.Join(otherPKI, "both-ca.pem"), append(ownCA, farmCA...), 0o600)
	intruder := &renderNode{t: t, id: "intruder", stderr: &lockedBuffer{},
		args: []string{"node", "--join", c.gossip, "--bind", porttest.FreeAddr(t), "--actors-bind", porttest.FreeAddr(t),
			"--data-dir", filepath.Join(t.TempDir(), "data"), "--engines", "lottie",
			"--tls-cert", filepath.Join(otherPKI, "node-intruder.pem"), "--tls-key", filepath.Join(otherPKI, "node-intruder-key.pem"),
			"--tls-ca", filepath.Join(otherPKI, "both-ca.pem")},
		env: append(os.Environ(), envRun+"=1", envClusterKey+"="+clusterKey),
	}
	t.Cleanup(intruder.kill)
	intruder.launch()
	if c.stderr.waitFor(waitLimit, "certificate signed by unknown authority") == "" {
		t.Fatalf("the coordinator did not log the foreign certificate:\n%s", c.stderr.tail(30))
	}

	tlsCommand(t, "cert", "create", "--any-node", "--dir", c.pki)
	member := remoting.TLS{CertFile: filepath.Join(c.pki, "node.pem"), KeyFile: filepath.Join(c.pki, "node-key.pem"), CAFile: filepath.Join(c.pki, "farm-ca.pem")}
	lines := stranger(t, strangerPlan{TLS: member, Gateway: c.actors, Key: clusterKey, Steps: []string{"unknown-kind", "hello-wrong-key", "replay"}})
	want := []string{"unknown-kind error gpu-stats", "hello-wrong-key refused", "replay welcomed unanswered"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the stranger saw:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if c.stderr.waitFor(waitLimit, "refused a hello answering a challenge not given to its sender, expired or already used") == "" {
		t.Fatalf("the coordinator did not log the replayed hello:\n%s", c.stderr.tail(30))
	}

	var list []actors.NodeInfo
	(&client{c: c, token: adminToken}).must("GET", "/api/v2/nodes", nil, 200, &list)
	for _, n := range list {
		if n.ID == "intruder" {
			t.Fatalf("the node of another CA was listed: %+v", n)
		}
	}
	c.control.answerAll(finishAll)
	c.exactlyOnce(cl.createJobs(cl.uploadTemplate(inspection()), 1))
}

// TestClusterRefusesReportsOfAnotherNodesAttempt: a second node, welcomed with its own valid
// certificate and session, reports the attempt rendering on the first (progress with a log
// line, a failure, a result): the coordinator refuses each, logging both nodes; the job renders
// on and the first node's output finishes it.
func TestClusterRefusesReportsOfAnotherNodesAttempt(t *testing.T) {
	c, cl, _ := clusterFarm(t, 1)
	id := cl.createJobs(cl.uploadTemplate(inspection()), 1)[0]
	call := c.control.next(t)
	if call.Node != "n1" || call.JobID != id {
		t.Fatalf("render %+v", call)
	}
	tlsCommand(t, "cert", "create", "--node", "n2", "--dir", c.pki)
	n2 := remoting.TLS{CertFile: filepath.Join(c.pki, "node-n2.pem"), KeyFile: filepath.Join(c.pki, "node-n2-key.pem"), CAFile: filepath.Join(c.pki, "farm-ca.pem")}
	lines := stranger(t, strangerPlan{TLS: n2, Gateway: c.actors, Key: clusterKey, Node: "n2", Job: id, Attempt: call.Attempt, Steps: []string{"forge"}})
	if strings.Join(lines, "\n") != "forged" {
		t.Fatalf("the second node saw: %q", lines)
	}
	if c.stderr.waitFor(waitLimit, "refused a report of an attempt the node does not hold") == "" {
		t.Fatalf("the coordinator did not log the other node's reports:\n%s", c.stderr.tail(30))
	}
	if line := c.stderr.lineWith("refused a report of an attempt the node does not hold"); !strings.Contains(line, "node=n2") ||
		!strings.Contains(line, "held_by=n1") || !strings.Contains(line, "job="+id) {
		t.Fatalf("the refusal does not name both nodes: %s", line)
	}
	if j := cl.job(id); j.Status != "render:dorender" || j.Progress >= 66 || j.Node != "n1" || j.Stats.Error != nil {
		t.Fatalf("after the other node's reports: %+v", j)
	}
	if log := cl.logs(id); strings.Contains(log, "forged") {
		t.Fatalf("the job's log took the other node's words:\n%s", log)
	}
	call.answer(renderReply{Result: "finish"})
	c.exactlyOnce([]string{id})
	if out := cl.renderOutput(id); out.Node != "n1" || out.Attempt != call.Attempt {
		t.Fatalf("output from %s attempt %d", out.Node, out.Attempt)
	}
}
