package persistence

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/framefarm/framefarm/renderer"
)

// TestReplayedCommandsWriteTheSameRecords: every kind of command, encoded before it is applied
// (as a log shipped to another machine would carry it), then decoded and applied to a second
// store, leaves both stores with the same keys and values in every bucket.
func TestReplayedCommandsWriteTheSameRecords(t *testing.T) {
	commands := everyCommand()
	first := openTestStore(t, filepath.Join(t.TempDir(), "a.db"))
	second := openTestStore(t, filepath.Join(t.TempDir(), "b.db"))
	for i, c := range commands {
		wire, err := EncodeCommand(c)
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		if err := first.Apply(c); err != nil {
			t.Fatalf("command %d (%T): %v", i, c, err)
		}
		replayed, err := DecodeCommand(wire)
		if err != nil {
			t.Fatalf("command %d: %v", i, err)
		}
		if err := second.Apply(replayed); err != nil {
			t.Fatalf("replayed command %d (%T): %v", i, replayed, err)
		}
	}
	if removed := commands[len(commands)-2].(*RemoveExpired).Removal; len(removed.Jobs) != 1 {
		t.Fatalf("retention removed %d jobs, want the finished one", len(removed.Jobs))
	}
	sameRecords(t, first, second)
}

// sameRecords fails t unless two stores hold the same keys and values in every bucket.
func sameRecords(t *testing.T, first, second *Store) {
	t.Helper()
	a, b := storeDump(t, first), storeDump(t, second)
	if len(a) == 0 || !reflect.DeepEqual(a, b) {
		for k, v := range a {
			if b[k] != v {
				t.Errorf("%q: %q on the first store, %q on the second", k, v, b[k])
			}
		}
		t.Fatalf("the stores differ (%d and %d records)", len(a), len(b))
	}
}

// everyCommand is one command of every kind, in an order a fresh store applies without error;
// the one before last is a RemoveExpired that removes one job.
func everyCommand() []Command {
	ids := NewIDs()
	at := func(min int) time.Time { return testNow.Add(time.Duration(min) * time.Minute) }
	team, tpl, batch := ids.New(at(0)), ids.New(at(0)), ids.New(at(0))
	parent, child, single := ids.New(at(1)), ids.New(at(1)), ids.New(at(1))
	font, secret, delivery := ids.New(at(2)), ids.New(at(2)), ids.New(at(2))
	webhook := &Webhook{URL: "https://example.com/hook?t=${secret.tok}", Headers: map[string]string{"B": "2", "A": "1"},
		Data: json.RawMessage(`{ "tag" : "<b>&</b>" }`)}
	jobs := []*Job{
		{ID: parent, TeamID: team, Kind: KindJoin, State: JobPending, Children: []ulid.ULID{child}, BatchID: batch,
			Engine: "ffmpeg", CreatedAt: at(1), OutputName: "p.mp4", Spec: JobSpec{Webhook: webhook}},
		{ID: child, TeamID: team, Kind: KindRender, TemplateID: tpl, State: JobQueued, ParentID: parent, Depth: 1,
			BatchID: batch, Engine: "lottie", Tags: []string{"x"}, CreatedAt: at(1), OutputName: "c.mp4",
			Spec: JobSpec{Assets: []renderer.Asset{{Type: "text", LayerName: "T", Value: json.RawMessage(` "héllo <you>" `)}}}},
	}
	singleJob := &Job{ID: single, TeamID: team, Kind: KindRender, TemplateID: tpl, State: JobQueued, Engine: "lottie",
		Priority: 4, CreatedAt: at(1), OutputName: "s.png", Spec: JobSpec{Webhook: webhook}}
	dispatched := *singleJob
	dispatched.State, dispatched.Attempts, dispatched.Node = JobRendering, 1, "n1"
	finished := dispatched
	finished.State, finished.FinishedAt, finished.Progress = JobFinished, at(3), 100
	d := &Delivery{ID: delivery, JobID: single, TeamID: team, NextAt: at(3), CreatedAt: at(3)}
	retry := *d
	retry.Attempt, retry.LastError, retry.NextAt = 1, "503", at(4)
	return []Command{
		&IssueToken{At: at(0), TeamName: "acme", NewTeamID: team, WebhookSecret: "ab", TokenHash: [32]byte{1, 2}},
		&IssueToken{At: at(0), TeamName: "acme", TokenHash: [32]byte{3, 4}, ExpiresAt: at(9)},
		&RevokeToken{TokenID: "0304000000000000"},
		&CreateTeam{At: at(0), Name: "render", NewTeamID: ids.New(at(0)), WebhookSecret: "cd"},
		&PutTemplate{Template: &Template{ID: tpl, TeamID: team, Type: "zip", DisplayName: "t", Status: TemplateUploaded, CreatedAt: at(0), UpdatedAt: at(0)}},
		&CreateJobs{At: at(1), Batch: &Batch{ID: batch, TeamID: team, Total: 1, Jobs: []BatchEntry{{0, parent}}, CreatedAt: at(1)}, Jobs: jobs},
		&CreateJobs{At: at(1), Jobs: []*Job{singleJob}, Remember: &Answer{TeamID: team, Key: "k1", RequestHash: "h", Status: 201, Body: []byte(`{"id":"x"}`)}},
		&ChangeJob{At: at(2), Prev: JobQueued, Job: &dispatched, Log: []string{"dispatched to node n1 (attempt 1)"}},
		&AppendJobLog{At: at(2), JobID: single, Lines: []string{"a stale report"}},
		&RecordWaits{At: at(2), Changes: []WaitChange{{Subject: "ae2026", Reason: "no render node offers it"}, {Subject: "lottie"}}},
		&ChangeJob{At: at(3), Prev: JobRendering, Job: &finished, Log: []string{"frame 1", "finished"}, LogAt: []time.Time{at(2).Add(time.Second)}, Delivery: d},
		&RecordDelivery{At: at(4), JobID: single, Retry: &retry, Line: "webhook attempt 1 failed"},
		&RecordDelivery{At: at(5), JobID: single, Done: delivery, Line: "webhook delivered"},
		&SetMeta{Name: "node_hold/n1", Value: "quarantined"},
		&CreateFont{Font: &Font{ID: font, TeamID: team, FamilyName: "F", PostScriptName: "F-Regular", FileName: "f.ttf", CreatedAt: at(2)}},
		&DeleteFont{TeamID: team, FontID: font},
		&CreateSecret{Secret: &Secret{ID: secret, TeamID: team, Name: "tok", Ciphertext: []byte{9, 9}, CreatedAt: at(2)}},
		&DeleteSecret{TeamID: team, SecretID: secret},
		&RemoveExpired{Cutoff: at(10), Max: 10},
		&ForgetAnswers{Before: at(0), Max: 10},
	}
}

