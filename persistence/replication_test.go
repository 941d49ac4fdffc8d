package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// testLog is a replicated log in one process: it numbers each entry, applies it to every store
// in turn and answers with the first store's result, as a raft leader would. The first store,
// the proposing one, applies the commands it holds where it gave them; the others decode them.
type testLog struct {
	mu      sync.Mutex
	stores  []*Store
	entries []ReplicatedEntry
}

func (l *testLog) Propose(p Proposal) {
	entry, commands, done := p.Entry, p.Commands, p.Done
	l.mu.Lock()
	e := ReplicatedEntry{Index: uint64(len(l.entries) + 1), Data: entry}
	l.entries = append(l.entries, e)
	var result any
	for i, s := range l.stores {
		proposed := e
		if i == 0 {
			proposed.Commands = commands
		}
		applied, err := s.ApplyEntries([]ReplicatedEntry{proposed})
		if err != nil {
			l.mu.Unlock()
			done(nil, err)
			return
		}
		if i == 0 {
			result = applied[0]
		}
	}
	l.mu.Unlock()
	done(result, nil)
}

// heldLog is a replicated log of one store whose entries wait for the test to let them through.
type heldLog struct {
	store    *Store
	proposed chan heldEntry
	mu       sync.Mutex
	all      []heldEntry
	passing  bool // the test ended: every entry goes through at once
	applyMu  sync.Mutex
	last     uint64
}

// heldEntry is a proposed entry: how many commands it carries, and what applies it (once).
type heldEntry struct {
	commands int
	release  func()
	// committed tells the store the entry is committed (Proposal.Committed).
	committed func() (more bool)
}

func (l *heldLog) Propose(p Proposal) {
	entry, done := p.Entry, p.Done
	commands, err := decodeEntry(entry)
	if err != nil {
		done(nil, err)
		return
	}
	e := heldEntry{commands: len(commands), committed: p.Committed, release: sync.OnceFunc(func() {
		l.applyMu.Lock()
		defer l.applyMu.Unlock()
		l.last++
		results, err := l.store.ApplyEntries([]ReplicatedEntry{{Index: l.last, Data: entry}})
		if err != nil {
			done(nil, err)
			return
		}
		done(results[0], nil)
	})}
	l.mu.Lock()
	if l.passing {
		l.mu.Unlock()
		e.release()
		return
	}
	l.all = append(l.all, e)
	l.proposed <- e
	l.mu.Unlock()
}

// letThrough applies every entry held and lets the next ones through, so that the store can
// close however the test ended.
func (l *heldLog) letThrough() {
	l.mu.Lock()
	l.passing = true
	all := l.all
	l.mu.Unlock()
	for _, e := range all {
		e.release()
	}
}

// heldStore is a store replicated through a heldLog; waiting hears of each group that waits
// its turn.
func heldStore(t *testing.T) (s *Store, log *heldLog, waiting chan struct{}) {
	s = openTestStore(t, "")
	log = &heldLog{store: s, proposed: make(chan heldEntry, 8)}
	t.Cleanup(log.letThrough)
	waiting = make(chan struct{}, 8)
	s.awaitingTurn = func() { waiting <- struct{}{} }
	s.Replicate(log)
	return s, log, waiting
}

// TestSmallGroupsWaitTheirTurnAndBatchesDoNot: while an entry of single jobs is replicated, the
// single jobs that follow wait and go together in the next entry; a batch of jobs is proposed
// at once, beside it.
func TestSmallGroupsWaitTheirTurnAndBatchesDoNot(t *testing.T) {
	s, log, waiting := heldStore(t)
	ids := NewIDs()
	team, tpl, now := ids.New(time.Now()), ids.New(time.Now()), time.Now()
	var pending sync.WaitGroup
	submit := func(c Command) {
		pending.Add(1)
		s.ApplyAsync(c, func(err error) {
			if err != nil {
				t.Errorf("%T: %v", c, err)
			}
			pending.Done()
		})
	}
	jobs := func(n int) *CreateJobs {
		c := &CreateJobs{At: now}
		for range n {
			c.Jobs = append(c.Jobs, &Job{ID: ids.New(now), TeamID: team, Kind: KindRender, TemplateID: tpl, State: JobQueued,
				Engine: "lottie", CreatedAt: now, OutputName: "out.mp4"})
		}
		return c
	}
	entry := func(want int) heldEntry {
		t.Helper()
		select {
		case e := <-log.proposed:
			if e.commands != want {
				t.Fatalf("an entry of %d commands, want %d", e.commands, want)
			}
			return e
		case <-waiting:
			t.Fatalf("a group waited its turn instead of being proposed")
		}
		return heldEntry{}
	}

	submit(&PutTemplate{Template: &Template{ID: tpl, TeamID: team, Status: TemplateUploaded}})
	alone := entry(1)
	if alone.committed() {
		t.Fatal("an entry no group waited behind said another follows")
	}
	alone.release()
	pending.Wait()

	submit(jobs(1))
	first := entry(1)
	submit(jobs(1))
	select {
	case <-waiting:
	case <-log.proposed:
		t.Fatal("a single job was proposed while the entry before it was replicated")
	}
	submit(jobs(1))
	submit(jobs(1))
	if !first.committed() {
		t.Fatal("an entry a group waited behind did not say another follows")
	}
	first.release()
	second := entry(3)
	submit(jobs(wideGroup))
	entry(1).release()
	second.release()
	pending.Wait()
	if got := s.AppliedIndex(); got != 4 {
		t.Fatalf("applied index %d, want 4", got)
	}
}

