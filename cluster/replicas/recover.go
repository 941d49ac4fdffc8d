package replicas

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/hashicorp/raft"
)

// RecoverConfig names the replica that survived the loss of its set's quorum.
type RecoverConfig struct {
	// ID and Addr are the survivor's, as its [ha] table gives them (Advertise, or Bind).
	ID, Addr string
	// Dir holds its raft log and snapshots (Config.Dir).
	Dir    string
	Store  Store
	Logger *slog.Logger
}

// Recovered says what a recovery found.
type Recovered struct {
	// AppliedIndex is the last entry of the survivor's log, now in its store.
	AppliedIndex uint64
}

// ErrRunning refuses to recover a replica whose process runs.
var ErrRunning = errors.New("the replica runs: stop it before recovering it")

// Recover makes a replica whose others are gone for good a set of one, as hashicorp/raft's
// RecoverCluster does (and Consul's peers.json): every entry its log holds is applied to its
// store (each committed write, and any it received that the set had not committed yet), and a
// snapshot records the new set, itself alone. Started again, it leads at once; new replicas
// then join it (AddReplica). Its process must not run.
func Recover(cfg RecoverConfig) (Recovered, error) {
	r := &Replica{log: cfg.Logger.With("component", "replicas")}
	hlog := newRaftLogger(r.log)
	logs, err := openLog(cfg.Dir, hlog)
	if errors.Is(err, errLogLocked) {
		return Recovered{}, ErrRunning
	}
	if err != nil {
		return Recovered{}, fmt.Errorf("the replicas' log: %w", err)
	}
	defer logs.Close()
	var failed error
	r.cfg = Config{Store: cfg.Store, Fail: func(err error) { failed = err }}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		return Recovered{}, fmt.Errorf("the replicas' snapshots: %w", err)
	}
	conf := raft.DefaultConfig()
	conf.LocalID, conf.Logger = raft.ServerID(cfg.ID), hlog
	_, transport := raft.NewInmemTransport(raft.ServerAddress(cfg.Addr))
	alone := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(cfg.ID), Address: raft.ServerAddress(cfg.Addr)}}}
	r.fsm = &fsm{r: r}
	machine := &recovering{fsm: r.fsm}
	err = raft.RecoverCluster(conf, machine, logs, logs, snaps, transport, alone)
	machine.release()
	if err != nil {
		return Recovered{}, fmt.Errorf("recover: %w", err)
	}
	if failed != nil {
		return Recovered{}, fmt.Errorf("recover: %w", failed)
	}
	return Recovered{AppliedIndex: cfg.Store.AppliedIndex()}, nil
}

// recovering is the store's state machine during a recovery, which releases the snapshot it
// took (RecoverCluster persists it but never releases it, and it holds the store open).
type recovering struct {
	*fsm
	taken []raft.FSMSnapshot
}

func (m *recovering) Snapshot() (raft.FSMSnapshot, error) {
	snap, err := m.fsm.Snapshot()
	if err == nil {
		m.taken = append(m.taken, snap)
	}
	return snap, err
}

func (m *recovering) release() {
	for _, snap := range m.taken {
		snap.Release()
	}
}
