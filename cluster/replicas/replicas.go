// Package replicas runs a coordinator as one of several replicas on hashicorp/raft. The raft log
// carries the store's writes: each group commit is one entry, which every replica, the leader
// included, applies through the store's one apply function (persistence.Store.ApplyEntries).
// Snapshots are the store's bbolt file. The replicas reach each other on one port, with mutual
// TLS, that carries raft, API requests followers hand to the leader, and the read index
// followers ask the leader for, so that a client reads its writes on any replica.
//
// A store of records may seed a new set of replicas only on the first replica named in the
// peers: it bootstraps alone, puts its records in a snapshot, then adds the others, which start
// empty and receive that snapshot.
package replicas

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// Peer is one replica: its id and the address the others reach it at.
type Peer struct {
	ID, Addr string
}

// ParsePeer reads "id=host:port".
func ParsePeer(s string) (Peer, error) {
	id, addr, ok := strings.Cut(s, "=")
	if !ok || id == "" || addr == "" {
		return Peer{}, fmt.Errorf("peer %q is not id=host:port", s)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return Peer{}, fmt.Errorf("peer %q: %w", s, err)
	}
	return Peer{ID: id, Addr: addr}, nil
}

// Store is what a replica replicates: the coordinator's store.
type Store interface {
	ApplyEntries([]persistence.ReplicatedEntry) ([]*persistence.EntryResult, error)
	BeginSnapshot() (*persistence.Snapshot, error)
	Restore(io.Reader) error
	AppliedIndex() uint64
	WaitApplied(index uint64, timeout time.Duration) bool
	// Revocations counts the writes applied that took access away (a token's revocation).
	Revocations() uint64
	// Empty reports whether the store holds no records.
	Empty() bool
}

var _ Store = (*persistence.Store)(nil)

// Config describes one replica.
type Config struct {
	ID string
	// Bind is where the replicas' port listens; Advertise what the others dial (Bind when empty).
	Bind, Advertise string
	// Peers are the voters of a new set of replicas (this one among them); the first seeds it.
	Peers []Peer
	// Dir holds raft's log and snapshots.
	Dir string
	// ServerTLS and ClientTLS authenticate the replicas to each other (mutual TLS): required,
	// since the port carries every record and the leader's answers to other replicas.
	ServerTLS, ClientTLS *tls.Config
	Store                Store
	Logger               *slog.Logger
	// Fail is called when this replica cannot apply what the others committed (an entry of a
	// newer version, a disk refusing the write); it must not return: the replica stops rather
	// than diverge.
	Fail func(error)
	// Timings: how long a follower waits for the leader before it stands [800ms], how long a
	// leader keeps leading without a quorum's contact [500ms].
	HeartbeatTimeout, LeaderLease time.Duration
	// ApplyTimeout bounds a write's wait for its entry to enter the log [10s].
	ApplyTimeout time.Duration
	// Observe, when set, is told what the replica does (metrics).
	Observe Observer
	// Shared are settings every replica must hold alike (the farm's public URL): a replica
	// refuses to start when a running one holds others (ErrSettingsDiffer).
	Shared map[string]string
	// RemoveDeadAfter, when set, has the leader remove a replica no heartbeat reached for that
	// long, provided those left still make a quorum among themselves.
	RemoveDeadAfter time.Duration
	// ApplyHold is how long a follower may hold committed entries to apply them together
	// [20ms]; Clock times it [the system's].
	ApplyHold time.Duration
	Clock     clock.Clock
	// SnapshotThreshold is how many entries after the last snapshot make the next [16384];
	// TrailingLogs how many stay in the log after one [8192]; SnapshotInterval how often a
	// snapshot's being due is looked at [2m].
	SnapshotThreshold, TrailingLogs uint64
	SnapshotInterval                time.Duration
}

