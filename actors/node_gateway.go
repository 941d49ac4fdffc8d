package actors

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

// GatewayName is the name of the actor every node message goes to, in-process or remote.
const GatewayName = "framefarm-nodes"

// maxNodeSlots caps the slots one node may announce.
const maxNodeSlots = 4096

// nodeGateway receives every message from render nodes, opens its envelope and routes it to the
// node's NodeActor. It answers what it cannot route: a hello without a challenge (a Challenge),
// a heartbeat from a node it does not know (say Hello again) and a message of a kind this
// version does not know (an Error, never a crash).
type nodeGateway struct {
	w          *nodeWorld
	challenges *challengeBook
	// refusals throttles the log lines of hellos and messages refused.
	refusals clock.Throttle
}

// refused logs a refusal, at most once per throttle period.
func (g *nodeGateway) refused(line string, args ...any) {
	if pass, held := g.refusals.Allow(line, g.w.clock.Now()); pass {
		g.w.log.Warn(line, append(args, "refused_since_last_line", held)...)
	}
}

func (g *nodeGateway) Receive(ctx actor.Context) {
	env, ok := ctx.Message().(*protocol.Envelope)
	if !ok {
		return
	}
	answer := func(msg any) {
		if ctx.Sender() != nil {
			ctx.Respond(protocol.Wrap(msg))
		}
	}
	msg, err := protocol.Open(env)
	if err != nil {
		g.refused("refused a render node message", "kind", env.GetKind(), "version", env.GetVersion(), "err", err)
		g.w.events.NodeMessageRefused.Publish(NodeMessageRefused{Why: "payload"})
		answer(&protocol.Error{Kind: env.GetKind(), Message: err.Error()})
		return
	}
	peer, remote := protocol.PeerOf(ctx)
	if h, ok := msg.(*protocol.Hello); ok {
		g.hello(ctx, h, peer, remote, answer)
		return
	}
	var from protocol.Sender
	if m, ok := msg.(protocol.FromNode); ok {
		from = *m.From()
	}
	if reason := certificateMismatch(peer, remote, from.NodeID); reason != "" {
		g.refused("refused a render node message", "kind", env.GetKind(), "node", from.NodeID, "peer", peer.Describe(), "reason", reason)
		g.w.events.NodeMessageRefused.Publish(NodeMessageRefused{Why: "identity"})
		return
	}
	if pid := g.w.nodes.pid(from.NodeID); pid != nil {
		ctx.Send(pid, &fromNode{msg: msg, sender: ctx.Sender(), session: from.Session})
		return
	}
	// A node this process never welcomed: it says hello first (its results wait until then).
	switch msg.(type) {
	case *protocol.Heartbeat:
		answer(&protocol.HeartbeatAck{Known: false})
	default:
		g.w.log.Debug("message from an unknown render node", "node", from.NodeID, "kind", env.GetKind())
	}
}

// hello challenges a hello without a nonce; one answering a challenge this gateway gave its
// sender, unspent and fresh, is checked and goes to the node's actor, which welcomes it.
func (g *nodeGateway) hello(ctx actor.Context, h *protocol.Hello, peer protocol.Peer, remote bool, answer func(any)) {
	peerKey := "this process"
	if remote {
		peerKey = peer.Key()
	}
	now := g.w.clock.Now()
	if h.Nonce == "" {
		answer(&protocol.Challenge{Nonce: g.challenges.issue(peerKey, now)})
		return
	}
	if !g.challenges.take(h.Nonce, peerKey, now) {
		// Nothing is answered: the node asks for a new challenge when its patience ends.
		g.refused("refused a hello answering a challenge not given to its sender, expired or already used (a replayed hello?)",
			"node", h.NodeID, "peer", peer.Describe())
		g.w.events.NodeMessageRefused.Publish(NodeMessageRefused{Why: "hello"})
		return
	}
	reason := checkHello(h, g.w.cfg.ClusterKey)
	if reason == "" {
		reason = certificateMismatch(peer, remote, h.NodeID)
	}
	if reason != "" {
		g.refused("refused a render node", "node", h.NodeID, "peer", peer.Describe(), "reason", reason)
		g.w.events.NodeMessageRefused.Publish(NodeMessageRefused{Why: "hello"})
		answer(&protocol.Welcome{Accepted: false, Reason: reason, Nonce: h.Nonce})
		return
	}
	ctx.Send(g.w.nodes.actorFor(h.NodeID, func() actor.Actor { return newNodeActor(g.w, h) }, g.w.root), &fromNode{msg: h, sender: ctx.Sender()})
}

// certificateMismatch says why a message from the network may not speak for a node ("" when it
// may): a certificate that names a node id speaks for that node only.
func certificateMismatch(peer protocol.Peer, remote bool, nodeID string) string {
	switch {
	case !remote || !peer.Verified:
		return ""
	case peer.Identity.Role != certs.RoleNode:
		return fmt.Sprintf("its certificate is a %s's, not a node's", peer.Identity.Role)
	case peer.Identity.NodeID != "" && peer.Identity.NodeID != nodeID:
		return fmt.Sprintf("its certificate is node %s's", peer.Identity.NodeID)
	}
	return ""
}

