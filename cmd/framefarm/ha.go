package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/replicas"
	"github.com/framefarm/framefarm/http/api"
	"github.com/framefarm/framefarm/http/metrics"
	"github.com/framefarm/framefarm/persistence"
)

// HAConfig is the [ha] table: this coordinator is one of several replicas on raft, which hold
// the same records; one of them, the leader, carries out writes and runs the farm's actors, and
// another takes over when it is lost.
type HAConfig struct {
	// ID names this replica among the others (unique, never reused for another machine).
	ID string `toml:"id"`
	// Bind is the replicas' port (raft, and requests handed to the leader); Advertise what the
	// others dial, Bind when empty.
	Bind      string `toml:"bind"`
	Advertise string `toml:"advertise"`
	// Peers are the replicas of a new set, "id=host:port" each, this one among them; the first
	// starts the set (from its records, when it has any).
	Peers []string `toml:"peers"`
	// HeartbeatTimeout is how long followers wait to hear from the leader before one of them
	// stands for election; LeaderLease how long a leader leads without a quorum's contact.
	HeartbeatTimeout Duration `toml:"heartbeat_timeout"`
	LeaderLease      Duration `toml:"leader_lease"`
	// SnapshotThreshold is how many log entries since the last snapshot make a replica write
	// the next (the store's whole file); TrailingLogs how many stay after it, for followers a
	// little behind (one further behind receives the snapshot).
	SnapshotThreshold uint64 `toml:"snapshot_threshold"`
	TrailingLogs      uint64 `toml:"trailing_logs"`
	// SnapshotInterval is how often a replica looks whether a snapshot is due.
	SnapshotInterval Duration `toml:"snapshot_interval"`
	// RemoveDeadAfter: a replica the leader's heartbeats have not reached for this long is
	// removed from the set (when those left still make a quorum); 0: never.
	RemoveDeadAfter Duration `toml:"remove_dead_after"`
}

func (h *HAConfig) check(c *Config) []error {
	var errs []error
	if h.ID == "" {
		errs = append(errs, errors.New("ha.id is empty: name this replica (c1, c2, ...)"))
	}
	if _, _, err := net.SplitHostPort(h.Bind); err != nil {
		errs = append(errs, fmt.Errorf("ha.bind %q is not HOST:PORT", h.Bind))
	}
	self := false
	for _, p := range h.Peers {
		peer, err := replicas.ParsePeer(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("ha.peers: %w", err))
		}
		self = self || peer.ID == h.ID
	}
	if !self {
		errs = append(errs, fmt.Errorf("ha.peers must name this replica (%s) among the others", h.ID))
	}
	if h.SnapshotThreshold < 1 || h.TrailingLogs < 1 || h.SnapshotInterval.Duration < 10*time.Millisecond {
		errs = append(errs, errors.New("ha.snapshot_threshold and ha.trailing_logs must be at least 1, ha.snapshot_interval at least 10ms"))
	}
	if h.LeaderLease.Duration > h.HeartbeatTimeout.Duration {
		errs = append(errs, errors.New("ha.leader_lease cannot be longer than ha.heartbeat_timeout"))
	}
	// Every replica serves the same files and reads the same secrets.
	if c.Objects.Backend != "s3" {
		errs = append(errs, errors.New("replicas ([ha]) share their files in a bucket: set objects.backend = \"s3\""))
	}
	if c.Objects.SigningKey == "" {
		errs = append(errs, errors.New("replicas ([ha]) sign URLs alike: set objects.signing_key, the same on every replica"))
	}
	if c.Secrets.Key == "" {
		errs = append(errs, errors.New("replicas ([ha]) read the same secrets: set secrets.key, the same on every replica"))
	}
	if c.Cluster == nil {
		errs = append(errs, errors.New("replicas ([ha]) render on remote nodes and authenticate each other with the cluster's certificates: add a [cluster] table"))
	}
	if c.Node.LocalSlots > 0 {
		errs = append(errs, errors.New("replicas ([ha]) render on remote nodes only: set node.local_slots = 0 (serve --local-slots 0)"))
	}
	if c.Server.PublicURL == "" {
		errs = append(errs, errors.New("replicas ([ha]) hand out URLs that must outlive any one of them: set server.public_url to the farm's address (a load balancer in front of every replica), the same on every replica"))
	}
	return errs
}