// Observer hears what a replica does.
type Observer interface {
	// ObserveReplicated: on the leader, an entry committed and applied d after it was proposed.
	ObserveReplicated(d time.Duration)
	// ObserveApply: entries applied to the store in d.
	ObserveApply(d time.Duration, entries int)
	// ObserveSnapshot: a snapshot of bytes written in d.
	ObserveSnapshot(bytes int64, d time.Duration)
	// LeaderChanged: the leader this replica knew gave way to another, or to none.
	LeaderChanged()
}

// Raft is the replica's raft state, term and the index its store applied (metrics).
func (r *Replica) Raft() (state string, term, applied uint64) {
	return strings.ToLower(r.raft.State().String()), r.raft.CurrentTerm(), r.cfg.Store.AppliedIndex()
}

// Replica is this process's place among the replicas.
type Replica struct {
	cfg   Config
	raft  *raft.Raft
	mux   *mux
	logs  *raftLog
	reads *readIndexer
	asks  *asker
	// granter grants followers leases for stale reads while this replica leads; leases holds
	// this replica's own while it follows.
	granter *leaseGranter
	leases  *leaseHolder
	// deaths hurries the election when the leader's process died; transport is raft's.
	deaths    *deathWatch
	transport *raft.NetworkTransport
	log       *slog.Logger
	fsm       *fsm
	// proposals are the entries this replica proposed, by their first byte, until applied here.
	proposals sync.Map // *byte -> *proposal
	// caughtUpTerm is the last term in which this replica, leading, applied every entry
	// committed before the term (its barrier): only then does it answer reads as the leader.
	caughtUpTerm atomic.Uint64
	termBarrier  sync.Mutex

	leadership chan bool
	// running is set once raft runs: the port answers questions before.
	running atomic.Bool
	// leaderWatchers are told of each change of the leader (OnLeaderChange).
	watchersMu     sync.Mutex
	leaderWatchers []func()
	// detour is the replica requests go by while this one is out of touch (detour.go).
	detour detourChoice
}

// ErrNoTLS refuses a replica without TLS: its port never runs in the clear.
var ErrNoTLS = errors.New("the replicas' port needs TLS: give ServerTLS and ClientTLS")

// ErrUnavailable is returned for what this replica cannot do now for want of a leader: a write
// (it is not the leader, or lost the leadership before the write was committed, which may
// still be: send it again with its Idempotency-Key), a read that cannot catch up.
var ErrUnavailable = persistence.ErrNotReplicated

// logCacheEntries is how many of the last entries are kept in memory: enough for those in
// flight to the followers, few enough that entries of whole batches do not pile up.
const logCacheEntries = 32

