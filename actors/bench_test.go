package actors_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/protocol"
)

// BenchmarkGatewayHeartbeat: one heartbeat of one of 1,000 welcomed nodes, through the gateway
// and the node's actor to its answer, as it arrives from the network (with the sender the actors
// endpoint stamps). The coordinator's share of BenchmarkClusterHeartbeats without the network.
func BenchmarkGatewayHeartbeat(b *testing.B) {
	f := newFixture(b, actors.Config{NodeLease: time.Hour})
	const nodes = 1000
	var ns []*testNode
	for i := range nodes {
		ns = append(ns, f.attachTestNode(fmt.Sprintf("n%d", i), 1))
	}
	system := f.coord.ActorSystem()
	var answered atomic.Int64
	all := make(chan struct{})
	var want int64
	sink := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*protocol.Envelope); ok && answered.Add(1) == want {
			close(all)
		}
	}))
	header := map[string]string{protocol.PeerHeader: protocol.Peer{Addr: "10.0.0.2:40000", Verified: true,
		Identity: certs.Identity{Role: certs.RoleNode, Fingerprint: "ab12"}}.Encode()}
	want = int64(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		n := ns[i%nodes]
		hb := &protocol.Heartbeat{Sender: protocol.Sender{NodeID: n.id, Session: n.session}, Incarnation: "1"}
		system.Root.Send(f.coord.NodeGateway(), &actor.MessageEnvelope{Header: header, Message: protocol.Wrap(hb), Sender: sink})
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		b.Fatalf("%d of %d heartbeats answered", answered.Load(), b.N)
	}
}
