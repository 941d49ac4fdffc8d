package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/membership"
	"github.com/framefarm/framefarm/cluster/node"
	"github.com/framefarm/framefarm/cluster/remoting"
)

// clusterMember is this process's place in the farm: its Proto.Actor remote endpoint and its
// membership.
type clusterMember struct {
	endpoint *remoting.Endpoint
	member   *membership.Member
	// actors is the address others reach this process's actors at.
	actors string
}

// joinCluster starts the remote endpoint of system and the membership, with meta completed by
// the actors address. Run the membership with member.Run; leave with leave. A coordinator's
// endpoint hears only nodes and lets them reach its gateway; a node's hears only the
// coordinator and lets it reach the node's agent. traffic, when set, counts the bytes of the
// messages.
func joinCluster(system *actor.ActorSystem, cfg ClusterConfig, name string, meta membership.Meta, traffic remoting.Traffic, log *slog.Logger) (*clusterMember, error) {
	advertise, err := actorsAdvertise(cfg)
	if err != nil {
		return nil, err
	}
	opts := remoting.Options{Bind: cfg.actorsBind(), Advertise: advertise, TLS: cfg.TLS, Insecure: cfg.Insecure, Logger: log,
		Self: certs.RoleCoordinator, Accept: certs.RoleNode, Actors: []string{actors.GatewayName}, Traffic: traffic}
	if meta.Role == membership.RoleNode {
		opts.Self, opts.Accept, opts.Actors = certs.RoleNode, certs.RoleCoordinator, []string{node.AgentName}
	}
	endpoint, err := remoting.Start(system, opts)
	if err != nil {
		return nil, err
	}
	if cfg.Insecure {
		log.Warn("the actors port runs without TLS (cluster insecure): whoever reaches it is heard; use it on a trusted network only",
			"actors", endpoint.Addr)
	}
	meta.Actors = endpoint.Addr
	member, err := membership.Start(membership.Config{
		Name: name, Bind: cfg.Bind, Advertise: cfg.Advertise, Seeds: cfg.Seeds, Key: cfg.Key, Meta: meta, Fast: true, Logger: log,
	})
	if err != nil {
		endpoint.Shutdown(false)
		return nil, err
	}
	log.Info("joined the cluster", "gossip", member.Addr(), "actors", endpoint.Addr, "seeds", cfg.Seeds, "identity", endpoint.Identity.String())
	return &clusterMember{endpoint: endpoint, member: member, actors: endpoint.Addr}, nil
}

// leave says goodbye to the membership, then stops the remote endpoint.
func (c *clusterMember) leave() {
	c.member.Leave(2 * time.Second)
	c.endpoint.Shutdown(true)
}

// actorsAdvertise is the actors address other members dial: actors_advertise, or the host of
// advertise (or of a specific actors_bind) with actors_bind's port. Empty keeps the bound
// address, which is right when it names a host.
func actorsAdvertise(cfg ClusterConfig) (string, error) {
	if cfg.ActorsAdvertise != "" {
		return cfg.ActorsAdvertise, nil
	}
	bindHost, port, err := net.SplitHostPort(cfg.actorsBind())
	if err != nil {
		return "", fmt.Errorf("cluster.actors_bind %q: %w", cfg.actorsBind(), err)
	}
	if ip := net.ParseIP(bindHost); bindHost != "" && (ip == nil || !ip.IsUnspecified()) {
		return "", nil
	}
	if cfg.Advertise == "" {
		return "", fmt.Errorf("cluster.actors_bind %q binds every interface: set cluster.advertise (or --advertise) to the address other machines reach this one at", cfg.actorsBind())
	}
	host, _, err := net.SplitHostPort(cfg.Advertise)
	if err != nil {
		return "", fmt.Errorf("cluster.advertise %q: %w", cfg.Advertise, err)
	}
	return net.JoinHostPort(host, port), nil
}

// watchNodes tells the coordinator of render nodes that membership saw leave or die, until ctx
// ends: their leases end at once instead of at expiry. Where each alive node is seen is
// recorded, for the next leader to reach it.
func watchNodes(ctx context.Context, member *membership.Member, coord *actors.Coordinator, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-member.Events():
			if ev.Meta.Role != membership.RoleNode {
				continue
			}
			if ev.Alive {
				coord.NodeSeen(ev.Meta.NodeID, ev.Addr)
				continue
			}
			reason := "cluster membership declared it dead"
			if ev.Left {
				reason = "it left the cluster"
			}
			log.Info("render node gone from the cluster", "node", ev.Meta.NodeID, "reason", reason)
			coord.NodeLeft(ev.Meta.NodeID, ev.Meta.Incarnation, reason)
		}
	}
}