// parseJobID reads a job id a node sent; an invalid one gives the zero id, which reaches no job.
func parseJobID(s string) ulid.ULID {
	id, _ := ulid.ParseStrict(s)
	return id
}

// checkHello says why a node may not join ("" when it may); key is the cluster's.
func checkHello(h *protocol.Hello, key []byte) string {
	switch {
	case !certs.NodeIDPattern.MatchString(h.NodeID):
		return fmt.Sprintf("node id %q must be 1 to 128 letters, digits, dots, dashes or underscores", h.NodeID)
	case h.Slots < 1 || h.Slots > maxNodeSlots:
		return fmt.Sprintf("slots must be between 1 and %d, not %d", maxNodeSlots, h.Slots)
	case h.AgentAddress == "" || h.AgentID == "" || h.Incarnation == "":
		return "the hello names no agent actor or incarnation"
	case !protocol.CheckHelloProof(key, h):
		return "the node does not hold this cluster's key"
	case h.Machine != nil && (len(h.Machine.OS) > 32 || len(h.Machine.Arch) > 32 || h.Machine.CPUs < 0 || h.Machine.MemoryBytes < 0):
		return "the hello's machine description is out of bounds"
	case len(h.Fonts) > protocol.MaxHelloFonts || slices.ContainsFunc(h.Fonts, func(f string) bool { return len(f) > protocol.MaxFontName }):
		return fmt.Sprintf("the hello names more than %d fonts, or a font name longer than %d bytes", protocol.MaxHelloFonts, protocol.MaxFontName)
	}
	return ""
}

// nodeDirectory keeps each node's actor, latest NodeInfo and installed fonts for readers
// outside the actors.
type nodeDirectory struct {
	mu    sync.Mutex
	nodes map[string]NodeInfo
	pids  map[string]*actor.PID
	// fonts are the fonts each node has installed (by renderer.FontKey); installed, per
	// engine, those every ready node of it has, as last worked out: at version, which moves
	// when a node's state, engines or fonts do.
	fonts     map[string]map[string]bool
	installed map[string]installedFonts
	version   uint64
}

type installedFonts struct {
	version uint64
	keys    map[string]bool
}

func newNodeDirectory() *nodeDirectory {
	return &nodeDirectory{nodes: make(map[string]NodeInfo), pids: make(map[string]*actor.PID), fonts: map[string]map[string]bool{},
		installed: map[string]installedFonts{}}
}

func (d *nodeDirectory) put(info NodeInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.nodes[info.ID]; !ok || old.State != info.State || !slices.Equal(old.Engines, info.Engines) {
		d.version++
	}
	d.nodes[info.ID] = info
}

// setFonts records the fonts a node said it has installed.
func (d *nodeDirectory) setFonts(nodeID string, names []string) {
	keys := make(map[string]bool, len(names))
	for _, name := range names {
		keys[renderer.FontKey(name)] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fonts[nodeID] = keys
	d.version++
}

// installedFor are the fonts (by renderer.FontKey) every ready node offering engine has
// installed: none while no node does. The set is shared: callers only read it.
func (d *nodeDirectory) installedFor(engine string) map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c, ok := d.installed[engine]; ok && c.version == d.version {
		return c.keys
	}
	var keys map[string]bool
	for id, info := range d.nodes {
		if info.State != NodeReady || !slices.Contains(info.Engines, engine) {
			continue
		}
		if keys == nil {
			keys = maps.Clone(d.fonts[id])
			continue
		}
		maps.DeleteFunc(keys, func(k string, _ bool) bool { return !d.fonts[id][k] })
	}
	d.installed[engine] = installedFonts{version: d.version, keys: keys}
	return keys
}

func (d *nodeDirectory) pid(nodeID string) *actor.PID {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pids[nodeID]
}

// holderOf names the node whose latest info lists the job among its renders ("" when none does).
func (d *nodeDirectory) holderOf(jobID string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, info := range d.nodes {
		if _, found := slices.BinarySearch(info.CurrentJobs, jobID); found {
			return id
		}
	}
	return ""
}

// forget removes a node whose actor has stopped.
func (d *nodeDirectory) forget(nodeID string, pid *actor.PID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pids[nodeID].Equal(pid) {
		delete(d.pids, nodeID)
		delete(d.nodes, nodeID)
		delete(d.fonts, nodeID)
		d.version++
	}
}

// actorFor returns the node's actor, spawning the one made makes at the node's first hello.
func (d *nodeDirectory) actorFor(nodeID string, made func() actor.Actor, root *actor.RootContext) *actor.PID {
	d.mu.Lock()
	defer d.mu.Unlock()
	if pid := d.pids[nodeID]; pid != nil {
		return pid
	}
	pid := root.Spawn(actor.PropsFromProducer(made))
	d.pids[nodeID] = pid
	return pid
}

