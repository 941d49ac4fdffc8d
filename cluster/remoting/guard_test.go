package remoting

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/cluster/remoting/remotingtest"
)

const envServe = "REMOTING_TEST_SERVE"

// envGraceful, set, makes serveEcho's actor quiet and its endpoint shut down gracefully. (Its
// lines would order each message read before the shutdown for the race detector, as it counts
// a write to a file and a later read of another as synchronization.)
const envGraceful = "REMOTING_TEST_GRACEFUL"

// serveEcho is a child process of the tests: an endpoint started with the options in
// envServe (JSON) whose actor "echo" prints every envelope it gets with the sender the endpoint
// stamped, and answers a request with a FinalAck naming the sender's certificate identity.
func serveEcho() int {
	var opts Options
	if err := json.Unmarshal([]byte(os.Getenv(envServe)), &opts); err != nil {
		fmt.Println(err)
		return 1
	}
	opts.Bind, opts.Actors = "127.0.0.1:0", []string{"echo"}
	system := newSystem()
	e, err := Start(system, opts)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer e.Shutdown(os.Getenv(envGraceful) != "")
	_, err = system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if env, ok := ctx.Message().(*protocol.Envelope); ok && os.Getenv(envGraceful) == "" {
			p, remote := protocol.PeerOf(ctx)
			fmt.Printf("got %s remote=%v from %s\n", env.Kind, remote, p.Addr)
			if ctx.Sender() != nil {
				ctx.Respond(protocol.Wrap(&protocol.FinalAck{JobID: p.Identity.String(), Attempt: 1}))
			}
		}
	}), "echo")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("serving", e.Addr, e.Identity.String())
	io.Copy(io.Discard, os.Stdin) // until the parent closes stdin or dies
	return 0
}

// echoServer runs serveEcho in a child process (Proto.Actor's remote sets gRPC's global logger
// at every start, a data race with any gRPC connection of this process). It returns the
// endpoint's address and identity, the lines its echo actor prints, and how the child ended.
func echoServer(t *testing.T, opts Options, env ...string) (addr, identity string, lines chan string, exited chan error, stop func()) {
	t.Helper()
	raw, _ := json.Marshal(opts)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envServe+"="+string(raw)), env...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, lines = make(chan error, 1), make(chan string, 100)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
		exited <- fmt.Errorf("%v: %s", cmd.Wait(), stderr.String())
	}()
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill() })
	select {
	case line := <-lines:
		fields := strings.Fields(line)
		if len(fields) < 2 || fields[0] != "serving" {
			t.Fatalf("echo server: %s", line)
		}
		addr = fields[1]
		if len(fields) > 2 {
			identity = fields[2]
		}
	case err := <-exited:
		t.Fatalf("echo server: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the echo server did not start")
	}
	return addr, identity, lines, exited, func() { stdin.Close() }
}

// TestHostilePeersCannotCrashTheEndpoint throws what a stranger can at a live endpoint in its own
// process: stray bytes, every gRPC method of the remote, connect requests and batches that name
// unknown types, system messages, indexes outside the batch and actors elsewhere, and batches cut
// short. Every one is refused, the process lives on, and a proper message still arrives, stamped
// with its sender.
func TestHostilePeersCannotCrashTheEndpoint(t *testing.T) {
	addr, _, lines, exited, _ := echoServer(t, Options{Insecure: true})

	remotingtest.StrayBytes(t, addr)
	client := remotingtest.Dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := client.ListProcesses(ctx, &remote.ListProcessesRequest{Pattern: ".*"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("ListProcesses: %v", err)
	}
	if _, err := client.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{Pid: &actor.PID{Address: addr, Id: "echo"}}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetProcessDiagnostics: %v", err)
	}
	refused := func(name string, msg *remote.RemoteMessage) {
		t.Helper()
		if err := remotingtest.Send(client, msg, 5*time.Second); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: the stream ended with %v, not a refusal", name, err)
		}
	}
	refused("empty connect request", &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{}})
	refused("client connection", &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
		ConnectionType: &remote.ConnectRequest_ClientConnection{ClientConnection: &remote.ClientConnection{SystemId: "x"}}}}})
	refused("no message", &remote.RemoteMessage{})
	for name, batch := range remotingtest.HostileBatches(addr, "echo") {
		if !strings.HasPrefix(name, "nil ") {
			refused(name, remotingtest.Batch(batch))
		}
	}

	for i, err := range remotingtest.Truncated(t, addr, remotingtest.Envelope(addr, "echo", protocol.Wrap(&protocol.Bye{}))) {
		if err == nil || status.Code(err) == codes.Unavailable {
			t.Fatalf("truncated batch %d: the stream ended with %v", i, err)
		}
	}

	// A proper message still arrives, with the sender the endpoint saw, not the one it claimed.
	msg := remotingtest.Envelope(addr, "echo", protocol.Wrap(&protocol.Bye{}))
	forged := protocol.Peer{Addr: "forged", Verified: true}.Encode()
	msg.GetMessageBatch().Envelopes[0].MessageHeader = &remote.MessageHeader{HeaderData: map[string]string{protocol.PeerHeader: forged}}
	if err := remotingtest.Send(client, msg, time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, "got bye remote=true from 127.0.0.1:") {
			t.Fatalf("the echo actor printed %q", line)
		}
	case err := <-exited:
		t.Fatalf("the endpoint's process ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the proper message did not arrive")
	}
}

