package protocol

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// SchemaVersion is the version of the payloads this build writes. Payloads are JSON: a newer
// peer's extra fields are ignored, a missing field takes its zero value. Version 2: a hello
// answers a challenge, messages to nodes carry the session, results are acknowledged once
// durable; nodes of version 1 cannot join a coordinator of version 2.
const SchemaVersion = 2

// MaxPayloadBytes caps an envelope's payload; a bigger one is refused unread.
const MaxPayloadBytes = 8 << 20

// kinds maps each message kind to its type, names each type to its kind.
var (
	kinds = map[string]reflect.Type{}
	names = map[reflect.Type]string{}
)

func register[T any](kind string) {
	kinds[kind] = reflect.TypeFor[T]()
	names[reflect.TypeFor[T]()] = kind
}

func init() {
	register[Hello]("hello")
	register[Challenge]("challenge")
	register[Welcome]("welcome")
	register[Heartbeat]("heartbeat")
	register[HeartbeatAck]("heartbeat-ack")
	register[Assign]("assign")
	register[Progress]("progress")
	register[Done]("done")
	register[Failed]("failed")
	register[FinalAck]("final-ack")
	register[Abandon]("abandon")
	register[Drain]("drain")
	register[Bye]("bye")
	register[UploadRequest]("upload-request")
	register[UploadPlan]("upload-plan")
	register[Ack]("ack")
	register[Error]("error")
	register[SelfTest]("self-test")
	register[SelfTested]("self-tested")
}

// kindOf names a message's kind; it panics on a type that is not a protocol message, which is
// a programming error, never input.
func kindOf(msg any) string {
	t := reflect.TypeOf(msg)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if kind, ok := names[t]; ok {
		return kind
	}
	panic(fmt.Sprintf("protocol: %T is not a protocol message", msg))
}

// Wrap puts a message (a pointer to one of this package's message types) in an envelope.
func Wrap(msg any) *Envelope {
	payload, err := json.Marshal(msg)
	if err != nil {
		panic(fmt.Sprintf("protocol: %T does not encode: %v", msg, err))
	}
	return &Envelope{Kind: kindOf(msg), Version: SchemaVersion, Payload: payload}
}

// ErrUnknownKind is returned for an envelope whose kind this build does not know (a newer
// peer's message): the receiver answers with an Error and carries on.
var ErrUnknownKind = errors.New("unknown message kind")

// Open returns the message an envelope carries, as a pointer to its type.
func Open(env *Envelope) (any, error) {
	if env == nil {
		return nil, errors.New("empty envelope")
	}
	t, ok := kinds[env.Kind]
	if !ok {
		return nil, fmt.Errorf("%w %q (schema version %d)", ErrUnknownKind, env.Kind, env.Version)
	}
	if len(env.Payload) > MaxPayloadBytes {
		return nil, fmt.Errorf("%s payload of %d bytes is over the %d byte limit", env.Kind, len(env.Payload), MaxPayloadBytes)
	}
	msg := reflect.New(t).Interface()
	if err := json.Unmarshal(env.Payload, msg); err != nil {
		return nil, fmt.Errorf("%s payload: %w", env.Kind, err)
	}
	return msg, nil
}

// HelloProof proves a hello comes from a holder of the cluster key and answers the
// coordinator's challenge nonce. It binds the node's id, incarnation and actor address, so a
// recorded hello proves nothing for another challenge, another run of the node or another
// address. An empty key (a coordinator running alone) gives an empty proof.
func HelloProof(key []byte, nonce string, h *Hello) string {
	return mac(key, "framefarm hello v2", nonce, h.NodeID, h.Incarnation, h.AgentAddress, h.AgentID)
}

// CheckHelloProof reports whether a hello carries the proof of key for its nonce.
func CheckHelloProof(key []byte, h *Hello) bool {
	return hmac.Equal([]byte(HelloProof(key, h.Nonce, h)), []byte(h.KeyProof))
}

// WelcomeProof proves a welcome comes from a holder of the cluster key and answers the node's
// hello of that nonce, with that session.
func WelcomeProof(key []byte, nonce, nodeID, session string) string {
	return mac(key, "framefarm welcome v2", nonce, nodeID, session)
}

// CheckWelcomeProof reports whether a welcome carries the proof of key for the node.
func CheckWelcomeProof(key []byte, nodeID string, w *Welcome) bool {
	return hmac.Equal([]byte(WelcomeProof(key, w.Nonce, nodeID, w.Session)), []byte(w.Proof))
}

// mac is the HMAC-SHA256 of a purpose and fields, each length-prefixed so no two lists of
// fields write the same bytes.
func mac(key []byte, purpose string, fields ...string) string {
	if len(key) == 0 {
		return ""
	}
	m := hmac.New(sha256.New, key)
	for _, f := range append([]string{purpose}, fields...) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		m.Write(n[:])
		m.Write([]byte(f))
	}
	return hex.EncodeToString(m.Sum(nil))
}