// Start opens raft's log in cfg.Dir, listens on cfg.Bind and joins the replicas. At the first
// start of a new set, the first peer seeds it (see the package's documentation).
func Start(cfg Config) (*Replica, error) {
	setDefault(&cfg.HeartbeatTimeout, 800*time.Millisecond)
	setDefault(&cfg.LeaderLease, 500*time.Millisecond)
	setDefault(&cfg.ApplyTimeout, 10*time.Second)
	setDefault(&cfg.SnapshotInterval, 2*time.Minute)
	setDefault(&cfg.ApplyHold, 20*time.Millisecond)
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 16384
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = 8192
	}
	if cfg.ServerTLS == nil || cfg.ClientTLS == nil {
		return nil, ErrNoTLS
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	r := &Replica{cfg: cfg, log: cfg.Logger.With("component", "replicas"), leadership: make(chan bool, 16)}
	hlog := newRaftLogger(r.log)
	logs, err := openLog(cfg.Dir, hlog)
	if err != nil {
		return nil, fmt.Errorf("the replicas' log: %w", err)
	}
	r.logs = logs
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		logs.Close()
		return nil, fmt.Errorf("the replicas' snapshots: %w", err)
	}
	if r.mux, err = newMux(cfg.Bind, cfg.Advertise, cfg.ServerTLS, cfg.ClientTLS, r.log); err != nil {
		logs.Close()
		return nil, err
	}
	r.reads = &readIndexer{r: r, epoch: time.Now()}
	r.asks = &asker{timeout: readIndexTimeout,
		leader: func() string { _, addr := r.Leader(); return addr },
		dial: func(ctx context.Context, addr string) (net.Conn, error) {
			return r.mux.dial(ctx, addr, kindReadIndex, readIndexTimeout)
		}}
	r.granter, r.leases, r.deaths = newLeaseGranter(r), newLeaseHolder(r), newDeathWatch(r)
	r.OnLeaderChange(r.asks.leaderChanged)
	r.OnLeaderChange(r.leases.renewSoon)
	r.mux.readIndex, r.mux.lease, r.mux.status = r.reads.serve, r.granter.serve, r.tellStatus
	go r.mux.run()
	if err := r.agreeWithPeers(); err != nil {
		r.mux.close()
		logs.Close()
		return nil, err
	}
	transport := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: raftLayer{r.mux, r.deaths}, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog,
	})
	r.transport = transport
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(cfg.ID)
	conf.Logger = hlog
	conf.HeartbeatTimeout, conf.ElectionTimeout = cfg.HeartbeatTimeout, cfg.HeartbeatTimeout
	conf.LeaderLeaseTimeout = cfg.LeaderLease
	conf.SnapshotThreshold, conf.TrailingLogs, conf.SnapshotInterval = cfg.SnapshotThreshold, cfg.TrailingLogs, cfg.SnapshotInterval
	// At a start raft offers the last snapshot again; the store takes it only when it has not
	// applied as much (a restart right after receiving it), and skips the entries it applied.
	conf.NotifyCh = r.leadership
	// The committer hands over its next group while the leader writes the last to its log, and
	// the groups waiting then go to the log and the followers together.
	conf.BatchApplyCh = true
	existing, err := raft.HasExistingState(logs, logs, snaps)
	if err != nil {
		r.mux.close()
		logs.Close()
		return nil, err
	}
	// The first peer seeds a new set, unless the set exists: a replica wiped and started again
	// finds a leader among the others and waits for it instead.
	seed := !existing && len(cfg.Peers) > 0 && cfg.Peers[0].ID == cfg.ID && !r.anotherLeads()
	if !existing && !seed && !cfg.Store.Empty() {
		r.mux.close()
		logs.Close()
		return nil, fmt.Errorf("this replica's store holds records, but only the first of the peers (%s) may start a new set of replicas from its records: move them there, or start this replica from an empty data folder", cfg.Peers[0].ID)
	}
	// The entries the leader sends are those it has just appended: kept decoded, the followers'
	// appends do not wait for the log to be read back.
	recent, err := raft.NewLogCache(logCacheEntries, logs)
	if err != nil {
		r.mux.close()
		logs.Close()
		return nil, err
	}
	r.fsm = &fsm{r: r, hold: cfg.ApplyHold, clock: cfg.Clock}
	if r.raft, err = raft.NewRaft(conf, r.fsm, recent, logs, snaps, transport); err != nil {
		r.mux.close()
		logs.Close()
		return nil, err
	}
	r.running.Store(true)
	r.watchLeader()
	go r.leases.run()
	go r.deaths.run()
	if cfg.RemoveDeadAfter > 0 {
		r.watchDead()
	}
	if seed {
		if err := r.seed(); err != nil {
			r.Shutdown()
			return nil, err
		}
	}
	return r, nil
}

// ErrSettingsDiffer refuses a replica whose shared settings (Config.Shared) are not those of
// another replica running.
var ErrSettingsDiffer = errors.New("this replica's settings differ from another replica's")