// checkPublicURL refuses a replica whose public URL names its own API port, which dies with it:
// the URL must name the farm, in front of every replica. listen is where the API listens.
func checkPublicURL(publicURL, listen string) error {
	u, err := url.Parse(publicURL)
	if err != nil {
		return fmt.Errorf("server.public_url %q: %w", publicURL, err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	listenHost, listenPort, err := net.SplitHostPort(listen)
	if err != nil || port != listenPort {
		return nil
	}
	ips, _ := net.LookupIP(u.Hostname())
	for _, ip := range ips {
		if ip.String() == listenHost || ip.IsLoopback() || isLocalAddress(ip) {
			return fmt.Errorf("server.public_url %s names this replica's own API (%s), which dies with it: give the farm's address, a load balancer in front of every replica", publicURL, listen)
		}
	}
	return nil
}

// isLocalAddress reports whether ip is an address of this machine.
func isLocalAddress(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

func defaultHAConfig() HAConfig {
	return HAConfig{Peers: []string{}, HeartbeatTimeout: dur(800 * time.Millisecond), LeaderLease: dur(500 * time.Millisecond), SnapshotThreshold: 16384, TrailingLogs: 8192,
		SnapshotInterval: dur(2 * time.Minute), RemoveDeadAfter: dur(10 * time.Minute)}
}

// nodesFindTheLeader is how long render nodes take, at most, to find the next leader after a
// failover: membership declares the old one dead (about two seconds), then they join the
// replicas' gossip addresses again (every second or two).
const nodesFindTheLeader = 10 * time.Second

// startReplica joins this coordinator's store to its replicas.
func (f *farm) startReplica() (*replicas.Replica, error) {
	h, c := f.cfg.HA, f.cfg.Cluster
	server, client, _, err := c.TLS.Configs(certs.RoleCoordinator, certs.RoleCoordinator)
	if err != nil {
		return nil, fmt.Errorf("ha: %w", err)
	}
	var peers []replicas.Peer
	for _, p := range h.Peers {
		peer, _ := replicas.ParsePeer(p) // checked with the configuration
		peers = append(peers, peer)
	}
	return replicas.Start(replicas.Config{
		ID: h.ID, Bind: h.Bind, Advertise: h.Advertise, Peers: peers, Dir: filepath.Join(f.cfg.Server.DataDir, "replicas"),
		ServerTLS: server, ClientTLS: client, Store: f.store, Logger: f.log, Observe: f.metrics,
		HeartbeatTimeout: h.HeartbeatTimeout.Duration, LeaderLease: h.LeaderLease.Duration,
		SnapshotThreshold: h.SnapshotThreshold, TrailingLogs: h.TrailingLogs, SnapshotInterval: h.SnapshotInterval.Duration,
		RemoveDeadAfter: h.RemoveDeadAfter.Duration,
		Shared:          map[string]string{"server.public_url": f.cfg.publicURL()},
		Fail: func(err error) {
			f.log.Error("this replica stops: it cannot follow the others", "err", err)
			f.failed <- err
			select {} // nothing more is applied; the process shuts down
		},
	})
}

// onDuty is the coordinator of the current term while this replica leads, and nothing while it
// follows: what the API, the metrics and the history ask of the actors goes through it.
type onDuty struct {
	current atomic.Pointer[actors.Coordinator]
}

var errNotOnDuty = fmt.Errorf("%w: this replica does not lead", persistence.ErrNotReplicated)

// onDutyAsk runs one request of the coordinator on duty, or fails as a write to a replica that does not
// lead fails (the API then answers 503: send it again).
func onDutyAsk[T any](d *onDuty, do func(*actors.Coordinator) (T, error)) (T, error) {
	c := d.current.Load()
	if c == nil {
		var zero T
		return zero, errNotOnDuty
	}
	return do(c)
}

// tell is onDutyAsk for requests that answer only an error.
func tell(d *onDuty, do func(*actors.Coordinator) error) error {
	_, err := onDutyAsk(d, func(c *actors.Coordinator) (struct{}, error) { return struct{}{}, do(c) })
	return err
}

// look is onDutyAsk for reads that cannot fail: nothing while no coordinator is on duty.
func look[T any](d *onDuty, do func(*actors.Coordinator) T) T {
	v, _ := onDutyAsk(d, func(c *actors.Coordinator) (T, error) { return do(c), nil })
	return v
}

var (
	_ api.Coordinator     = (*onDuty)(nil)
	_ api.FarmSource      = (*onDuty)(nil)
	_ metrics.QueueSource = (*onDuty)(nil)
)

func (d *onDuty) CreateJobs(jobs []*persistence.Job, remember *persistence.Answer) error {
	return tell(d, func(c *actors.Coordinator) error { return c.CreateJobs(jobs, remember) })
}
func (d *onDuty) CreateBatch(b *persistence.Batch, jobs []*persistence.Job, remember *persistence.Answer) error {
	return tell(d, func(c *actors.Coordinator) error { return c.CreateBatch(b, jobs, remember) })
}
func (d *onDuty) StopJob(jobID ulid.ULID, by string) (*persistence.Job, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Job, error) { return c.StopJob(jobID, by) })
}
func (d *onDuty) RetagJob(jobID ulid.ULID, priority *int, tags *[]string, by string) (*persistence.Job, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Job, error) { return c.RetagJob(jobID, priority, tags, by) })
}
func (d *onDuty) CancelJobs(ids []ulid.ULID) (*actors.CancelOutcome, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*actors.CancelOutcome, error) { return c.CancelJobs(ids) })
}
func (d *onDuty) CancelBatch(id ulid.ULID) (*actors.BatchCancelOutcome, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*actors.BatchCancelOutcome, error) { return c.CancelBatch(id) })
}
func (d *onDuty) CreateTemplate(tpl *persistence.Template) error {
	return tell(d, func(c *actors.Coordinator) error { return c.CreateTemplate(tpl) })
}
func (d *onDuty) RenameTemplate(teamID, id ulid.ULID, name string) (*persistence.Template, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Template, error) { return c.RenameTemplate(teamID, id, name) })
}
func (d *onDuty) DeleteTemplate(teamID, id ulid.ULID) error {
	return tell(d, func(c *actors.Coordinator) error { return c.DeleteTemplate(teamID, id) })
}
func (d *onDuty) UploadAwaited(tpl *persistence.Template, window int) error {
	return tell(d, func(c *actors.Coordinator) error { return c.UploadAwaited(tpl, window) })
}
func (d *onDuty) TemplateFileArrived(teamID, id ulid.ULID, window int, file persistence.StoredFile) (*persistence.Template, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Template, error) {
		return c.TemplateFileArrived(teamID, id, window, file)
	})
}
func (d *onDuty) AddFont(f *persistence.Font, data []byte) (*persistence.Font, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Font, error) { return c.AddFont(f, data) })
}
func (d *onDuty) DeleteFont(teamID, fontID ulid.ULID) (*persistence.Font, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Font, error) { return c.DeleteFont(teamID, fontID) })
}
func (d *onDuty) AddSecret(teamID ulid.ULID, name, value string) (*persistence.Secret, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Secret, error) { return c.AddSecret(teamID, name, value) })
}
func (d *onDuty) DeleteSecret(teamID, secretID ulid.ULID) (*persistence.Secret, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Secret, error) { return c.DeleteSecret(teamID, secretID) })
}
func (d *onDuty) IssueToken(teamName string, expires time.Time, role persistence.TokenRole) (actors.IssuedToken, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (actors.IssuedToken, error) { return c.IssueToken(teamName, expires, role) })
}
func (d *onDuty) RevokeToken(tokenID string, team ulid.ULID) (*persistence.Token, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Token, error) { return c.RevokeToken(tokenID, team) })
}
func (d *onDuty) OpenTemplateReplacement(teamID, id ulid.ULID) (*persistence.Template, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Template, error) {
		return c.OpenTemplateReplacement(teamID, id)
	})
}
func (d *onDuty) DrainNode(nodeID string) (actors.NodeInfo, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (actors.NodeInfo, error) { return c.DrainNode(nodeID) })
}
func (d *onDuty) ClearNode(nodeID string) (actors.NodeInfo, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (actors.NodeInfo, error) { return c.ClearNode(nodeID) })
}
func (d *onDuty) ForgetNode(nodeID string) error {
	return tell(d, func(c *actors.Coordinator) error { return c.ForgetNode(nodeID) })
}
func (d *onDuty) SetTeamPolicy(teamID ulid.ULID, change persistence.PolicyChange) (persistence.Team, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (persistence.Team, error) { return c.SetTeamPolicy(teamID, change) })
}
func (d *onDuty) TeamLoads() map[ulid.ULID]actors.TeamLoad {
	return look(d, func(c *actors.Coordinator) map[ulid.ULID]actors.TeamLoad { return c.TeamLoads() })
}
func (d *onDuty) SendAgain(jobID ulid.ULID, by string) (*persistence.Job, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Job, error) { return c.SendAgain(jobID, by) })
}
func (d *onDuty) SetLimit(name string, count int) error {
	return tell(d, func(c *actors.Coordinator) error { return c.SetLimit(name, count) })
}
func (d *onDuty) DeleteLimit(name string) (*persistence.Limit, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (*persistence.Limit, error) { return c.DeleteLimit(name) })
}
func (d *onDuty) PoolCapacities() map[string]actors.Capacity {
	return look(d, func(c *actors.Coordinator) map[string]actors.Capacity { return c.PoolCapacities() })
}
func (d *onDuty) LimitUses() map[string]actors.LimitUse {
	return look(d, func(c *actors.Coordinator) map[string]actors.LimitUse { return c.LimitUses() })
}
func (d *onDuty) QueueStats() (actors.QueueStats, error) {
	return onDutyAsk(d, func(c *actors.Coordinator) (actors.QueueStats, error) { return c.QueueStats() })
}
func (d *onDuty) Capacities() map[string]actors.Capacity {
	return look(d, func(c *actors.Coordinator) map[string]actors.Capacity { return c.Capacities() })
}
func (d *onDuty) Nodes() []actors.NodeInfo {
	return look(d, func(c *actors.Coordinator) []actors.NodeInfo { return c.Nodes() })
}
func (d *onDuty) LiveJobActors() int {
	return look(d, func(c *actors.Coordinator) int { return c.LiveJobActors() })
}