// TestAGroupPastAnEntrysSizeGoesAsSeveral: writes that came together but would pass the size of
// one entry go as several, in their order, and the group's turn ends with the last; a single
// write larger than an entry is refused alone, and the log stays as it was.
func TestAGroupPastAnEntrysSizeGoesAsSeveral(t *testing.T) {
	s, log, waiting := heldStore(t)
	answered := make(chan error, 8)
	submit := func(name string, size int) {
		s.ApplyAsync(&SetMeta{Name: name, Value: strings.Repeat("x", size)}, func(err error) { answered <- err })
	}
	submit("first", 1)
	first := <-log.proposed
	submit("a", maxEntryBytes/2+1)
	<-waiting // gathered behind the first entry's turn, with the next
	submit("b", maxEntryBytes/2+1)
	submit("huge", maxEntryBytes+1)
	first.release()
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
	if err := <-answered; !errors.Is(err, ErrEntryTooLarge) {
		t.Fatalf("a write larger than an entry: %v", err)
	}
	for _, name := range []string{"a", "b"} {
		e := <-log.proposed
		if e.commands != 1 {
			t.Fatalf("an entry of %d commands, want the one that fits", e.commands)
		}
		e.release()
		if err := <-answered; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if got := s.AppliedIndex(); got != 3 {
		t.Fatalf("applied index %d, want 3", got)
	}
	if len(s.Meta("a")) != maxEntryBytes/2+1 || len(s.Meta("b")) != maxEntryBytes/2+1 || s.Meta("huge") != "" {
		t.Fatal("the records are not those of the writes that fit")
	}
}

// TestReplicasWriteTheSameRecords: every kind of command written through a replicated store
// reaches a second replica; both hold the same records at the same applied index, and the
// writer reads its command's results (what retention removed). The leader applies its job
// creations and changes as it holds them, the follower as it decodes them from their entries:
// with their times in a zone other than UTC as well, both write the same bytes, as a store alone
// does.
func TestReplicasWriteTheSameRecords(t *testing.T) {
	for _, zone := range []*time.Location{time.UTC, time.FixedZone("CEST", 2*3600)} {
		t.Run(zone.String(), func(t *testing.T) {
			leader, follower, alone := openTestStore(t, ""), openTestStore(t, ""), openTestStore(t, "")
			log := &testLog{stores: []*Store{leader, follower}}
			leader.Replicate(log)
			commands := everyCommand()
			for _, c := range commands {
				inZone(c, zone)
			}
			for i, c := range commands {
				wire, err := EncodeCommand(c)
				if err != nil {
					t.Fatal(err)
				}
				if err := leader.Apply(c); err != nil {
					t.Fatalf("command %d (%T): %v", i, c, err)
				}
				same, err := DecodeCommand(wire)
				if err != nil {
					t.Fatal(err)
				}
				if err := alone.Apply(same); err != nil {
					t.Fatalf("command %d (%T) on a store alone: %v", i, same, err)
				}
			}
			if removed := commands[len(commands)-2].(*RemoveExpired).Removal; len(removed.Jobs) != 1 {
				t.Fatalf("the writer read %d jobs removed, want the finished one", len(removed.Jobs))
			}
			if issued := commands[0].(*IssueToken); !issued.Created || issued.Team.Name != "acme" {
				t.Fatalf("the writer read the token's team as %+v (created %v)", issued.Team, issued.Created)
			}
			sameRecords(t, leader, follower)
			// The entries' forms write what the commands write on a store alone.
			replicated, direct := storeDump(t, leader), storeDump(t, alone)
			delete(replicated, "meta/"+metaAppliedIndex)
			if !reflect.DeepEqual(replicated, direct) {
				for k, v := range direct {
					if replicated[k] != v {
						t.Errorf("%q: %q alone, %q replicated", k, v, replicated[k])
					}
				}
				t.Fatalf("replicated records differ from those of a store alone (%d and %d)", len(replicated), len(direct))
			}
			if a, b := leader.AppliedIndex(), follower.AppliedIndex(); a != uint64(len(log.entries)) || b != a {
				t.Fatalf("applied indexes %d and %d, want %d", a, b, len(log.entries))
			}
		})
	}
}

// inZone moves the times of a job creation or change into zone, as a clock there gives them.
func inZone(c Command, zone *time.Location) {
	jobIn := func(j *Job) {
		j.CreatedAt, j.UpdatedAt, j.StartedAt = j.CreatedAt.In(zone), j.UpdatedAt.In(zone), j.StartedAt.In(zone)
	}
	switch c := c.(type) {
	case *CreateJobs:
		c.At = c.At.In(zone)
		if c.Batch != nil {
			c.Batch.CreatedAt = c.Batch.CreatedAt.In(zone)
		}
		for _, j := range c.Jobs {
			jobIn(j)
		}
	case *ChangeJob:
		c.At = c.At.In(zone)
		jobIn(c.Job)
		if c.Delivery != nil {
			c.Delivery.NextAt, c.Delivery.CreatedAt = c.Delivery.NextAt.In(zone), c.Delivery.CreatedAt.In(zone)
		}
	}
}

// TestAnEntryFailsTheSameCommandsEverywhere: a command that fails inside an entry is answered
// with its error on every replica, and the entry's other commands are applied.
func TestAnEntryFailsTheSameCommandsEverywhere(t *testing.T) {
	commands := everyCommand()
	// The token is issued, the template put, and a font deleted that no replica has.
	group := []Command{commands[0], &DeleteFont{TeamID: NewIDs().New(testNow), FontID: NewIDs().New(testNow)}, commands[3]}
	entry, err := encodeEntry(group)
	if err != nil {
		t.Fatal(err)
	}
	first, second := openTestStore(t, ""), openTestStore(t, "")
	for _, s := range []*Store{first, second} {
		results, err := s.ApplyEntries([]ReplicatedEntry{{Index: 7, Data: entry}})
		if err != nil {
			t.Fatal(err)
		}
		errs := results[0].Errs
		if errs[0] != nil || !errors.Is(errs[1], ErrNotFound) || errs[2] != nil {
			t.Fatalf("errors %v, want only the missing font's", errs)
		}
		if s.AppliedIndex() != 7 {
			t.Fatalf("applied index %d", s.AppliedIndex())
		}
	}
	sameRecords(t, first, second)

	// The log replayed from the start changes nothing: the entry is at the applied index.
	before := storeDump(t, first)
	results, err := first.ApplyEntries([]ReplicatedEntry{{Index: 7, Data: entry}})
	if err != nil || results[0] != nil {
		t.Fatalf("a replayed entry: %v, %v", results, err)
	}
	if after := storeDump(t, first); len(after) != len(before) || after["teams/"+string(id(commands[0].(*IssueToken).NewTeamID))] == "" {
		t.Fatal("a replayed entry changed the records")
	}
}

// TestAReplicaRefusesWhatItCannotRead: an entry with a command kind this build does not know, or
// of another layout, is an error naming the cure, never skipped; nothing is applied.
func TestAReplicaRefusesWhatItCannotRead(t *testing.T) {
	s := openTestStore(t, "")
	future := []byte(`{"kind":"SplitJob","command":{}}`)
	unknownKind := append([]byte{entryVersion, 1, formJSON, byte(len(future))}, future...)
	unknownForm := []byte{entryVersion, 1, 9, 0}
	for _, e := range [][]byte{unknownKind, unknownForm, {9, 0}, {entryVersion, 5}} {
		_, err := s.ApplyEntries([]ReplicatedEntry{{Index: 1, Data: e}})
		if err == nil || e[0] == 9 && !strings.Contains(err.Error(), "upgrade this replica") ||
			(bytes.Equal(e, unknownKind) || bytes.Equal(e, unknownForm)) && !strings.Contains(err.Error(), "upgrade this replica") {
			t.Fatalf("entry %q: %v", e, err)
		}
	}
	if s.AppliedIndex() != 0 {
		t.Fatalf("applied index %d after refused entries", s.AppliedIndex())
	}
}

// TestASnapshotMakesANewReplica: a replica restored from another's snapshot holds its records
// and applied index, reads them at once, keeps them across a reopen, and applies the entries
// that follow.
func TestASnapshotMakesANewReplica(t *testing.T) {
	leader := openTestStore(t, "")
	log := &testLog{stores: []*Store{leader}}
	leader.Replicate(log)
	commands := everyCommand()
	for _, c := range commands[:8] {
		if err := leader.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := leader.BeginSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := snap.WriteTo(&file); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	path := filepath.Join(t.TempDir(), "new.db")
	fresh := openTestStore(t, path)
	if err := fresh.Restore(&file); err != nil {
		t.Fatal(err)
	}
	if fresh.AppliedIndex() != leader.AppliedIndex() {
		t.Fatalf("applied index %d, want %d", fresh.AppliedIndex(), leader.AppliedIndex())
	}
	sameRecords(t, leader, fresh)
	log.mu.Lock()
	log.stores = append(log.stores, fresh)
	log.mu.Unlock()
	for _, c := range commands[8:] {
		if err := leader.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
	sameRecords(t, leader, fresh)
	if err := fresh.Close(); err != nil {
		t.Fatal(err)
	}
	reopened := openTestStore(t, path)
	sameRecords(t, leader, reopened)
}

// FuzzDecodeEntry: whatever bytes reach a replica as an entry, reading them returns commands or
// an error, never a panic; entries the committer writes read back.
func FuzzDecodeEntry(f *testing.F) {
	for _, c := range everyCommand() {
		entry, err := encodeEntry([]Command{c})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(entry)
	}
	f.Add([]byte{entryVersion, 1, formCreateJobs, 3, 0, 0, 9})
	f.Fuzz(func(t *testing.T, entry []byte) {
		commands, err := decodeEntry(entry)
		if err != nil || slices.ContainsFunc(commands, func(c Command) bool { _, skipped := c.(*Ignored); return skipped }) {
			return // a command skipped is never written again: no replica proposes one
		}
		again, err := encodeEntry(commands)
		if err != nil {
			t.Fatalf("read %d commands that cannot be written again: %v", len(commands), err)
		}
		if _, err := decodeEntry(again); err != nil {
			t.Fatalf("an entry written again does not read: %v", err)
		}
	})
}

// A command an entry marks ignorable, of a kind this build does not know (a later release's,
// during a rolling upgrade), is skipped and the entry's other commands applied; one not marked
// stops the replica (TestAReplicaRefusesWhatItCannotRead). Commands this build writes carry the
// mark of their kind.
func TestAReplicaSkipsAnIgnorableCommandItDoesNotKnow(t *testing.T) {
	s := openTestStore(t, "")
	type part struct {
		form byte
		raw  []byte
	}
	encode := func(c Command) part {
		form, raw, err := encodeEntryCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		return part{form, raw}
	}
	entry := func(parts ...part) []byte {
		e := binary.AppendUvarint([]byte{entryVersion}, uint64(len(parts)))
		for _, p := range parts {
			e = append(binary.AppendUvarint(append(e, p.form), uint64(len(p.raw))), p.raw...)
		}
		return e
	}
	waits, meta := encode(&RecordWaits{At: testNow}), encode(&SetMeta{Name: "after", Value: "2"})
	if waits.form != formJSON|formIgnorable || meta.form != formJSON {
		t.Fatalf("forms written: RecordWaits %#x, SetMeta %#x", waits.form, meta.form)
	}
	future := part{formJSON | formIgnorable, []byte(`{"kind":"RecordHeat","command":{}}`)}
	results, err := s.ApplyEntries([]ReplicatedEntry{{Index: 1, Data: entry(future, waits, meta)}})
	if err != nil {
		t.Fatal(err)
	}
	if ig, ok := results[0].Commands[0].(*Ignored); !ok || !strings.Contains(ig.What, "RecordHeat") {
		t.Errorf("the unknown ignorable command was read as %#v", results[0].Commands[0])
	}
	if _, ok := results[0].Commands[1].(*RecordWaits); !ok {
		t.Errorf("a known ignorable command was read as %T", results[0].Commands[1])
	}
	if s.Meta("after") != "2" || s.AppliedIndex() != 1 {
		t.Errorf("after the entry: after=%q, applied %d", s.Meta("after"), s.AppliedIndex())
	}
}