// storeDump reads every bucket's keys and values.
func storeDump(t *testing.T, s *Store) map[string]string {
	out := map[string]string{}
	err := s.db.Load().View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				out[string(name)+"/"+string(k)] = string(v)
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAnIdempotencyKeyAnswersForADay: a creation with a key answered within AnswerTTL creates
// nothing and returns that answer; after it, the key is free, and ForgetAnswers removes it.
func TestAnIdempotencyKeyAnswersForADay(t *testing.T) {
	s := openTestStore(t, "")
	ids := NewIDs()
	team := ids.New(testNow)
	create := func(at time.Time) error {
		j := &Job{ID: ids.New(at), TeamID: team, State: JobQueued, Engine: "lottie", CreatedAt: at}
		return s.Apply(&CreateJobs{At: at, Jobs: []*Job{j}, Remember: &Answer{TeamID: team, Key: "k", RequestHash: "h", Status: 201, Body: []byte("first")}})
	}
	if err := create(testNow); err != nil {
		t.Fatal(err)
	}
	var answered *AnsweredError
	if err := create(testNow.Add(23 * time.Hour)); !errors.As(err, &answered) || string(answered.Answer.Body) != "first" {
		t.Fatalf("within a day: %v", err)
	}
	if err := create(testNow.Add(25 * time.Hour)); err != nil {
		t.Fatalf("after a day: %v", err)
	}
	forget := &ForgetAnswers{Before: testNow.Add(50 * time.Hour), Max: 10}
	if err := s.Apply(forget); err != nil || forget.Forgotten != 1 || forget.Next != nil {
		t.Fatalf("forget: %+v, %v", forget, err)
	}
	var total int
	s.view(func(tx *txn) error { total = tx.JobCount(team, JobQueued); return nil })
	if total != 2 {
		t.Fatalf("%d jobs, want 2 (the retry within the day made none)", total)
	}
}

// TestEveryResultReachesItsWriter: a command with result fields (json:"-", filled in when it is
// applied) copies them from the command a replica applied, which is decoded from its entry, to
// the writer's (resulting): one without would leave its writer a zero result on replicas only.
func TestEveryResultReachesItsWriter(t *testing.T) {
	for kind, typ := range commandKinds {
		results := false
		for i := range typ.NumField() {
			f := typ.Field(i)
			results = results || (f.IsExported() && f.Tag.Get("json") == "-")
		}
		_, adopts := reflect.New(typ).Interface().(resulting)
		if results && !adopts {
			t.Errorf("%s has result fields but does not adopt them from the command applied", kind)
		}
	}
}