// leaderDuties runs the leader's duties (duties, then the cluster) while this replica leads
// (replicas.WhileLeading: after a barrier, with a new coordinator that restores the queue from
// the records; stopped at once when the leadership is lost; handed on when they cannot start).
func (f *farm) leaderDuties() service {
	return background("leader duties", func(ctx context.Context) {
		replicas.WhileLeading(ctx, f.replica, f.takeLead, replicas.LeadOptions{Clock: f.clock, Log: f.log})
	})
}

// takeLead starts the duties of a new term; stop takes them down.
func (f *farm) takeLead(term uint64) (stop func(), err error) {
	if err := checkKeys(f.store, f.urlKey, f.secretKey, true); err != nil {
		select {
		case f.failed <- err: // keys that do not open the records stop the process
		default: // it is stopping already, for this or another reason
		}
		return nil, err
	}
	coord := f.newCoordinator()
	list := f.duties(coord)
	if f.cfg.Cluster != nil {
		list = append(list, f.clusterService(coord))
	}
	for i, s := range list {
		if s.start == nil {
			continue
		}
		if err := s.start(); err != nil {
			stopServices(f.log, list[:i], f.cfg.Server.ShutdownTimeout.Duration)
			return nil, fmt.Errorf("the duty %s: %w", s.name, err)
		}
	}
	f.duty.current.Store(coord)
	f.log.Info("leading the replicas", "term", term)
	f.happen.DutiesChanged.Publish(actors.DutiesChanged{Leading: true, Term: term})
	return func() {
		f.duty.current.Store(nil)
		stopServices(f.log, list, f.cfg.Server.ShutdownTimeout.Duration)
		f.happen.DutiesChanged.Publish(actors.DutiesChanged{Leading: false, Term: term})
	}, nil
}

