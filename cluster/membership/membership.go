// Package membership is the farm's cluster membership: the coordinator and every render node
// are members of one hashicorp/memberlist (SWIM) cluster, whose gossip is encrypted with the
// cluster key. Members carry small metadata (role, node id, actor address); the coordinator
// learns of a node dying from here within seconds, and a node learns where the coordinator's
// actors listen. Correctness never rests on membership alone: the coordinator's leases and
// attempt numbers do (actors/node_actor.go).
package membership

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Roles of members.
const (
	RoleCoordinator = "coordinator"
	RoleNode        = "node"
)

// Meta is what a member tells the others about itself.
type Meta struct {
	Role   string `json:"role"`
	NodeID string `json:"nodeId,omitempty"`
	// Incarnation is the render node process's incarnation (protocol.Hello.Incarnation).
	Incarnation string `json:"incarnation,omitempty"`
	// Actors is the host:port of the member's Proto.Actor remote endpoint.
	Actors string `json:"actors"`
	// Leaving is set just before a member leaves on purpose, so the others tell a goodbye from
	// a death (memberlist's events do not say which).
	Leaving bool `json:"leaving,omitempty"`
}

// Event is a change of another member.
type Event struct {
	Name string
	Meta Meta
	// Addr is the member's gossip address (host:port).
	Addr string
	// Alive is false when the member left or was declared dead; Left tells which.
	Alive bool
	Left  bool
}

// Config describes this member.
type Config struct {
	// Name is unique in the cluster (a node's id).
	Name string
	// Bind is the host:port gossip listens on (UDP and TCP); Advertise, when set, is what
	// others dial.
	Bind      string
	Advertise string
	// Seeds are members to join through (host:port).
	Seeds []string
	// Key is the cluster key; gossip is encrypted with a key derived from it, and members
	// without it cannot join.
	Key  string
	Meta Meta
	// Fast tunes failure detection for a LAN farm: a dead member is declared within about two
	// seconds instead of memberlist's LAN default of about five.
	Fast   bool
	Logger *slog.Logger
}

// MinKeyLength is the shortest cluster key accepted.
const MinKeyLength = 16

// Member is this process's membership.
type Member struct {
	cfg      Config
	list     *memberlist.Memberlist
	delegate *delegate
	events   chan Event
	log      *slog.Logger

	// alive is this member's view of the others, kept from memberlist's events: the nodes
	// Members() returns are shared with memberlist's goroutines and cannot be read safely.
	mu    sync.Mutex
	alive map[string]Meta
}

// GossipKey derives the 32-byte gossip encryption key from a cluster key.
func GossipKey(clusterKey string) []byte {
	sum := sha256.Sum256([]byte("framefarm gossip\n" + clusterKey))
	return sum[:]
}

// Start creates the member and listens; Run joins the seeds.
func Start(cfg Config) (*Member, error) {
	if len(cfg.Key) < MinKeyLength {
		return nil, fmt.Errorf("the cluster key must be at least %d characters", MinKeyLength)
	}
	host, port, err := splitHostPort(cfg.Bind)
	if err != nil {
		return nil, fmt.Errorf("cluster bind address: %w", err)
	}
	mc := memberlist.DefaultLANConfig()
	if cfg.Fast {
		mc.ProbeInterval = 500 * time.Millisecond
		mc.ProbeTimeout = 250 * time.Millisecond
		mc.SuspicionMult = 2
		mc.GossipInterval = 100 * time.Millisecond
	}
	mc.Name = cfg.Name
	mc.BindAddr, mc.BindPort = host, port
	if cfg.Advertise != "" {
		if mc.AdvertiseAddr, mc.AdvertisePort, err = splitHostPort(cfg.Advertise); err != nil {
			return nil, fmt.Errorf("cluster advertise address: %w", err)
		}
	}
	mc.SecretKey = GossipKey(cfg.Key)
	// A member restarted under the same name may come back at another address at once.
	mc.DeadNodeReclaimTime = time.Nanosecond
	log := cfg.Logger.With("component", "membership")
	mc.Logger = stdlog.New(logAdapter{log}, "", 0)
	m := &Member{cfg: cfg, events: make(chan Event, 1024), log: log, alive: make(map[string]Meta)}
	meta, err := json.Marshal(cfg.Meta)
	if err != nil {
		return nil, err
	}
	if len(meta) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("member metadata of %d bytes is over memberlist's %d", len(meta), memberlist.MetaMaxSize)
	}
	m.delegate = &delegate{meta: meta}
	mc.Delegate = m.delegate
	mc.Events = &eventDelegate{m: m}
	if m.list, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("cluster membership: %w", err)
	}
	return m, nil
}

// Events delivers changes of other members. The channel is deep; a reader that falls 1024
// events behind holds memberlist's delivery up until it catches up.
func (m *Member) Events() <-chan Event { return m.events }