// agreeWithPeers asks the peers that answer about themselves, at once, for their shared
// settings: each must hold this replica's.
func (r *Replica) agreeWithPeers() error {
	var mu sync.Mutex
	var differ []string
	var asked sync.WaitGroup
	for _, p := range r.cfg.Peers {
		if p.ID == r.cfg.ID {
			continue
		}
		asked.Go(func() {
			told, ok := r.askAbout(p.Addr, time.Now().Add(2*time.Second))
			if !ok {
				return // not running: it checks when it starts
			}
			for name, mine := range r.cfg.Shared {
				if theirs := told.Shared[name]; theirs != mine {
					mu.Lock()
					differ = append(differ, fmt.Sprintf("%s is %q here, %q on replica %s", name, mine, theirs, p.ID))
					mu.Unlock()
				}
			}
		})
	}
	asked.Wait()
	if len(differ) > 0 {
		slices.Sort(differ)
		return fmt.Errorf("%w: %s; set it alike on every replica", ErrSettingsDiffer, strings.Join(differ, "; "))
	}
	return nil
}

// askAbout asks the replica at addr what it says of itself, until deadline.
func (r *Replica) askAbout(addr string, deadline time.Time) (self, bool) {
	var told self
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	conn, err := r.mux.dial(ctx, addr, kindStatus, time.Until(deadline))
	if err != nil {
		return told, false
	}
	defer conn.Close()
	conn.SetDeadline(deadline)
	return told, json.NewDecoder(conn).Decode(&told) == nil
}

// anotherLeads asks the other peers whether one of them leads a set already.
func (r *Replica) anotherLeads() bool {
	for _, p := range r.cfg.Peers {
		if p.ID == r.cfg.ID {
			continue
		}
		conn, err := r.mux.dial(context.Background(), p.Addr, kindReadIndex, 2*time.Second)
		if err != nil {
			continue
		}
		var reply [9]byte
		conn.SetDeadline(time.Now().Add(readIndexTimeout))
		_, err = conn.Write([]byte{1})
		if err == nil {
			_, err = readFull(conn, reply[:])
		}
		conn.Close()
		if err == nil && reply[0] == 1 {
			return true
		}
	}
	return false
}

// watchLeader tells the observer, the lease granter and the watchers (OnLeaderChange) of each
// change of the leader this replica knows.
func (r *Replica) watchLeader() {
	changes := make(chan raft.Observation, 16)
	r.raft.RegisterObserver(raft.NewObserver(changes, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	go func() {
		var known raft.ServerID
		for {
			select {
			case o := <-changes:
				if leader := o.Data.(raft.LeaderObservation).LeaderID; leader != known {
					if known != "" && r.cfg.Observe != nil {
						r.cfg.Observe.LeaderChanged()
					}
					known = leader
					r.granter.leading(string(leader) == r.cfg.ID)
					r.deaths.leaderKnown(string(o.Data.(raft.LeaderObservation).LeaderAddr))
					r.watchersMu.Lock()
					watchers := r.leaderWatchers
					r.watchersMu.Unlock()
					for _, changed := range watchers {
						changed()
					}
				}
			case <-r.mux.closed:
				return
			}
		}
	}()
}

// watchDead has the leader remove a replica its heartbeats have not reached for RemoveDeadAfter.
// A failure seen in an earlier term is forgotten when the leader changes: the heartbeats of a new
// term start afresh, and a replica that answers them from the first never says it resumed.
func (r *Replica) watchDead() {
	failures := make(chan raft.Observation, 64)
	r.raft.RegisterObserver(raft.NewObserver(failures, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.LeaderObservation:
			return true
		}
		return false
	}))
	go func() {
		silent := map[raft.ServerID]time.Time{} // failing replicas, by their last contact
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-r.mux.closed:
				return
			case o := <-failures:
				switch f := o.Data.(type) {
				case raft.FailedHeartbeatObservation:
					silent[f.PeerID] = f.LastContact
				case raft.ResumedHeartbeatObservation:
					delete(silent, f.PeerID)
				case raft.LeaderObservation:
					clear(silent)
				}
			case <-tick.C:
				if !r.Leading() {
					clear(silent)
					continue
				}
				for id, since := range silent {
					if time.Since(since) >= r.cfg.RemoveDeadAfter && r.quorumWithout(id, len(silent)) {
						err := r.raft.RemoveServer(id, 0, r.cfg.ApplyTimeout).Error()
						r.log.Warn("removed a replica no heartbeat has reached since", "replica", string(id), "since", since, "err", err)
						delete(silent, id)
					}
				}
			}
		}
	}()
}

