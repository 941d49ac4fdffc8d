package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/protocol"
)

// Node states as the coordinator sees them.
const (
	NodeReady    = "ready"
	NodeDraining = "draining"
	NodeLeft     = "left"
)

// nodeActor stands for one render node inside the coordinator: it hands the node its
// assignments, forwards the node's reports to the jobs, and frees the node's slots.
type nodeActor struct {
	c     *Coordinator
	hello protocol.Hello
	agent *actor.PID
	log   *slog.Logger
	// running maps the jobs this node renders to their attempt and team.
	running map[ulid.ULID]runningAttempt
}

type runningAttempt struct {
	attempt int
	team    ulid.ULID
}

// nodeLeft tells a NodeActor its node is gone; its attempts are lost.
type nodeLeft struct{ reason string }

func (n *nodeActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		n.publish(NodeReady, ctx)
		ctx.Send(n.c.scheduler, &nodeReady{nodeID: n.hello.NodeID, pid: ctx.Self(), engines: n.hello.Engines, slots: n.hello.Slots})
	case *assign:
		n.assign(ctx, m)
	case *protocol.Progress:
		n.c.tellJob(n.jobID(m.JobID), &renderProgress{attempt: m.Attempt, percent: m.Percent})
		n.publish(NodeReady, ctx)
	case *protocol.Done:
		jobID := n.jobID(m.JobID)
		n.c.tellJob(jobID, &renderDone{attempt: m.Attempt, node: n.hello.NodeID, duration: m.Duration, log: m.Log})
		n.finish(ctx, jobID, m.Attempt)
	case *protocol.Failed:
		jobID := n.jobID(m.JobID)
		n.c.tellJob(jobID, &renderFailed{attempt: m.Attempt, node: n.hello.NodeID, err: m.Error, retryable: m.Retryable, log: m.Log})
		n.finish(ctx, jobID, m.Attempt)
	case *nodeLeft:
		for jobID, r := range n.running {
			n.c.tellJob(jobID, &renderFailed{attempt: r.attempt, node: n.hello.NodeID, err: "render node left: " + m.reason, retryable: true})
		}
		n.running = map[ulid.ULID]runningAttempt{}
		ctx.Send(n.c.scheduler, &nodeGone{nodeID: n.hello.NodeID})
		n.c.nodes.remove(n.hello.NodeID)
		ctx.Stop(ctx.Self())
	}
}

func (n *nodeActor) jobID(s string) ulid.ULID {
	id, err := ulid.ParseStrict(s)
	if err != nil {
		n.log.Warn("node reported on an invalid job id", "job", s)
	}
	return id
}

func (n *nodeActor) assign(ctx actor.Context, m *assign) {
	job := m.job
	task, err := n.c.buildTask(job)
	if err != nil {
		n.c.tellJob(job.ID, &renderFailed{attempt: job.Attempts, node: n.hello.NodeID, err: err.Error()})
		ctx.Send(n.c.scheduler, &slotFreed{nodeID: n.hello.NodeID, jobID: job.ID})
		return
	}
	n.running[job.ID] = runningAttempt{attempt: job.Attempts, team: job.TeamID}
	ctx.Request(n.agent, &protocol.Assign{JobID: job.ID.String(), Attempt: job.Attempts, Task: task})
	n.publish(NodeReady, ctx)
}

// finish frees the slot of an attempt that ended; a report for an attempt the node no longer
// runs frees nothing.
func (n *nodeActor) finish(ctx actor.Context, jobID ulid.ULID, attempt int) {
	if r, ok := n.running[jobID]; ok && r.attempt == attempt {
		delete(n.running, jobID)
		ctx.Send(n.c.scheduler, &slotFreed{nodeID: n.hello.NodeID, jobID: jobID})
	}
	n.publish(NodeReady, ctx)
}

func (n *nodeActor) publish(state string, _ actor.Context) {
	jobs := make([]string, 0, len(n.running))
	for id := range n.running {
		jobs = append(jobs, id.String())
	}
	sort.Strings(jobs)
	n.c.nodes.put(NodeInfo{
		ID:            n.hello.NodeID,
		Engines:       slices.Clone(n.hello.Engines),
		Slots:         n.hello.Slots,
		State:         state,
		Version:       n.hello.Version,
		Labels:        n.hello.Labels,
		CurrentJobs:   jobs,
		LastHeartbeat: n.c.Clock.Now(),
	})
}

// NodeInfo is what GET /nodes shows of a node.
type NodeInfo struct {
	ID            string            `json:"id"`
	Engines       []string          `json:"engines"`
	Slots         int               `json:"slots"`
	State         string            `json:"state"`
	Version       string            `json:"version"`
	Labels        map[string]string `json:"labels,omitempty"`
	CurrentJobs   []string          `json:"currentJobs"`
	LastHeartbeat time.Time         `json:"lastHeartbeat"`
}

// nodeDirectory keeps the latest NodeInfo of each node for readers outside the actors.
type nodeDirectory struct {
	mu    sync.Mutex
	nodes map[string]NodeInfo
	pids  map[string]*actor.PID
}

func newNodeDirectory() *nodeDirectory {
	return &nodeDirectory{nodes: make(map[string]NodeInfo), pids: make(map[string]*actor.PID)}
}

func (d *nodeDirectory) put(info NodeInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nodes[info.ID] = info
}

func (d *nodeDirectory) remove(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.nodes, id)
	delete(d.pids, id)
}

// Nodes lists the known render nodes, by id.
func (c *Coordinator) Nodes() []NodeInfo {
	c.nodes.mu.Lock()
	defer c.nodes.mu.Unlock()
	out := make([]NodeInfo, 0, len(c.nodes.nodes))
	for _, n := range c.nodes.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}

// ErrNodeExists is returned when a node id is already attached.
var ErrNodeExists = errors.New("a node with this id is attached")

// AttachNode brings a render node into the farm: agent is the node's actor that takes
// assignments and answers with reports.
func (c *Coordinator) AttachNode(hello protocol.Hello, agent *actor.PID) error {
	if hello.NodeID == "" || hello.Slots < 0 {
		return fmt.Errorf("invalid node hello: id %q, %d slots", hello.NodeID, hello.Slots)
	}
	c.nodes.mu.Lock()
	defer c.nodes.mu.Unlock()
	if c.nodes.pids[hello.NodeID] != nil {
		return fmt.Errorf("%w: %s", ErrNodeExists, hello.NodeID)
	}
	c.nodes.pids[hello.NodeID] = c.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &nodeActor{c: c, hello: hello, agent: agent, log: c.log.With("node", hello.NodeID), running: map[ulid.ULID]runningAttempt{}}
	}))
	return nil
}

// DetachNode takes a node out of the farm; the attempts it was running are lost and their jobs
// are queued again.
func (c *Coordinator) DetachNode(nodeID, reason string) {
	c.nodes.mu.Lock()
	pid := c.nodes.pids[nodeID]
	c.nodes.mu.Unlock()
	if pid != nil {
		c.system.Root.Send(pid, &nodeLeft{reason: reason})
	}
}

// ActorSystem is the system the coordinator's actors run in; an embedded render node spawns
// its agent there.
func (c *Coordinator) ActorSystem() *actor.ActorSystem { return c.system }
