package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/replicas"
	"github.com/framefarm/framefarm/http/api"
)

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

// leaderDuties runs the leader's duties (duties, then the cluster) while this replica leads
// (replicas.WhileLeading: after a barrier, each term of the coordinator restoring the queue from
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
	list := f.duties(f.coord)
	if f.cfg.Cluster != nil {
		list = append(list, f.clusterService(f.coord))
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
	f.log.Info("leading the replicas", "term", term)
	f.happen.DutiesChanged.Publish(actors.DutiesChanged{Leading: true, Term: term})
	return func() {
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

func (r *replicaAPI) Leading() bool                      { return r.replica.Leading() }
func (r *replicaAPI) CatchUp(deadline time.Time) error   { return r.replica.CatchUp(deadline) }
func (r *replicaAPI) Staleness() (uint64, time.Duration) { return r.replica.Staleness() }
func (r *replicaAPI) StaleReadable(deadline time.Time) error {
	return r.replica.StaleReadable(deadline)
}
func (r *replicaAPI) SealRevocation() error                  { return r.replica.SealRevocation() }
func (r *replicaAPI) Forward(ctx *fasthttp.RequestCtx) error { return r.forward.Forward(ctx) }
func (r *replicaAPI) OutOfTouch() bool                       { return r.replica.OutOfTouch() }
func (r *replicaAPI) Detour(ctx *fasthttp.RequestCtx) error  { return r.forward.Detour(ctx) }
func (r *replicaAPI) Status() replicas.Status                { return r.replica.Status() }
func (r *replicaAPI) AddReplica(id, addr string) error       { return r.replica.AddReplica(id, addr) }
func (r *replicaAPI) RemoveReplica(id string) error          { return r.replica.RemoveReplica(id) }

// closer makes a function that stops something an io.Closer.
type closer func()

func (c closer) Close() error { c(); return nil }
