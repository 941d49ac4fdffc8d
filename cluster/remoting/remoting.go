// Package remoting starts Proto.Actor's remote endpoint (gRPC) for the coordinator and the
// render nodes. Only protocol.Envelope crosses it (cluster/protocol), so peers of different
// versions never meet a message type their binary cannot decode.
//
// The endpoint is the farm's front door, so it trusts nothing it receives (guard.go): mutual TLS
// with the farm's CA, where each side accepts only the role it talks to (a node hears only the
// coordinator, the coordinator only nodes); every message batch checked before Proto.Actor
// dereferences anything in it; only the actors the farm addresses reachable; every handler's
// panic recovered; and each message stamped with who sent it (protocol.PeerHeader).
package remoting

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/stats"

	"github.com/framefarm/framefarm/cluster/certs"
)

// Options describe one member's endpoint.
type Options struct {
	// Bind is host:port to listen on (port 0 picks one); Advertise, when set, the address other
	// members reach it at.
	Bind, Advertise string
	// TLS names this member's certificate and the farm's CA. Without it Insecure must be set:
	// plain gRPC, where anyone who reaches the port is heard (a trusted network only).
	TLS      TLS
	Insecure bool
	// Self is the role this member's certificate must name; Accept the role of the peers it
	// talks to (nodes accept the coordinator, the coordinator accepts nodes).
	Self, Accept certs.Role
	// Actors are the names of the local actors peers may address; futures (the answers to this
	// member's own requests) are always reachable. Empty: every actor (the benchmarks' node
	// simulator, whose simulated nodes are many unnamed actors).
	Actors []string
	Logger *slog.Logger
	// Traffic, when set, is told of the bytes of every message received and sent.
	Traffic Traffic
}

// Traffic counts bytes on the wire (metrics.Traffic).
type Traffic interface {
	Received(n int)
	Sent(n int)
}

// Endpoint is a started remote endpoint.
type Endpoint struct {
	remote *remote.Remote
	guard  *guard
	// Addr is the address other members reach this one's actors at.
	Addr string
	// Identity is what this member's certificate names (zero without TLS).
	Identity certs.Identity
}

// linkPing is how long a connection between members may be quiet before it is pinged, and how
// long a ping, or a connection's setting up, may take before the connection is given up.
const linkPing = time.Second

// Start serves system's actors as opts say.
func Start(system *actor.ActorSystem, opts Options) (e *Endpoint, err error) {
	host, portText, err := net.SplitHostPort(opts.Bind)
	if err != nil {
		return nil, fmt.Errorf("actors address %q: %w", opts.Bind, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("actors address %q: invalid port", opts.Bind)
	}
	g := newGuard(system, opts)
	e = &Endpoint{guard: g}
	serverOpts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(g.unary),
		grpc.ChainStreamInterceptor(g.stream),
		grpc.MaxRecvMsgSize(maxMessageBytes),
		// A member needs one stream; a handshake that stalls is not left to hold a connection.
		grpc.MaxConcurrentStreams(16),
		grpc.ConnectionTimeout(10 * time.Second),
		// Both ends ping a connection that has been quiet: one that died in a partition is found
		// dead in seconds, not when TCP's retransmissions give up after the network is back.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: linkPing, Timeout: linkPing}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: linkPing / 2, PermitWithoutStream: true}),
	}
	dial := grpc.WithTransportCredentials(insecure.NewCredentials())
	switch {
	case opts.TLS.Enabled():
		server, client, identity, err := opts.TLS.Configs(opts.Self, opts.Accept)
		if err != nil {
			return nil, err
		}
		e.Identity = identity
		serverOpts = append(serverOpts, grpc.Creds(refusingCredentials{TransportCredentials: credentials.NewTLS(server), g: g}))
		dial = grpc.WithTransportCredentials(credentials.NewTLS(client))
	case !opts.Insecure:
		return nil, fmt.Errorf("the actors endpoint needs TLS certificates (or insecure, on a trusted network only)")
	}
	dialOpts := []grpc.DialOption{dial, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: linkPing, Timeout: linkPing, PermitWithoutStream: true}),
		// A connection tried while the network is down gives up, and is tried again, within a
		// second or so: once it is back, the next try gets through.
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: linkPing,
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: linkPing}})}
	if opts.Traffic != nil {
		serverOpts = append(serverOpts, grpc.StatsHandler(wireCounter{opts.Traffic}))
		dialOpts = append(dialOpts, grpc.WithStatsHandler(wireCounter{opts.Traffic}))
	}
	config := []remote.ConfigOption{
		remote.WithServerOptions(serverOpts...),
		remote.WithDialOptions(dialOpts...),
	}
	if opts.Advertise != "" {
		config = append(config, remote.WithAdvertisedHost(opts.Advertise))
	}
	r := remote.NewRemote(system, remote.Configure(host, port, config...))
	// Start panics when it cannot listen; that is a configuration error, returned as one.
	defer func() {
		if p := recover(); p != nil {
			e, err = nil, fmt.Errorf("actors address %s: %v", opts.Bind, p)
		}
	}()
	r.Start()
	e.remote, e.Addr = r, system.ProcessRegistry.Address
	return e, nil
}

// wireCounter tells a Traffic of the wire size of every message of the endpoint's streams, in
// and out (gRPC's framing and TLS records aside).
type wireCounter struct{ t Traffic }

func (w wireCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (w wireCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (w wireCounter) HandleConn(context.Context, stats.ConnStats)                       {}
func (w wireCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch p := s.(type) {
	case *stats.InPayload:
		w.t.Received(p.WireLength)
	case *stats.OutPayload:
		w.t.Sent(p.WireLength)
	}
}

// Shutdown stops the endpoint; graceful lets the messages already read reach their actors
// first: new streams are refused, the server stops, and every stream's handler returns.
//
// Proto.Actor's own graceful stop is not used: it marks its stream reader suspended without a
// lock while readers may be reading the mark, and then sends on a channel of every reader it
// knows, which a reader closes when its stream ends, before the reader's goroutine forgets it.
// A stream ending as the endpoint stops (a peer leaving, a batch refused) made that send panic.
// The endpoint's connections to its peers stay until the process ends, so what its actors
// still send goes out.
func (e *Endpoint) Shutdown(graceful bool) {
	if graceful {
		e.guard.refuseStreams()
	}
	e.remote.Shutdown(false)
	if graceful {
		e.guard.awaitStreams()
	}
}
