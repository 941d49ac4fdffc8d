package protocol

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// TestEveryKindRoundTrips: each message survives Wrap, the protobuf wire form, and Open.
func TestEveryKindRoundTrips(t *testing.T) {
	msgs := []any{
		&Hello{NodeID: "n1", AgentAddress: "10.0.0.2:7947", AgentID: "framefarm-agent", Incarnation: "i", Engines: []string{"lottie"}, Slots: 2,
			Running: []AttemptStatus{{JobID: "j", Attempt: 2, Percent: 40}}, KeyProof: KeyProof([]byte("k"), "n1")},
		&Welcome{Accepted: true, HeartbeatInterval: time.Second, Lease: 5 * time.Second},
		&Heartbeat{Sender: Sender{NodeID: "n1", Session: "s"}, Incarnation: "i", Seq: 7},
		&HeartbeatAck{Known: true, Abandon: []Abandon{{JobID: "j", Attempt: 1, Reason: "stale"}}},
		&Assign{Seq: 7, JobID: "j", Attempt: 3, Task: Task{Engine: "lottie", Output: Output{Name: "out.mp4", PutURL: "http://x/y"}}},
		&Progress{Sender: Sender{NodeID: "n1", Session: "s"}, JobID: "j", Attempt: 3, Percent: 12.5},
		&Done{Sender: Sender{NodeID: "n1", Session: "s"}, JobID: "j", Attempt: 3, Duration: time.Minute, Log: []string{"ok"}},
		&Failed{Sender: Sender{NodeID: "n1", Session: "s"}, JobID: "j", Attempt: 3, Error: "boom", Retryable: true, NotStarted: true},
		&FinalAck{JobID: "j", Attempt: 3},
		&Abandon{JobID: "j", Attempt: 3, Reason: "withdrawn"},
		&Drain{Sender: Sender{NodeID: "n1"}},
		&Bye{Sender: Sender{NodeID: "n1"}},
		&Ack{Kind: "bye"},
		&Error{Kind: "x", Message: "unknown"},
	}
	if len(msgs) != len(kinds) {
		t.Fatalf("%d kinds registered, %d tested", len(kinds), len(msgs))
	}
	for _, m := range msgs {
		wire, err := proto.Marshal(Wrap(m))
		if err != nil {
			t.Fatal(err)
		}
		var env Envelope
		if err := proto.Unmarshal(wire, &env); err != nil {
			t.Fatal(err)
		}
		got, err := Open(&env)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("%T: got %+v, want %+v", m, got, m)
		}
	}
}

// TestNewerPeers: an unknown kind is an error the receiver can answer; fields a newer peer
// added are ignored.
func TestNewerPeers(t *testing.T) {
	_, err := Open(&Envelope{Kind: "gpu-stats", Version: 2, Payload: []byte(`{}`)})
	if !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("unknown kind: %v", err)
	}
	got, err := Open(&Envelope{Kind: "bye", Version: 2, Payload: []byte(`{"nodeId":"n1","reason":"upgrade"}`)})
	if err != nil || got.(*Bye).NodeID != "n1" {
		t.Fatalf("newer bye: %+v %v", got, err)
	}
	if _, err := Open(&Envelope{Kind: "bye", Payload: make([]byte, MaxPayloadBytes+1)}); err == nil {
		t.Fatal("an oversized payload was opened")
	}
}

func TestKeyProof(t *testing.T) {
	key := []byte("0123456789abcdef")
	if !CheckKeyProof(key, "n1", KeyProof(key, "n1")) || CheckKeyProof(key, "n2", KeyProof(key, "n1")) ||
		CheckKeyProof(key, "n1", KeyProof([]byte("another key"), "n1")) || CheckKeyProof(key, "n1", "") {
		t.Fatal("key proofs do not bind key and node")
	}
	if !CheckKeyProof(nil, "n1", "") {
		t.Fatal("a coordinator without a key asks no proof")
	}
}

// FuzzOpen: no envelope, however malformed, panics the receiver.
func FuzzOpen(f *testing.F) {
	f.Add("hello", []byte(`{"nodeId":"n1","slots":2}`))
	f.Add("assign", []byte(`{"task":{"assets":[{"type":"image"}]}}`))
	f.Add("heartbeat", []byte(`{"running":[{"jobId":1}]}`))
	f.Add("nope", []byte(`null`))
	f.Fuzz(func(t *testing.T, kind string, payload []byte) {
		msg, err := Open(&Envelope{Kind: kind, Version: 1, Payload: payload})
		if err == nil && msg == nil {
			t.Fatal("no message and no error")
		}
	})
}
