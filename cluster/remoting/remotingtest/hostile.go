// Package remotingtest throws at a live actors endpoint what a stranger who reaches its port
// can: stray bytes, every gRPC method of Proto.Actor's remote, and message batches that are
// malformed or name what no member of the farm sends. Tests of the endpoint and of whole
// processes use it, then check the process lives on.
package remotingtest

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/framefarm/framefarm/cluster/protocol"
)

// HostileBatches are message batches for an endpoint at addr whose actor named target exists;
// each must be refused. Those whose names start with "nil " hold a nil entry, which crosses the
// wire as an empty one: they are hostile only to code that reads them without the network.
func HostileBatches(addr, target string) map[string]*remote.MessageBatch {
	envelope := func(m *remote.MessageEnvelope) []*remote.MessageEnvelope { return []*remote.MessageEnvelope{m} }
	to := []*actor.PID{{Address: addr, Id: target}}
	envType := []string{string(proto.MessageName(&protocol.Envelope{}))}
	good, _ := proto.Marshal(protocol.Wrap(&protocol.Bye{}))
	stop, _ := proto.Marshal(&actor.Stop{})
	return map[string]*remote.MessageBatch{
		"unknown type":          {TypeNames: []string{"evil.DoesNotExist"}, Targets: to, Envelopes: envelope(&remote.MessageEnvelope{MessageData: good})},
		"system stop":           {TypeNames: []string{"actor.Stop"}, Targets: to, Envelopes: envelope(&remote.MessageEnvelope{MessageData: stop})},
		"poison pill":           {TypeNames: []string{"actor.PoisonPill"}, Targets: to, Envelopes: envelope(&remote.MessageEnvelope{})},
		"type index past end":   {TypeNames: envType, Targets: to, Envelopes: envelope(&remote.MessageEnvelope{TypeId: 7, MessageData: good})},
		"negative type index":   {TypeNames: envType, Targets: to, Envelopes: envelope(&remote.MessageEnvelope{TypeId: -1, MessageData: good})},
		"no type names":         {Targets: to, Envelopes: envelope(&remote.MessageEnvelope{MessageData: good})},
		"target index past end": {TypeNames: envType, Targets: to, Envelopes: envelope(&remote.MessageEnvelope{Target: 3, MessageData: good})},
		"no targets":            {TypeNames: envType, Envelopes: envelope(&remote.MessageEnvelope{MessageData: good})},
		"sender index past end": {TypeNames: envType, Targets: to, Envelopes: envelope(&remote.MessageEnvelope{Sender: 2, MessageData: good})},
		"empty target":          {TypeNames: envType, Targets: []*actor.PID{nil}, Envelopes: envelope(&remote.MessageEnvelope{MessageData: good})},
		"nil sender":            {TypeNames: envType, Targets: to, Senders: []*actor.PID{nil}, Envelopes: envelope(&remote.MessageEnvelope{Sender: 1, MessageData: good})},
		"nil envelope":          {TypeNames: envType, Targets: to, Envelopes: []*remote.MessageEnvelope{nil}},
		"json serializer":       {TypeNames: envType, Targets: to, Envelopes: envelope(&remote.MessageEnvelope{SerializerId: 1, MessageData: good})},
		"unknown serializer":    {TypeNames: envType, Targets: to, Envelopes: envelope(&remote.MessageEnvelope{SerializerId: 99, MessageData: good})},
		"relay elsewhere":       {TypeNames: envType, Targets: []*actor.PID{{Address: "10.0.0.99:22", Id: target}}, Envelopes: envelope(&remote.MessageEnvelope{MessageData: good})},
		"an actor not served":   {TypeNames: envType, Targets: []*actor.PID{{Address: addr, Id: "$1"}}, Envelopes: envelope(&remote.MessageEnvelope{MessageData: good})},
	}
}

// Dial opens a plain gRPC connection to an endpoint, as a stranger without a certificate would.
func Dial(t testing.TB, addr string) remote.RemotingClient {
	t.Helper()
	conn, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return remote.NewRemotingClient(conn)
}

// StrayBytes sends random bytes, and an HTTP/2 preface followed by random bytes, each on its own
// connection, and waits for the endpoint to hang up (or a second).
func StrayBytes(t testing.TB, addr string) {
	t.Helper()
	for _, stray := range [][]byte{Random(4096), append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Random(512)...)} {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(stray)
		conn.SetReadDeadline(time.Now().Add(time.Second))
		io.Copy(io.Discard, conn)
		conn.Close()
	}
}

// Send writes one remote message on a new stream and returns how the endpoint ended the stream
// (nil if it was still open after wait).
func Send(client remote.RemotingClient, msg *remote.RemoteMessage, wait time.Duration) error {
	// Opening the stream and sending may take a while on a loaded machine; the wait for the
	// endpoint's verdict starts once the message is out.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := client.Receive(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(msg); err != nil {
		return err
	}
	waited := make(chan struct{})
	timer := time.AfterFunc(wait, func() { close(waited); cancel() })
	defer timer.Stop()
	for {
		if _, err := stream.Recv(); err != nil {
			select {
			case <-waited:
				return nil
			default:
				return err
			}
		}
	}
}

// Truncated sends, each on its own stream, a proper batch's bytes cut short at several places,
// below the protobuf decoding a stranger's codec would do; it returns how the endpoint ended
// each stream.
func Truncated(t testing.TB, addr string, whole *remote.RemoteMessage) []error {
	t.Helper()
	conn, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := proto.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	var ends []error
	for _, cut := range []int{1, 2, len(raw) / 3, len(raw) / 2, len(raw) - 1} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/remote.Remoting/Receive")
		if err == nil {
			err = stream.SendMsg(raw[:cut])
		}
		if err == nil {
			err = stream.RecvMsg(new([]byte))
		}
		cancel()
		ends = append(ends, err)
	}
	return ends
}

// rawCodec sends bytes as they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(*[]byte); ok {
		return *b, nil
	}
	return v.([]byte), nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

// Batch wraps a batch in a remote message.
func Batch(b *remote.MessageBatch) *remote.RemoteMessage {
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}
}

// Envelope is a batch carrying one envelope to an actor.
func Envelope(addr, actorName string, env *protocol.Envelope) *remote.RemoteMessage {
	data, _ := proto.Marshal(env)
	return Batch(&remote.MessageBatch{
		TypeNames: []string{string(proto.MessageName(env))},
		Targets:   []*actor.PID{{Address: addr, Id: actorName}},
		Envelopes: []*remote.MessageEnvelope{{MessageData: data}},
	})
}

// Random returns n random bytes.
func Random(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
