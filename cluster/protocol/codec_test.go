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
			Running: []AttemptStatus{{JobID: "j", Attempt: 2, Percent: 40}}, Nonce: "c", KeyProof: "p"},
		&Challenge{Nonce: "c"},
		&Welcome{Accepted: true, Session: "s", Nonce: "c", Proof: "p", InternalURL: "http://10.0.0.1:8080/files/", HeartbeatInterval: time.Second, Lease: 5 * time.Second},
		&Heartbeat{Sender: Sender{NodeID: "n1", Session: "s"}, Incarnation: "i", Seq: 7},
		&HeartbeatAck{Known: true, Abandon: []Abandon{{JobID: "j", Attempt: 1, Reason: "stale"}}},
		&Assign{Session: "s", Seq: 7, JobID: "j", Attempt: 3, Task: Task{Engine: "lottie", Output: Output{Name: "out.mp4", PutURL: "http://x/y", PartSize: 5 << 20}}},
		&Progress{Sender: Sender{NodeID: "n1", Session: "s"}, JobID: "j", Attempt: 3, Percent: 12.5},
		&Done{Sender: Sender{NodeID: "n1", Session: "s"}, JobID: "j", Attempt: 3, Duration: time.Minute, Log: []string{"ok"},
			Output: &OutputReport{Size: 9, SHA256: "ab", UploadID: "u", ETags: []string{"e1", "e2"}}},
		&Failed{Sender: Sender{NodeID: "n1", Session: "s"}, JobID: "j", Attempt: 3, Error: "boom", Retryable: true, NotStarted: true, Fault: FaultFarm},
		&UploadRequest{Sender: Sender{NodeID: "n1", Session: "s"}, JobID: "j", Attempt: 3, Name: "out.mp4", Size: 9, SHA256: "ab", PartMD5: []string{"m"}},
		&UploadPlan{UploadID: "u", Parts: []PartTarget{{URL: "http://bucket/x", Header: map[string]string{"Content-Md5": "m"}}}},
		&FinalAck{JobID: "j", Attempt: 3},
		&Abandon{Session: "s", JobID: "j", Attempt: 3, Reason: "withdrawn"},
		&Drain{Sender: Sender{NodeID: "n1"}},
		&Bye{Sender: Sender{NodeID: "n1"}},
		&SelfTest{Session: "s", Engines: []string{"ffmpeg", "lottie"}},
		&SelfTested{Sender: Sender{NodeID: "n1", Session: "s"}, Passed: false, Error: "ffmpeg's self-test encode failed"},
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

// TestProofs: a hello's proof binds the key, the challenge, and the node's id, incarnation and
// address; a welcome's binds the key, the challenge, the node and the session.
func TestProofs(t *testing.T) {
	key := []byte("0123456789abcdef")
	hello := func(edit func(*Hello)) *Hello {
		h := &Hello{NodeID: "n1", Incarnation: "i1", AgentAddress: "10.0.0.2:7947", AgentID: "framefarm-agent", Nonce: "c1"}
		h.KeyProof = HelloProof(key, h.Nonce, h)
		if edit != nil {
			edit(h)
		}
		return h
	}
	if !CheckHelloProof(key, hello(nil)) {
		t.Fatal("a proper hello fails its check")
	}
	for name, edit := range map[string]func(*Hello){
		"another challenge":   func(h *Hello) { h.Nonce = "c2" },
		"another node":        func(h *Hello) { h.NodeID = "n2" },
		"another incarnation": func(h *Hello) { h.Incarnation = "i2" },
		"another address":     func(h *Hello) { h.AgentAddress = "10.0.0.3:7947" },
		"another actor":       func(h *Hello) { h.AgentID = "x" },
		"another key":         func(h *Hello) { h.KeyProof = HelloProof([]byte("another key 12345"), h.Nonce, h) },
		"no proof":            func(h *Hello) { h.KeyProof = "" },
	} {
		if CheckHelloProof(key, hello(edit)) {
			t.Errorf("%s: the proof still checks", name)
		}
	}
	w := &Welcome{Accepted: true, Session: "s1", Nonce: "c1"}
	w.Proof = WelcomeProof(key, w.Nonce, "n1", w.Session)
	if !CheckWelcomeProof(key, "n1", w) || CheckWelcomeProof(key, "n2", w) || CheckWelcomeProof([]byte("another key 12345"), "n1", w) {
		t.Fatal("welcome proofs do not bind key and node")
	}
	w.Session = "s2"
	if CheckWelcomeProof(key, "n1", w) {
		t.Fatal("a welcome's proof checks for another session")
	}
	if !CheckHelloProof(nil, &Hello{NodeID: "n1"}) {
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