// TestAGracefulShutdownWhileMessagesArrive: an endpoint shut down gracefully while a peer's
// stream keeps sending ends cleanly, its process free of data races (Proto.Actor marks its
// stream reader suspended without a lock; the streams end first).
func TestAGracefulShutdownWhileMessagesArrive(t *testing.T) {
	// Streams ending at the moment the endpoint stops are a matter of scheduling: many streams
	// over several rounds give it many chances.
	for round := range 10 {
		addr, _, lines, exited, stop := echoServer(t, Options{Insecure: true}, envGraceful+"=1")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		client := remotingtest.Dial(t, addr)
		msg := remotingtest.Envelope(addr, "echo", protocol.Wrap(&protocol.Bye{}))
		var sending sync.WaitGroup
		for range 12 {
			stream, err := client.Receive(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// More messages than gRPC's window holds: once they are sent, the endpoint has read
			// some, and reads more as the endpoint stops.
			for range 500 {
				if err := stream.Send(msg); err != nil {
					t.Fatal(err)
				}
			}
			sending.Go(func() {
				for i := 0; i < 100000 && stream.Send(msg) == nil; i++ {
				}
			})
		}
		stop()
		select {
		case err := <-exited:
			if !strings.HasPrefix(err.Error(), "<nil>: ") {
				t.Fatalf("round %d: the endpoint's process ended with %v", round, err)
			}
		case line := <-lines:
			t.Fatalf("round %d: the endpoint printed %q", round, line)
		case <-time.After(time.Minute):
			t.Fatalf("round %d: the endpoint's process did not end", round)
		}
		cancel()
		sending.Wait()
	}
}

var stamp = &remote.MessageHeader{HeaderData: map[string]string{protocol.PeerHeader: "x"}}

// TestGuardChecksEveryBatch: the checks alone, without a network.
func TestGuardChecksEveryBatch(t *testing.T) {
	system := newSystem()
	system.ProcessRegistry.Address = "127.0.0.1:7947"
	g := newGuard(system, Options{Actors: []string{"echo"}})
	for name, batch := range remotingtest.HostileBatches(system.ProcessRegistry.Address, "echo") {
		if err := g.check(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: batch}}, stamp); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := &remote.MessageBatch{
		TypeNames: []string{string(proto.MessageName(&actor.DeadLetterResponse{}))},
		Targets:   []*actor.PID{{Address: system.ProcessRegistry.Address, Id: "future$1a"}},
		Senders:   []*actor.PID{{Address: "127.0.0.1:1", Id: "x"}},
		Envelopes: []*remote.MessageEnvelope{{Sender: 1}},
	}
	if err := g.check(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: ok}}, stamp); err != nil {
		t.Fatalf("an answer to a request: %v", err)
	}
	if got := ok.Envelopes[0].MessageHeader; got != stamp {
		t.Fatalf("header %v", got)
	}
}

// FuzzGuard: whatever bytes arrive, a message the guard lets through is one Proto.Actor's
// endpoint reader can take without a panic: every index it follows is inside the batch and the
// type it deserializes is known.
func FuzzGuard(f *testing.F) {
	system := newSystem()
	system.ProcessRegistry.Address = "127.0.0.1:7947"
	g := newGuard(system, Options{Actors: []string{"echo"}})
	for _, b := range remotingtest.HostileBatches(system.ProcessRegistry.Address, "echo") {
		raw, _ := proto.Marshal(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}})
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var msg remote.RemoteMessage
		if proto.Unmarshal(raw, &msg) != nil {
			return
		}
		if g.check(&msg, stamp) != nil {
			return
		}
		b := msg.GetMessageBatch()
		if b == nil {
			return
		}
		for _, e := range b.Envelopes {
			_ = b.Targets[e.Target].Id
			if e.Sender > 0 {
				_ = b.Senders[e.Sender-1].Id
			}
			remote.Deserialize(e.MessageData, b.TypeNames[e.TypeId], e.SerializerId)
		}
	})
}
