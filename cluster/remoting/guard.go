package remoting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/protocol"
)

// maxMessageBytes caps one gRPC message (a batch of envelopes) either way.
const maxMessageBytes = 16 << 20

// receiveMethod is the one gRPC method of Proto.Actor's remote that the farm uses: the stream
// of message batches. Its other methods (process listings, diagnostics) panic upstream.
const receiveMethod = "/remote.Remoting/Receive"

// futurePrefix starts the names of the actors that wait for answers to this member's requests.
const futurePrefix = "future$"

// sentTypes are the only message types the farm's members send each other: the envelope, and
// the remote's own answer to a request for an actor that is gone.
var sentTypes = map[string]bool{
	string(proto.MessageName(&protocol.Envelope{})):        true,
	string(proto.MessageName(&actor.DeadLetterResponse{})): true,
}

// guard checks everything the endpoint receives before Proto.Actor's remote touches it.
type guard struct {
	system *actor.ActorSystem
	actors map[string]bool
	log    *slog.Logger

	// Refusals are logged at most once a minute per peer, so a flood cannot fill the disk.
	mu     sync.Mutex
	logged map[string]time.Time
	// closing refuses new streams; streams counts those being served (Endpoint.Shutdown).
	closing bool
	streams sync.WaitGroup
}

// refuseStreams refuses every stream from now on.
func (g *guard) refuseStreams() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closing = true
}

// awaitStreams waits until every stream served has ended.
func (g *guard) awaitStreams() { g.streams.Wait() }

func newGuard(system *actor.ActorSystem, opts Options) *guard {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &guard{system: system, log: log.With("component", "actors-endpoint"), logged: make(map[string]time.Time)}
	if len(opts.Actors) > 0 {
		g.actors = make(map[string]bool, len(opts.Actors))
		for _, name := range opts.Actors {
			g.actors[name] = true
		}
	}
	return g
}

// unary refuses every unary method: the farm uses none.
func (g *guard) unary(ctx context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
	g.refuse(peerOf(ctx), fmt.Errorf("gRPC method %s is not served", info.FullMethod))
	return nil, status.Errorf(codes.Unimplemented, "%s is not served", info.FullMethod)
}

// stream serves the message stream through checks, and turns a panic into an error for that
// stream alone instead of the end of the process.
func (g *guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	from := peerOf(ss.Context())
	if info.FullMethod != receiveMethod {
		g.refuse(from, fmt.Errorf("gRPC method %s is not served", info.FullMethod))
		return status.Errorf(codes.Unimplemented, "%s is not served", info.FullMethod)
	}
	g.mu.Lock()
	if g.closing {
		g.mu.Unlock()
		return status.Error(codes.Unavailable, "the endpoint is shutting down")
	}
	g.streams.Add(1)
	g.mu.Unlock()
	defer g.streams.Done()
	defer func() {
		if p := recover(); p != nil {
			g.log.Error("a message stream failed; the connection is closed", "peer", from.Describe(), "panic", p, "stack", string(debug.Stack()))
			err = status.Error(codes.Internal, "internal error")
		}
	}()
	header := &remote.MessageHeader{HeaderData: map[string]string{protocol.PeerHeader: from.Encode()}}
	return handler(srv, &guardedStream{ServerStream: ss, g: g, from: from, header: header})
}

// guardedStream checks and stamps each message as it is read.
type guardedStream struct {
	grpc.ServerStream
	g    *guard
	from protocol.Peer
	// header is every message's on this stream: who sent it, and nothing the sender wrote. It
	// is shared, and nothing downstream writes to it.
	header *remote.MessageHeader
}

