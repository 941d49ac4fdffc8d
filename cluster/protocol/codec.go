package protocol

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// SchemaVersion is the version of the payloads this build writes. Payloads are JSON: a newer
// peer's extra fields are ignored, a missing field takes its zero value.
const SchemaVersion = 1

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
	register[Ack]("ack")
	register[Error]("error")
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

// KeyProof proves knowledge of the cluster key for a node id without sending the key. An empty
// key (a coordinator running alone) gives an empty proof.
func KeyProof(key []byte, nodeID string) string {
	if len(key) == 0 {
		return ""
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("framefarm node hello\n" + nodeID))
	return hex.EncodeToString(mac.Sum(nil))
}

// CheckKeyProof reports whether proof was made with key for nodeID.
func CheckKeyProof(key []byte, nodeID, proof string) bool {
	return hmac.Equal([]byte(KeyProof(key, nodeID)), []byte(proof))
}