// quorumWithout reports whether, id removed, the voters left that still answer (silent of them
// do not, id among them) make a quorum of the configuration left.
func (r *Replica) quorumWithout(id raft.ServerID, silent int) bool {
	f := r.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	voters := 0
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter && srv.ID != id {
			voters++
		}
	}
	answering := voters - (silent - 1)
	return voters > 0 && answering > voters/2
}

// AddReplica adds a replica to the set (on the leader); it starts from an empty folder and
// receives the records.
func (r *Replica) AddReplica(id, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil || id == "" {
		return fmt.Errorf("a replica needs an id and a host:port, not %q and %q", id, addr)
	}
	return r.membershipChange(r.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, r.cfg.ApplyTimeout))
}

// RemoveReplica removes a replica from the set (on the leader).
func (r *Replica) RemoveReplica(id string) error {
	f := r.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	if !slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool { return string(s.ID) == id }) {
		return fmt.Errorf("%w: no replica %q", ErrUnknownReplica, id)
	}
	return r.membershipChange(r.raft.RemoveServer(raft.ServerID(id), 0, r.cfg.ApplyTimeout))
}

// ErrUnknownReplica is returned for a replica the set does not have.
var ErrUnknownReplica = errors.New("unknown replica")

func (r *Replica) membershipChange(f raft.IndexFuture) error {
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	return nil
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// seed starts a new set of replicas from this one: alone first, its records put in a snapshot
// (so the others receive them whole, not only the entries that follow), then with the others.
func (r *Replica) seed() error {
	self := raft.Server{ID: raft.ServerID(r.cfg.ID), Address: raft.ServerAddress(r.mux.advertise.String())}
	if err := r.raft.BootstrapCluster(raft.Configuration{Servers: []raft.Server{self}}).Error(); err != nil {
		return fmt.Errorf("starting the replicas: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for r.raft.State() != raft.Leader {
		if time.Now().After(deadline) {
			return errors.New("starting the replicas: the first replica did not become the leader alone")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := r.raft.Barrier(r.cfg.ApplyTimeout).Error(); err != nil {
		return err
	}
	if !r.cfg.Store.Empty() {
		// A first write moves the store's applied index, which followers' reads wait for: a
		// replica that has not received the snapshot yet is behind it.
		entry, err := persistence.EncodeEntry(&persistence.SetMeta{Name: "replicas_seeded_at", Value: time.Now().UTC().Format(time.RFC3339)})
		if err != nil {
			return err
		}
		if err := r.raft.Apply(entry, r.cfg.ApplyTimeout).Error(); err != nil {
			return err
		}
		reload := raft.ReloadableConfig{TrailingLogs: 0, SnapshotInterval: r.cfg.SnapshotInterval,
			SnapshotThreshold: r.cfg.SnapshotThreshold, HeartbeatTimeout: r.cfg.HeartbeatTimeout, ElectionTimeout: r.cfg.HeartbeatTimeout}
		if err := r.raft.ReloadConfig(reload); err != nil {
			return err
		}
		if err := r.raft.Snapshot().Error(); err != nil {
			return fmt.Errorf("putting this store's records in the replicas' first snapshot: %w", err)
		}
		reload.TrailingLogs = r.cfg.TrailingLogs
		if err := r.raft.ReloadConfig(reload); err != nil {
			return err
		}
	}
	r.log.Info("started a new set of replicas", "replicas", len(r.cfg.Peers), "from_records", !r.cfg.Store.Empty())
	go r.addPeers()
	return nil
}

// addPeers adds the other peers of a new set, one at a time, whenever this replica leads, until
// the configuration holds them all. While an added replica is down there may be no quorum, and
// so no leader, until it comes up: the adding then goes on.
func (r *Replica) addPeers() {
	wait := 100 * time.Millisecond
	for {
		f := r.raft.GetConfiguration()
		if f.Error() != nil {
			return // shut down
		}
		known := map[raft.ServerID]bool{}
		for _, srv := range f.Configuration().Servers {
			known[srv.ID] = true
		}
		var missing *Peer
		for _, p := range r.cfg.Peers {
			if !known[raft.ServerID(p.ID)] {
				missing = &p
				break
			}
		}
		if missing == nil {
			return
		}
		if r.Leading() {
			err := r.raft.AddVoter(raft.ServerID(missing.ID), raft.ServerAddress(missing.Addr), 0, 0).Error()
			if errors.Is(err, raft.ErrRaftShutdown) {
				return
			}
			if err == nil {
				r.log.Info("added a replica", "replica", missing.ID, "address", missing.Addr)
				continue
			}
			r.log.Warn("cannot add a replica yet", "replica", missing.ID, "err", err)
		}
		select {
		case <-r.mux.closed:
			return
		case <-time.After(wait):
			wait = min(2*wait, 5*time.Second)
		}
	}
}

var _ persistence.Replication = (*Replica)(nil)

// Propose hands a group of the store's writes to the replicas (persistence.Replication). The
// entry is applied here as soon as it is committed, with its commands (when given) as they are.
func (r *Replica) Propose(pr persistence.Proposal) {
	proposed := time.Now()
	entry, done := pr.Entry, pr.Done
	p := &proposal{commands: pr.Commands, committed: pr.Committed, applied: make(chan struct{})}
	r.proposals.Store(&entry[0], p)
	f := r.raft.Apply(entry, r.cfg.ApplyTimeout)
	go func() {
		err := f.Error()
		_, unclaimed := r.proposals.LoadAndDelete(&entry[0])
		if !unclaimed {
			// Claimed by an apply, which answers it, perhaps held with the next (fsm). Failed
			// here, yet applied: another leader committed it; its commands are the writers'
			// again once that apply is done with them.
			<-p.applied
		}
		if err != nil {
			if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) ||
				errors.Is(err, raft.ErrEnqueueTimeout) {
				err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			done(nil, err)
			return
		}
		if r.cfg.Observe != nil {
			r.cfg.Observe.ObserveReplicated(time.Since(proposed))
		}
		if unclaimed {
			done(f.Response(), nil)
			return
		}
		done(p.result, nil)
	}()
}

// OnLeaderChange has changed called at each change of the leader this replica knows: to none
// when it lost the leader, to the one elected. Calls come one at a time, from one goroutine.
func (r *Replica) OnLeaderChange(changed func()) {
	r.watchersMu.Lock()
	defer r.watchersMu.Unlock()
	r.leaderWatchers = append(r.leaderWatchers, changed)
}

// Leadership tells of each change: true when this replica became the leader, false when it no
// longer is.
func (r *Replica) Leadership() <-chan bool { return r.leadership }

// Barrier waits until every entry committed before it is applied here (a new leader's first
// step before it acts on the records).
func (r *Replica) Barrier(timeout time.Duration) error {
	term := r.raft.CurrentTerm()
	if err := r.raft.Barrier(timeout).Error(); err != nil {
		return err
	}
	r.fsm.applyHeld()
	if r.Leading() && r.raft.CurrentTerm() == term {
		r.caughtUpTerm.Store(term)
	}
	return nil
}

// caughtUp makes sure this replica, leading, has applied every entry committed before its term,
// with a barrier of its own if the term's first has not been passed yet, until deadline: a new
// leader may not know yet which of the entries it holds the last leader had acknowledged.
func (r *Replica) caughtUp(deadline time.Time) bool {
	term := r.raft.CurrentTerm()
	if r.caughtUpTerm.Load() == term {
		return true
	}
	r.termBarrier.Lock()
	defer r.termBarrier.Unlock()
	if r.caughtUpTerm.Load() == term {
		return true
	}
	return r.Barrier(time.Until(deadline)) == nil && r.caughtUpTerm.Load() == term
}

// TransferLeadership hands the leadership to another replica: raft elects one of the others
// at once.
func (r *Replica) TransferLeadership() error { return r.raft.LeadershipTransfer().Error() }

// StillLeads makes sure this replica still leads: a quorum heard it within half a heartbeat
// timeout (asked again when longer ago).
func (r *Replica) StillLeads() bool { return r.Leading() && r.reads.stillLeads() }

// Leading reports whether this replica is the leader.
func (r *Replica) Leading() bool { return r.raft.State() == raft.Leader }

// Leader is the current leader's id and address, empty while there is none known.
func (r *Replica) Leader() (id, addr string) {
	a, i := r.raft.LeaderWithID()
	return string(i), string(a)
}

// AwaitLeader returns the leader's address once one is known, waiting until deadline while the
// replicas choose one (at their start, or after the leader was lost).
func (r *Replica) AwaitLeader(deadline time.Time) (string, error) {
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		if _, addr := r.Leader(); addr != "" {
			return addr, nil
		}
		if time.Until(deadline) < wait {
			return "", ErrUnavailable
		}
		time.Sleep(wait)
	}
}

// Term is the current raft term.
func (r *Replica) Term() uint64 { return r.raft.CurrentTerm() }

// ForwardListener yields the connections on which followers hand API requests to this replica
// over HTTP.
func (r *Replica) ForwardListener() net.Listener { return forwardListener{r.mux, r.mux.forward} }

// RelayListener yields the connections on which followers hand small API writes to this
// replica, many at once (package relay).
func (r *Replica) RelayListener() net.Listener { return forwardListener{r.mux, r.mux.relay} }

// DialForward opens an HTTP connection to the replica at addr, the leader as the caller knows
// it, for a request this follower cannot answer; ctx ends the dial early.
func (r *Replica) DialForward(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	return r.mux.dial(ctx, addr, kindForward, timeout)
}

// DialRelay opens a relay connection (package relay) to the replica at addr, the leader as the
// caller knows it; ctx ends the dial early.
func (r *Replica) DialRelay(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	return r.mux.dial(ctx, addr, kindRelay, timeout)
}

// CatchUp waits until this replica has applied every write the leader acknowledged before the
// call: a read after it sees them (read your writes on any replica). The leader waits only
// when it must make sure it still leads: one cut off from the others may believe it does for a
// while, as another acknowledges writes it never saw. While the replicas choose a leader, the
// read waits for one, until deadline.
func (r *Replica) CatchUp(deadline time.Time) error {
	if r.StillLeads() && r.caughtUp(deadline) {
		return nil
	}
	var index uint64
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		var err error
		if index, err = r.asks.await(deadline); err == nil {
			break
		}
		if !errors.Is(err, ErrUnavailable) {
			return err
		}
		if time.Until(deadline) < wait {
			return err
		}
		time.Sleep(wait)
		if r.StillLeads() && r.caughtUp(deadline) {
			return nil
		}
	}
	if r.cfg.Store.AppliedIndex() < index {
		defer r.fsm.read()() // what this replica holds is applied for the read
	}
	if !r.cfg.Store.WaitApplied(index, time.Until(deadline)) {
		return fmt.Errorf("%w: this replica has not caught up with the leader", ErrUnavailable)
	}
	return nil
}

// Staleness is how far this replica's records may be behind, for a read that does not catch up
// (a stale read): the last entry applied, and how long ago it last heard from the leader (0 on
// the leader, which still leads as far as it knows; negative when it has not heard from one
// since it started).
func (r *Replica) Staleness() (applied uint64, lastContact time.Duration) {
	applied = r.cfg.Store.AppliedIndex()
	if r.Leading() {
		return applied, 0
	}
	contact := r.raft.LastContact()
	if contact.IsZero() {
		return applied, -1
	}
	return applied, time.Since(contact)
}

// Status is the set of replicas as one of them sees it.
type Status struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Term     uint64 `json:"term"`
	LeaderID string `json:"leader"`
	Applied  uint64 `json:"appliedIndex"`
	Commit   uint64 `json:"commitIndex"`
	// Replicas are those of the configuration, each as it reports itself.
	Replicas []ReplicaStatus `json:"replicas"`
}

// ReplicaStatus is one replica of the configuration; what it reports of itself is nil when it
// cannot be reached.
type ReplicaStatus struct {
	ID      string     `json:"id"`
	Address string     `json:"address"`
	Voter   bool       `json:"voter"`
	State   *string    `json:"state"`
	Applied *uint64    `json:"appliedIndex"`
	Contact *time.Time `json:"lastContact"`
}

// self is what a replica says of itself when asked; InTouch that it leads or heard from the
// leader within a heartbeat timeout (another replica's requests may go by it).
type self struct {
	State   string            `json:"state"`
	Applied uint64            `json:"appliedIndex"`
	Contact time.Time         `json:"lastContact"`
	InTouch bool              `json:"inTouch,omitempty"`
	Shared  map[string]string `json:"shared,omitempty"`
}

func (r *Replica) self() self {
	if !r.running.Load() {
		// Asked while it starts (its port opens first): it knows only its records.
		return self{State: "starting", Applied: r.cfg.Store.AppliedIndex(), Shared: r.cfg.Shared}
	}
	contact := r.raft.LastContact()
	if r.Leading() {
		contact = time.Now()
	}
	return self{State: strings.ToLower(r.raft.State().String()), Applied: r.cfg.Store.AppliedIndex(), Contact: contact, InTouch: r.inTouch(),
		Shared: r.cfg.Shared}
}

// tellStatus answers another replica's question about this one.
func (r *Replica) tellStatus(conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(statusTimeout))
	json.NewEncoder(conn).Encode(r.self())
}

