package protocol

import (
	"encoding/json"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/cluster/certs"
)

// PeerHeader is the message header in which the receiving process's actors endpoint
// (cluster/remoting) writes who sent a message that crossed the network. The endpoint
// overwrites whatever a sender put there, so only the receiver's word is read.
const PeerHeader = "framefarm-peer"

// Peer is the sender of a message that crossed the network.
type Peer struct {
	// Addr is the address the connection came from.
	Addr string `json:"addr"`
	// Verified is true when the sender showed a certificate of the farm's CA; Identity is then
	// what it names.
	Verified bool           `json:"verified,omitempty"`
	Identity certs.Identity `json:"identity"`
}

// Encode is the header value of a peer.
func (p Peer) Encode() string {
	raw, err := json.Marshal(p)
	if err != nil {
		panic(err) // plain strings always encode
	}
	return string(raw)
}

// Key names the peer for binding a challenge to it: its certificate when it showed one, else
// the address it came from.
func (p Peer) Key() string {
	if p.Verified {
		return "cert:" + p.Identity.Fingerprint
	}
	return "addr:" + p.Addr
}

// PeerOf tells who sent the message ctx holds: remote is false for a message sent inside this
// process (which carries no peer header).
func PeerOf(ctx actor.Context) (p Peer, remote bool) {
	h := ctx.MessageHeader()
	if h == nil {
		return Peer{}, false
	}
	value := h.Get(PeerHeader)
	if value == "" {
		return Peer{}, false
	}
	return peers.read(value), true
}

// peers keeps the peers of recent header values decoded: every message of a connection carries
// the same one, and decoding it for each would cost more than the rest of a heartbeat.
var peers = peerCache{decoded: make(map[string]Peer)}

type peerCache struct {
	mu      sync.Mutex
	decoded map[string]Peer
}

// maxCachedPeers bounds the cache; connections come and go, so it starts over when full.
const maxCachedPeers = 4096

func (c *peerCache) read(value string) Peer {
	c.mu.Lock()
	p, ok := c.decoded[value]
	c.mu.Unlock()
	if ok {
		return p
	}
	if err := json.Unmarshal([]byte(value), &p); err != nil {
		// Only the endpoint writes this header; an unreadable one is treated as a stranger.
		return Peer{Addr: "unreadable peer header"}
	}
	c.mu.Lock()
	if len(c.decoded) >= maxCachedPeers {
		clear(c.decoded)
	}
	c.decoded[value] = p
	c.mu.Unlock()
	return p
}

// Describe names a message's sender for logs.
func (p Peer) Describe() string {
	if p.Verified {
		return p.Identity.String() + " at " + p.Addr
	}
	return p.Addr + " (no certificate)"
}