// Addr is the host:port other members reach this one at.
func (m *Member) Addr() string {
	n := m.list.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Alive returns the metadata of the alive members with a role, by name.
func (m *Member) Alive(role string) map[string]Meta {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Meta)
	for name, meta := range m.alive {
		if meta.Role == role {
			out[name] = meta
		}
	}
	return out
}

// Run joins the seeds, and joins them again whenever this member is cut off: a node that sees no
// coordinator alive (it restarted and lost its view of the cluster), a coordinator alone. It
// returns when ctx ends.
func (m *Member) Run(ctx context.Context) {
	backoff := 250 * time.Millisecond
	lastErr := ""
	for {
		cutOff := len(m.Alive(RoleCoordinator)) == 0
		if m.cfg.Meta.Role == RoleCoordinator {
			cutOff = m.list.NumMembers() <= 1
		}
		if len(m.cfg.Seeds) > 0 && cutOff {
			if _, err := m.list.Join(m.cfg.Seeds); err != nil {
				// Said once per distinct error: a wrong key or an unreachable seed is worth a
				// warning, its repetition every second is not.
				if err.Error() != lastErr {
					m.log.Warn("cannot join the cluster (the seeds are down or unreachable, or hold another cluster key); trying again",
						"seeds", m.cfg.Seeds, "err", err)
					lastErr = err.Error()
				}
				backoff = min(backoff*2, 2*time.Second)
			} else {
				lastErr = ""
				backoff = time.Second
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// Reach joins the members at addrs, each on its own, and returns once each join ended or
// timeout passed: a new coordinator reaches the render nodes it knows of, rather than wait for
// them to notice the old one is gone and look for it. It returns how many answered.
func (m *Member) Reach(addrs []string, timeout time.Duration) int {
	answered := make(chan bool, len(addrs))
	for _, addr := range addrs {
		go func() {
			n, err := m.list.Join([]string{addr})
			answered <- err == nil && n > 0
		}()
	}
	reached := 0
	deadline := time.After(timeout)
	for range addrs {
		select {
		case ok := <-answered:
			if ok {
				reached++
			}
		case <-deadline:
			return reached
		}
	}
	return reached
}

// Leave tells the others this member leaves, then stops it.
func (m *Member) Leave(timeout time.Duration) {
	meta := m.cfg.Meta
	meta.Leaving = true
	if raw, err := json.Marshal(meta); err == nil {
		m.delegate.setMeta(raw)
		if err := m.list.UpdateNode(timeout); err != nil {
			m.log.Warn("announcing the departure", "err", err)
		}
	}
	if err := m.list.Leave(timeout); err != nil {
		m.log.Warn("leaving the cluster", "err", err)
	}
	m.list.Shutdown()
}

type delegate struct {
	mu   sync.Mutex
	meta []byte
}

func (d *delegate) setMeta(meta []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.meta = meta
}

func (d *delegate) NodeMeta(int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.meta
}

func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(bool) []byte                     { return nil }
func (d *delegate) MergeRemoteState([]byte, bool)              {}

type eventDelegate struct{ m *Member }

func (e *eventDelegate) NotifyJoin(n *memberlist.Node)   { e.emit(n, true) }
func (e *eventDelegate) NotifyLeave(n *memberlist.Node)  { e.emit(n, false) }
func (e *eventDelegate) NotifyUpdate(n *memberlist.Node) { e.emit(n, true) }

func (e *eventDelegate) emit(n *memberlist.Node, alive bool) {
	if n.Name == e.m.cfg.Name {
		return
	}
	var meta Meta
	if err := json.Unmarshal(n.Meta, &meta); err != nil {
		e.m.log.Warn("a member sent unreadable metadata", "member", n.Name, "err", err)
		return
	}
	e.m.mu.Lock()
	if alive && !meta.Leaving {
		e.m.alive[n.Name] = meta
	} else {
		delete(e.m.alive, n.Name)
	}
	e.m.mu.Unlock()
	e.m.events <- Event{Name: n.Name, Meta: meta, Addr: n.Address(), Alive: alive && !meta.Leaving, Left: meta.Leaving}
}

func splitHostPort(addr string) (string, int, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, errors.New("invalid port " + portText)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	return host, port, nil
}

// logAdapter turns memberlist's "[LEVEL] memberlist: ..." lines into slog records; log.Logger
// writes each line in one Write.
type logAdapter struct{ to *slog.Logger }

func (a logAdapter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	switch {
	case strings.Contains(line, "[ERR]"):
		a.to.Error(line)
	case strings.Contains(line, "[WARN]"):
		a.to.Warn(line)
	default:
		a.to.Debug(line)
	}
	return len(p), nil
}