// InstalledFont reports whether every ready render node offering engine has the font of that
// name installed (false while no node does).
func (c *Coordinator) InstalledFont(engine, name string) bool {
	t := c.now.Load()
	return t != nil && t.nodes.installedFor(engine)[renderer.FontKey(name)]
}

// Nodes lists the known render nodes, by id.
func (c *Coordinator) Nodes() []NodeInfo {
	t := c.now.Load()
	if t == nil {
		return nil
	}
	t.nodes.mu.Lock()
	defer t.nodes.mu.Unlock()
	out := make([]NodeInfo, 0, len(t.nodes.nodes))
	for _, n := range t.nodes.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}

// NodeGateway is the actor render nodes talk to in the running term; remote nodes reach it by
// GatewayName.
func (c *Coordinator) NodeGateway() *actor.PID {
	if t := c.now.Load(); t != nil {
		return t.addr.gateway
	}
	return nil
}

// ErrNoSuchNode is returned for an operator command on a node the coordinator never saw.
var ErrNoSuchNode = errors.New("no such render node")

// DrainNode stops a node taking new work; its renders finish. ClearNode returns a drained or
// quarantined node to work. Both hold across restarts of the node and of the coordinator.
func (c *Coordinator) DrainNode(nodeID string) (NodeInfo, error) { return c.nodeCommand(nodeID, true) }

// ClearNode: see DrainNode.
func (c *Coordinator) ClearNode(nodeID string) (NodeInfo, error) { return c.nodeCommand(nodeID, false) }

func (c *Coordinator) nodeCommand(nodeID string, drain bool) (NodeInfo, error) {
	t, err := c.leading()
	if err != nil {
		return NodeInfo{}, err
	}
	res, _, err := t.askNode(nodeID, &nodeCommand{drain: drain})
	if err != nil {
		return NodeInfo{}, err
	}
	return res.(NodeInfo), nil
}

// askNode asks a node's actor and returns its answer and the actor.
func (c *term) askNode(nodeID string, msg any) (any, *actor.PID, error) {
	pid := c.nodes.pid(nodeID)
	if pid == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrNoSuchNode, nodeID)
	}
	res, err := c.system.Root.RequestFuture(pid, msg, c.cfg.AskTimeout).Result()
	if err != nil {
		return nil, nil, ErrUnavailable
	}
	return res, pid, nil
}

// ErrNodeActive is returned when forgetting a node that is not lost or gone.
var ErrNodeActive = errors.New("the render node is still in the farm")

// ForgetNode drops a lost or departed node from the farm's records, with its drain or
// quarantine hold. Should it come back, it joins as a new node.
func (c *Coordinator) ForgetNode(nodeID string) error {
	t, err := c.leading()
	if err != nil {
		return err
	}
	res, pid, err := t.askNode(nodeID, &forgetNode{})
	if err != nil {
		return err
	}
	if err, _ := res.(error); err != nil {
		return err
	}
	t.nodes.forget(nodeID, pid)
	c.deps.Store.ApplyAsync(&persistence.SetMeta{Name: nodeGossipKey(nodeID)}, func(err error) {
		if err != nil {
			c.log.Error("cannot forget a node's gossip address", "node", nodeID, "err", err)
		}
	})
	return nil
}

// nodeGossipKey names where a node's membership was last seen.
func nodeGossipKey(nodeID string) string { return "node_gossip/" + nodeID }

// NodeSeen records, durably and on every replica, where membership reaches a render node, when
// that changed: a replica that takes the lead reaches every node it knows of at once
// (NodeAddresses), rather than wait for each to notice the old leader is gone and look for it.
func (c *Coordinator) NodeSeen(nodeID, gossip string) {
	key := nodeGossipKey(nodeID)
	if nodeID == "" || gossip == "" || c.deps.Store.Meta(key) == gossip {
		return
	}
	c.deps.Store.ApplyAsync(&persistence.SetMeta{Name: key, Value: gossip}, func(err error) {
		if err != nil {
			c.log.Warn("cannot record a node's gossip address", "node", nodeID, "err", err)
		}
	})
}

// NodeAddresses are the membership addresses of the render nodes the farm knows of.
func (c *Coordinator) NodeAddresses() []string {
	var out []string
	for _, addr := range c.deps.Store.MetaPrefixed(nodeGossipKey("")) {
		out = append(out, addr)
	}
	return out
}

// NodeLeft tells the coordinator cluster membership saw an incarnation of a node leave or die:
// its lease ends now instead of at its expiry. A later incarnation (the node restarted) is kept.
func (c *Coordinator) NodeLeft(nodeID, incarnation, reason string) {
	t := c.now.Load()
	if t == nil {
		return
	}
	if pid := t.nodes.pid(nodeID); pid != nil {
		t.system.Root.Send(pid, &nodeLeft{incarnation: incarnation, reason: reason})
	}
}

// ActorSystem is the system the running term's actors run in (nil: none runs); an embedded
// render node spawns its agent there, and the cluster's remote serves it.
func (c *Coordinator) ActorSystem() *actor.ActorSystem {
	if t := c.now.Load(); t != nil {
		return t.system
	}
	return nil
}