// replicaAPI is what the API asks of this replica.
type replicaAPI struct {
	replica *replicas.Replica
	forward *replicas.Forwarder
}

var _ api.Replicas = (*replicaAPI)(nil)

func (r *replicaAPI) Leading() bool                          { return r.replica.Leading() }
func (r *replicaAPI) CatchUp(deadline time.Time) error       { return r.replica.CatchUp(deadline) }
func (r *replicaAPI) Forward(ctx *fasthttp.RequestCtx) error { return r.forward.Forward(ctx) }
func (r *replicaAPI) Status() replicas.Status                { return r.replica.Status() }
func (r *replicaAPI) AddReplica(id, addr string) error       { return r.replica.AddReplica(id, addr) }
func (r *replicaAPI) RemoveReplica(id string) error          { return r.replica.RemoveReplica(id) }

// closer makes a function that stops something an io.Closer.
type closer func()

func (c closer) Close() error { c(); return nil }

// haCommand runs `framefarm ha status|join|remove`: the replicas as the one asked sees them, or a
// change of the set carried out by the leader.
func haCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "status" && args[0] != "join" && args[0] != "remove") {
		return errors.New("ha needs a command: status, join --id ID --address HOST:PORT, or remove ID")
	}
	fs := commandFlags("ha " + args[0])
	admin := addAdminFlags(fs)
	id := fs.String("id", "", "join: the new replica's id ([ha] id in its configuration)")
	address := fs.String("address", "", "join: the new replica's host:port ([ha] advertise, or bind)")
	rest := args[1:]
	removed := ""
	if args[0] == "remove" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		removed, rest = rest[0], rest[1:]
	}
	if err := parseFlags(fs, stdout, rest); err != nil {
		return err
	}
	method, path, body := http.MethodGet, "/api/v2/admin/cluster", []byte(nil)
	switch args[0] {
	case "join":
		if *id == "" || *address == "" {
			return errors.New("usage: framefarm ha join --id ID --address HOST:PORT [--url URL] [--admin-token TOKEN]")
		}
		method, path = http.MethodPost, "/api/v2/admin/cluster/replicas"
		body, _ = json.Marshal(map[string]string{"id": *id, "address": *address})
	case "remove":
		if removed == "" || fs.NArg() != 0 {
			return errors.New("usage: framefarm ha remove ID [--url URL] [--admin-token TOKEN]")
		}
		method, path = http.MethodDelete, "/api/v2/admin/cluster/replicas/"+url.PathEscape(removed)
	}
	base, token, err := admin.resolve()
	if err != nil {
		return err
	}
	_, answer, err := adminRequest(method, base, path, token, body)
	if err != nil {
		return err
	}
	var s replicas.Status
	if err := json.Unmarshal(answer, &s); err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	fmt.Fprintf(stdout, "asked %s (%s), term %d, leader %s\n", s.ID, s.State, s.Term, s.LeaderID)
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "REPLICA\tADDRESS\tVOTER\tSTATE\tAPPLIED\tLAST CONTACT")
	for _, r := range s.Replicas {
		state, applied, contact := "unreachable", "-", "-"
		if r.State != nil {
			state, applied = *r.State, strconv.FormatUint(*r.Applied, 10)
		}
		if r.Contact != nil {
			contact = r.Contact.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\t%s\n", r.ID, r.Address, r.Voter, state, applied, contact)
	}
	return w.Flush()
}