// statusTimeout bounds the questions to the replicas about themselves, asked together: a
// replica out of reach (stopped, paused, cut off) shows as such then, and the status of the
// set is answered.
const statusTimeout = 400 * time.Millisecond

// Status asks every replica of the configuration about itself, at once.
func (r *Replica) Status() Status {
	leader, _ := r.Leader()
	me := r.self()
	s := Status{ID: r.cfg.ID, State: me.State, Term: r.raft.CurrentTerm(), LeaderID: leader, Applied: me.Applied, Commit: r.raft.CommitIndex()}
	f := r.raft.GetConfiguration()
	if f.Error() != nil {
		return s
	}
	servers := f.Configuration().Servers
	s.Replicas = make([]ReplicaStatus, len(servers))
	var asked sync.WaitGroup
	deadline := time.Now().Add(statusTimeout)
	for i, srv := range servers {
		s.Replicas[i] = ReplicaStatus{ID: string(srv.ID), Address: string(srv.Address), Voter: srv.Suffrage == raft.Voter}
		asked.Go(func() {
			told := me
			if string(srv.ID) != r.cfg.ID {
				var ok bool
				if told, ok = r.askAbout(string(srv.Address), deadline); !ok {
					return
				}
			}
			s.Replicas[i].State, s.Replicas[i].Applied = &told.State, &told.Applied
			if !told.Contact.IsZero() {
				s.Replicas[i].Contact = &told.Contact
			}
		})
	}
	asked.Wait()
	return s
}

// Shutdown leaves the replicas: raft stops, the port closes, the log is closed.
func (r *Replica) Shutdown() {
	if r.raft != nil {
		r.raft.Shutdown().Error()
		r.fsm.stop()
	}
	r.mux.close()
	r.asks.close()
	r.logs.Close()
}
