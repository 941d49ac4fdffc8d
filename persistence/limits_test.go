package persistence

import (
	"errors"
	"reflect"
	"testing"

	"github.com/oklog/ulid/v2"
)

// TestQueueEntriesKeepPoolAndLimits: an entry comes back from its bytes with its pool and limits,
// and an entry written before them (its bytes end after the avoided nodes) reads without.
func TestQueueEntriesKeepPoolAndLimits(t *testing.T) {
	id := ulid.Make()
	for _, e := range []QueueEntry{
		{JobID: id, TeamID: ulid.Make(), Priority: -3, Engine: "ae2026", Tags: []string{"a"}, Avoid: []string{"n1"}, Pool: "gpu", Limits: []string{"ae-licences", "plugin"}},
		{JobID: id, TeamID: ulid.Make(), Engine: "lottie", Limits: []string{"x"}},
		{JobID: id, TeamID: ulid.Make(), Engine: "lottie", Pool: "4k"},
		{JobID: id, TeamID: ulid.Make(), Engine: "lottie"},
	} {
		raw := encodeQueueEntry(e)
		got, err := decodeQueueEntry(id, raw)
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip of %+v: %+v, %v", e, got, err)
		}
		if e.Pool == "" && len(e.Limits) == 0 && len(raw) != len(encodeQueueEntry(QueueEntry{TeamID: e.TeamID, Engine: e.Engine})) {
			t.Fatal("an entry without pool or limits is not written as before them")
		}
	}
}

// TestLimitsArePutChangedAndDeleted: the farm's limits, by name.
func TestLimitsArePutChangedAndDeleted(t *testing.T) {
	s := openTestStore(t, "")
	for _, c := range []Command{&PutLimit{At: testNow, Name: "ae-licences", Count: 4}, &PutLimit{At: testNow, Name: "gpu-plugin", Count: 1},
		&PutLimit{At: testNow, Name: "ae-licences", Count: 6}} {
		if err := s.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Limits()
	if err != nil || len(all) != 2 || all[0].Name != "ae-licences" || all[0].Count != 6 || all[1].Count != 1 {
		t.Fatalf("limits %+v, %v", all, err)
	}
	del := &DeleteLimit{Name: "gpu-plugin"}
	if err := s.Apply(del); err != nil || del.Deleted == nil || del.Deleted.Count != 1 {
		t.Fatalf("delete: %v %+v", err, del.Deleted)
	}
	if err := s.Apply(&DeleteLimit{Name: "gpu-plugin"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
}