func (s *guardedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	msg, ok := m.(*remote.RemoteMessage)
	if !ok {
		return status.Error(codes.InvalidArgument, "not a remote message")
	}
	if err := s.g.check(msg, s.header); err != nil {
		s.g.refuse(s.from, err)
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return nil
}

// check accepts a connect request or a batch of envelopes whose every index points inside the
// batch, whose types are the farm's and whose targets are actors peers may address; it gives
// every envelope the header naming its sender.
func (g *guard) check(msg *remote.RemoteMessage, header *remote.MessageHeader) error {
	switch t := msg.MessageType.(type) {
	case *remote.RemoteMessage_ConnectRequest:
		if t.ConnectRequest.GetServerConnection() == nil {
			return errors.New("a connect request that is not a server connection")
		}
		return nil
	case *remote.RemoteMessage_MessageBatch:
		if t.MessageBatch == nil {
			return errors.New("an empty message batch")
		}
		return g.checkBatch(t.MessageBatch, header)
	default:
		return fmt.Errorf("a remote message of kind %T", msg.MessageType)
	}
}

func (g *guard) checkBatch(b *remote.MessageBatch, header *remote.MessageHeader) error {
	for _, target := range b.Targets {
		if err := g.checkTarget(target); err != nil {
			return err
		}
	}
	for _, sender := range b.Senders {
		if sender == nil {
			return errors.New("a batch with an empty sender")
		}
	}
	for i, e := range b.Envelopes {
		switch {
		case e == nil:
			return fmt.Errorf("envelope %d is empty", i)
		case e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames):
			return fmt.Errorf("envelope %d names type %d of %d", i, e.TypeId, len(b.TypeNames))
		case !sentTypes[b.TypeNames[e.TypeId]]:
			return fmt.Errorf("envelope %d is a %q, which no member of the farm sends", i, truncate(b.TypeNames[e.TypeId]))
		case e.SerializerId != 0:
			return fmt.Errorf("envelope %d names serializer %d", i, e.SerializerId)
		case e.Target < 0 || int(e.Target) >= len(b.Targets):
			return fmt.Errorf("envelope %d names target %d of %d", i, e.Target, len(b.Targets))
		case e.Sender < 0 || int(e.Sender) > len(b.Senders):
			return fmt.Errorf("envelope %d names sender %d of %d", i, e.Sender, len(b.Senders))
		}
		e.MessageHeader = header
	}
	return nil
}

// checkTarget accepts only this member's own actors that peers may address: a target at another
// address would make this process relay the message there.
func (g *guard) checkTarget(pid *actor.PID) error {
	switch {
	case pid == nil:
		return errors.New("a batch with an empty target")
	case pid.Address != g.system.ProcessRegistry.Address:
		return fmt.Errorf("a message for %q, which is not this member's address", truncate(pid.Address))
	case g.actors != nil && !g.actors[pid.Id] && !strings.HasPrefix(pid.Id, futurePrefix):
		return fmt.Errorf("a message for actor %q, which peers may not address", truncate(pid.Id))
	}
	return nil
}

// refuse logs a peer turned away, at most once a minute per peer.
func (g *guard) refuse(from protocol.Peer, err error) {
	now := time.Now()
	g.mu.Lock()
	last, seen := g.logged[from.Key()]
	quiet := seen && now.Sub(last) < time.Minute
	if !quiet {
		if len(g.logged) >= 4096 {
			clear(g.logged)
		}
		g.logged[from.Key()] = now
	}
	g.mu.Unlock()
	if !quiet {
		g.log.Warn("refused a peer on the actors port", "peer", from.Describe(), "reason", err.Error())
	}
}

// peerOf reads who is at the other end of a gRPC call.
func peerOf(ctx context.Context) protocol.Peer {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return protocol.Peer{Addr: "unknown"}
	}
	out := protocol.Peer{Addr: p.Addr.String()}
	if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
		// The handshake verified the chain and the role; this reads what it names.
		if id, err := certs.IdentityOf(info.State.PeerCertificates[0]); err == nil {
			out.Verified, out.Identity = true, id
		}
	}
	return out
}

// truncate keeps what a peer sent short enough to log.
func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
