package persistence

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Replication carries a store's writes to the other replicas of a coordinator (cluster/replicas,
// on raft). With one, the committer proposes each group of commands as one entry, and answers
// its writers once the entry is committed and applied here, with what applying it returned.
type Replication interface {
	// Propose hands an entry to the replicas, in the order of the calls.
	Propose(Proposal)
}

// Proposal is one entry of the store's writes handed to the replicas.
type Proposal struct {
	Entry []byte
	// Commands, when not nil, are those Entry encodes as this store holds them: applying them
	// here, the replica may hand them back (ReplicatedEntry.Commands) rather than have them
	// decoded again.
	Commands []Command
	// Committed, when set, is called once the entry is committed, before it is applied here. It
	// reports whether another entry of this store follows at once (a group waits for its turn,
	// or more of this one is still to be committed): the replica may then apply the two in one
	// transaction.
	Committed func() (more bool)
	// Done is called once the entry is applied here (result is its *EntryResult), or with the
	// error that kept it from being committed.
	Done func(result any, err error)
}

// ErrNotReplicated is returned for a write the replicas could not commit now: this replica does
// not lead, or lost the leadership before the write was committed (it may still be).
var ErrNotReplicated = errors.New("the replicas are choosing a leader")

// ReplicatedEntry is one committed entry of the replicated log.
type ReplicatedEntry struct {
	Index uint64
	Data  []byte
	// Commands, when set, are the commands Data encodes as the replica that proposed them
	// holds them (Replication.Propose): applied as they are, not decoded.
	Commands []Command
}

// ErrEntryTooLarge refuses a write larger than one entry of the replicated log may be.
var ErrEntryTooLarge = errors.New("the write is larger than the replicas' log takes in one entry")

// maxEntryBytes caps an entry of the replicated log: the log's reader refuses a record past
// 64 MiB as damage, and each entry is sent whole to every replica. A group stops growing before
// it; a single command larger is refused (ErrEntryTooLarge).
const maxEntryBytes = 32 << 20

// EntryResult is what applying an entry returned: each command's error (nil: applied) and the
// commands as applied, their result fields filled in.
type EntryResult struct {
	Errs     []error
	Commands []Command
}

// metaAppliedIndex is the index of the last replicated entry applied, written in the
// transaction that applies it: entries at or below it are not applied again when the log is
// replayed (counters and log appends are not idempotent).
const metaAppliedIndex = "replicated_applied_index"

// entryVersion starts every entry: a replica refuses an entry of a layout it does not know.
const entryVersion = 1

// EncodeEntry writes commands as one entry of the replicated log, as the committer does.
func EncodeEntry(commands ...Command) ([]byte, error) { return encodeEntry(commands) }

// How each command is written in an entry: jobs are created and changed by the thousand, so
// those two carry their jobs as the store's binary records (the leader's prepared records, which
// the replicas store as they are); every other command is its JSON (EncodeCommand).
const (
	formJSON byte = iota
	formCreateJobs
	formChangeJob
)

// formIgnorable marks a command's form: a replica that does not know the command skips it
// (ignorableKinds).
const formIgnorable byte = 0x80

// encodeEntry writes a group of commands as one entry: the version, the count, then each
// command's form and its bytes after their length.
func encodeEntry(commands []Command) ([]byte, error) {
	encoded := make([]encodedCommand, len(commands))
	for i, c := range commands {
		var err error
		if encoded[i].form, encoded[i].raw, err = encodeEntryCommand(c); err != nil {
			return nil, err
		}
	}
	return joinEntry(encoded), nil
}

// encodedCommand is one command as an entry carries it.
type encodedCommand struct {
	form byte
	raw  []byte
}

// size is what the command takes in an entry, its form and length included.
func (e encodedCommand) size() int { return 1 + binary.MaxVarintLen64 + len(e.raw) }

func joinEntry(commands []encodedCommand) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, c := range commands {
		n += c.size()
	}
	entry := binary.AppendUvarint(append(make([]byte, 0, n), entryVersion), uint64(len(commands)))
	for _, c := range commands {
		entry = append(entry, c.form)
		entry = binary.AppendUvarint(entry, uint64(len(c.raw)))
		entry = append(entry, c.raw...)
	}
	return entry
}

func encodeEntryCommand(c Command) (form byte, raw []byte, err error) {
	w := &recordWriter{}
	switch c := c.(type) {
	case *CreateJobs:
		if c.prepared == nil {
			c.prepare()
		}
		batch, remember := marshalOptional(c.Batch), marshalOptional(c.Remember)
		if err := errors.Join(batch.err, remember.err); err != nil {
			return 0, nil, err
		}
		w.time(&c.At)
		w.raw(&batch.raw)
		w.raw(&remember.raw)
		w.uvarint(uint64(len(c.Jobs)))
		for i := range c.Jobs {
			record := json.RawMessage(c.prepared[i].record)
			w.raw(&record)
		}
		return formCreateJobs, w.b, nil
	case *ChangeJob:
		delivery := marshalOptional(c.Delivery)
		if delivery.err != nil {
			return 0, nil, delivery.err
		}
		record := json.RawMessage(encodeJob(c.Job))
		prev := byte(c.Prev)
		w.time(&c.At)
		w.byte(&prev)
		w.raw(&record)
		w.strings(&c.Log)
		w.uvarint(uint64(len(c.LogAt)))
		for i := range c.LogAt {
			w.time(&c.LogAt[i])
		}
		w.raw(&delivery.raw)
		return formChangeJob, w.b, nil
	}
	raw, err = EncodeCommand(c)
	form = formJSON
	if ignorableKinds[reflect.TypeOf(c).Elem().Name()] {
		form |= formIgnorable
	}
	return form, raw, err
}

type marshaled struct {
	raw json.RawMessage
	err error
}

// marshalOptional is v's JSON, nothing for a nil pointer.
func marshalOptional[T any](v *T) marshaled {
	if v == nil {
		return marshaled{}
	}
	raw, err := MarshalExact(v)
	return marshaled{raw, err}
}

func unmarshalOptional[T any](raw json.RawMessage, v **T) error {
	if len(raw) == 0 {
		return nil
	}
	*v = new(T)
	return json.Unmarshal(raw, *v)
}

// decodeEntry reads what encodeEntry wrote. A command of a kind this build does not know is an
// error, never skipped: a replica older than the leader must stop, not diverge.
func decodeEntry(entry []byte) ([]Command, error) {
	if len(entry) == 0 || entry[0] != entryVersion {
		return nil, fmt.Errorf("an entry of layout %d, which this build does not know: upgrade this replica", firstByte(entry))
	}
	r := &recordReader{b: entry[1:]}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		return nil, errors.New("a malformed entry")
	}
	commands := make([]Command, 0, n)
	for range n {
		form := r.next()
		raw := r.bytes()
		if r.err != nil {
			return nil, errors.New("a malformed entry")
		}
		c, err := decodeEntryCommand(form&^formIgnorable, raw)
		if errors.Is(err, errUnknownCommand) && form&formIgnorable != 0 {
			c, err = &Ignored{What: err.Error()}, nil
		}
		if err != nil {
			return nil, err
		}
		commands = append(commands, c)
	}
	if len(r.b) != 0 {
		return nil, errors.New("a malformed entry")
	}
	return commands, nil
}

func decodeEntryCommand(form byte, raw []byte) (Command, error) {
	r := &recordReader{b: raw}
	switch form {
	case formJSON:
		c, err := DecodeCommand(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: upgrade this replica to the leader's version", err)
		}
		return c, nil
	case formCreateJobs:
		c := &CreateJobs{}
		var batch, remember json.RawMessage
		r.time(&c.At)
		r.raw(&batch)
		r.raw(&remember)
		n := r.uvarint()
		if r.err != nil || n > uint64(len(r.b)) {
			return nil, errors.New("a malformed job creation")
		}
		c.Jobs, c.prepared = make([]*Job, n), make([]preparedJob, n)
		for i := range c.Jobs {
			record := r.bytes()
			j, err := decodeJob(record)
			if err != nil || r.err != nil {
				return nil, errors.Join(errors.New("a malformed job creation"), err)
			}
			// The leader's record is stored as it is: the same bytes on every replica.
			c.Jobs[i] = j
			c.prepared[i] = preparedJob{record: record, entries: jobIndexEntries(j, filedAs(j)), logLine: logEntry(c.At, creationLine(j))}
		}
		if err := errors.Join(unmarshalOptional(batch, &c.Batch), unmarshalOptional(remember, &c.Remember)); err != nil {
			return nil, err
		}
		return c, nil
	case formChangeJob:
		c := &ChangeJob{}
		var prev byte
		var record, delivery json.RawMessage
		r.time(&c.At)
		r.byte(&prev)
		r.raw(&record)
		r.strings(&c.Log)
		n := r.uvarint()
		if r.err != nil || n > uint64(len(r.b)) {
			return nil, errors.New("a malformed job change")
		}
		if n > 0 {
			c.LogAt = make([]time.Time, n)
			for i := range c.LogAt {
				r.time(&c.LogAt[i])
			}
		}
		r.raw(&delivery)
		if r.err != nil || len(r.b) != 0 {
			return nil, errors.New("a malformed job change")
		}
		c.Prev = JobState(prev)
		j, err := decodeJob(record)
		if err != nil {
			return nil, err
		}
		c.Job = j
		return c, unmarshalOptional(delivery, &c.Delivery)
	}
	return nil, fmt.Errorf("%w: its form is %d: upgrade this replica to the leader's version", errUnknownCommand, form)
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// Replicate makes the store a replica: from now on its committer proposes through r instead of
// writing, and ApplyEntries writes what the replicas committed. Call it before any write.
func (s *Store) Replicate(r Replication) { s.replication.Store(&r) }

// wideGroup is the count of jobs from which a group is wide: proposed at once, beside others.
const wideGroup = 256

// awaitTurn holds a narrow group back while another narrow group is being replicated, then adds
// the writes that arrived meanwhile: each entry costs every replica a log write, an apply and
// their pages, so under load a few larger entries carry more jobs than many small ones. A group
// already wide when the committer takes it (a batch of jobs) is proposed at once and holds no
// group back, so large entries still overlap.
func (s *Store) awaitTurn(batch []*write) (_ []*write, narrow bool) {
	if jobsIn(batch) >= wideGroup {
		return batch, false
	}
	select {
	case s.turn <- struct{}{}:
		return batch, true
	default:
	}
	if s.awaitingTurn != nil {
		s.awaitingTurn()
	}
	s.waitingTurn.Store(true)
	s.turn <- struct{}{}
	s.waitingTurn.Store(false)
	return s.gather(batch), true
}

// jobsIn counts the jobs the writes create, counting any other write as one.
func jobsIn(batch []*write) int {
	n := 0
	for _, w := range batch {
		if cj, ok := w.cmd.(*CreateJobs); ok && len(cj.Jobs) > 1 {
			n += len(cj.Jobs)
		} else {
			n++
		}
	}
	return n
}

// propose hands a group of writes to the replicas and answers each writer once it is applied
// here. It does not wait for that: the committer goes on gathering the next group. The group
// goes as one entry, or as several where one would pass maxEntryBytes. A narrow group gives back
// its turn (awaitTurn) once all of it is committed, while it is applied (or once it failed): the
// next group is then replicated as this one is applied.
func (s *Store) propose(r Replication, batch []*write, narrow bool) {
	inIDOrder(batch)
	entries := entriesOf(batch)
	// giveBack ends the group's turn, and reports whether another group waited for it.
	giveBack := func() bool { return false }
	if narrow {
		giveBack = sync.OnceValue(func() bool {
			more := s.waitingTurn.Load() // read first: the turn given, the group stops waiting
			<-s.turn
			return more
		})
	}
	if len(entries) == 0 {
		giveBack()
		return
	}
	var uncommitted, unanswered atomic.Int32
	uncommitted.Store(int32(len(entries)))
	unanswered.Store(int32(len(entries)))
	for _, e := range entries {
		r.Propose(Proposal{Entry: e.data, Commands: e.held,
			Committed: func() bool {
				if uncommitted.Add(-1) == 0 {
					return giveBack()
				}
				return true
			},
			Done: func(result any, err error) {
				if unanswered.Add(-1) == 0 {
					giveBack()
				}
				e.answer(result, err)
			}})
	}
}

// entryOfWrites is writes that go as one entry.
type entryOfWrites struct {
	writes []*write
	data   []byte
	// held are the writes' commands, when they may be applied as this store holds them
	// (heldAsProposed).
	held []Command
}

// entriesOf encodes the commands of batch into entries of at most maxEntryBytes, in their order.
// A write whose command cannot be encoded, or would not fit in an entry alone, is answered with
// its error.
func entriesOf(batch []*write) []entryOfWrites {
	var out []entryOfWrites
	var writes []*write
	var encoded []encodedCommand
	size := 0
	next := func() {
		if len(writes) == 0 {
			return
		}
		commands := make([]Command, len(writes))
		for i, w := range writes {
			commands[i] = w.cmd
		}
		out = append(out, entryOfWrites{writes: writes, data: joinEntry(encoded), held: heldAsProposed(commands)})
		writes, encoded, size = nil, nil, 0
	}
	for _, w := range batch {
		form, raw, err := encodeEntryCommand(w.cmd)
		c := encodedCommand{form, raw}
		if err == nil && c.size() > maxEntryBytes {
			err = fmt.Errorf("%w: %d bytes, past the %d one entry holds", ErrEntryTooLarge, len(raw), maxEntryBytes)
		}
		if err != nil {
			w.done(err)
			continue
		}
		if size+c.size() > maxEntryBytes {
			next()
		}
		writes, encoded, size = append(writes, w), append(encoded, c), size+c.size()
	}
	next()
	return out
}

// heldAsProposed is commands when every one of them applies alike as it is held and as another
// replica decodes it from its entry: job creations and changes, whose records the entry carries
// as the store's own bytes (a JSON-encoded command may come back with a field of another form);
// nil otherwise.
func heldAsProposed(commands []Command) []Command {
	for _, c := range commands {
		switch c.(type) {
		case *CreateJobs, *ChangeJob:
		default:
			return nil
		}
	}
	return commands
}

// answer answers the writes of p with what applying its entry returned.
func (p entryOfWrites) answer(result any, err error) {
	applied, ok := result.(*EntryResult)
	if err == nil && (!ok || len(applied.Errs) != len(p.writes)) {
		err = errors.New("the replicas answered an entry with what was not its result")
	}
	for i, w := range p.writes {
		if err != nil {
			w.done(err)
			continue
		}
		if applied.Errs[i] == nil {
			adoptResults(w.cmd, applied.Commands[i])
		}
		w.done(applied.Errs[i])
	}
}

// resulting is a command with result fields, which the writer reads once it is applied: on a
// replica they are filled in on the command decoded from the entry, and copied back.
type resulting interface{ adoptResults(applied Command) }

func adoptResults(mine, applied Command) {
	if r, ok := mine.(resulting); ok {
		r.adoptResults(applied)
	}
}

func (c *DeleteFont) adoptResults(a Command)    { c.Deleted = a.(*DeleteFont).Deleted }
func (c *DeleteSecret) adoptResults(a Command)  { c.Deleted = a.(*DeleteSecret).Deleted }
func (c *RevokeToken) adoptResults(a Command)   { c.Revoked = a.(*RevokeToken).Revoked }
func (c *RemoveExpired) adoptResults(a Command) { c.Removal = a.(*RemoveExpired).Removal }
func (c *RetagJob) adoptResults(a Command)      { c.Job = a.(*RetagJob).Job }
func (c *SetTeamPolicy) adoptResults(a Command) { c.Team = a.(*SetTeamPolicy).Team }
func (c *DeleteLimit) adoptResults(a Command)   { c.Deleted = a.(*DeleteLimit).Deleted }
func (c *IssueToken) adoptResults(a Command) {
	applied := a.(*IssueToken)
	c.Team, c.Created = applied.Team, applied.Created
}
func (c *CreateTeam) adoptResults(a Command) {
	applied := a.(*CreateTeam)
	c.Team, c.Created = applied.Team, applied.Created
}
func (c *ForgetAnswers) adoptResults(a Command) {
	applied := a.(*ForgetAnswers)
	c.Next, c.Forgotten = applied.Next, applied.Forgotten
}

// Empty reports whether the store holds no records (facts about the store itself aside).
func (s *Store) Empty() bool {
	empty := true
	s.view(func(t *txn) error {
		return t.tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if string(name) != string(bucketMeta) {
				if k, _ := b.Cursor().First(); k != nil {
					empty = false
				}
			}
			return nil
		})
	})
	return empty
}

// AppliedIndex is the index of the last replicated entry this store applied.
func (s *Store) AppliedIndex() uint64 {
	s.appliedMu.Lock()
	defer s.appliedMu.Unlock()
	return s.applied
}

// WaitApplied waits until the store has applied the entry at index, or until timeout.
func (s *Store) WaitApplied(index uint64, timeout time.Duration) bool {
	applied, moved := s.appliedNow()
	if applied >= index {
		return true // most reads: no timer made
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case <-moved:
		case <-deadline.C:
			return false
		}
		if applied, moved = s.appliedNow(); applied >= index {
			return true
		}
	}
}

// appliedNow is the applied index and the channel closed when it next moves.
func (s *Store) appliedNow() (uint64, chan struct{}) {
	s.appliedMu.Lock()
	defer s.appliedMu.Unlock()
	return s.applied, s.appliedMoved
}

func (s *Store) setApplied(index uint64) {
	s.appliedMu.Lock()
	defer s.appliedMu.Unlock()
	s.applied = index
	close(s.appliedMoved)
	s.appliedMoved = make(chan struct{})
}

// loadApplied reads the applied index a store was left at.
func (s *Store) loadApplied() error {
	raw := s.Meta(metaAppliedIndex)
	if raw == "" {
		s.setApplied(0)
		return nil
	}
	index, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		return fmt.Errorf("%s %q: %w", metaAppliedIndex, raw, err)
	}
	s.setApplied(index)
	return nil
}

// ApplyEntries writes committed entries in one transaction that also records the index of the
// last: the same function applies them on every replica, the leader included. Entries at or
// below the applied index are skipped (their result is nil). A command that fails is answered
// with its error and the others are applied without it, as a group commit does, so every
// replica fails the same commands. An error returned is the replica's own (an entry it cannot
// read, a disk that refuses the write): it must stop rather than diverge.
func (s *Store) ApplyEntries(entries []ReplicatedEntry) ([]*EntryResult, error) {
	results := make([]*EntryResult, len(entries))
	type pending struct {
		result *EntryResult
		at     int
	}
	var writes []pending
	last := s.AppliedIndex()
	for i, e := range entries {
		if e.Index <= last {
			continue
		}
		commands := e.Commands
		if commands == nil {
			var err error
			if commands, err = decodeEntry(e.Data); err != nil {
				return nil, fmt.Errorf("entry %d: %w", e.Index, err)
			}
		}
		results[i] = &EntryResult{Errs: make([]error, len(commands)), Commands: commands}
		for k := range commands {
			writes = append(writes, pending{results[i], k})
		}
		last = e.Index
	}
	if last == s.AppliedIndex() {
		return results, nil
	}
	index := []byte(strconv.FormatUint(last, 10))
	for {
		failed := -1
		err := s.db.Load().Update(func(btx *bolt.Tx) error {
			tx := &txn{tx: btx, cache: s.cache}
			for i, w := range writes {
				if w.result.Errs[w.at] != nil {
					continue
				}
				if err := tx.apply(w.result.Commands[w.at]); err != nil {
					failed = i
					w.result.Errs[w.at] = err
					return err
				}
			}
			if err := tx.finish(); err != nil {
				return err
			}
			return tx.bucket(bucketMeta).Put([]byte(metaAppliedIndex), index)
		})
		if failed >= 0 {
			continue // the command keeps its error; the others go again without it
		}
		if err != nil {
			return nil, fmt.Errorf("applying entries up to %d: %w", last, err)
		}
		s.setApplied(last)
		for _, w := range writes {
			if w.result.Errs[w.at] == nil {
				s.noteRevocation(w.result.Commands[w.at])
			}
		}
		return results, nil
	}
}

// Snapshot is the whole store at one moment, for a replica that is new or fell behind.
type Snapshot struct {
	tx   *bolt.Tx
	once sync.Once
}

// BeginSnapshot takes the store as it is now; writes go on meanwhile. Release it when done.
func (s *Store) BeginSnapshot() (*Snapshot, error) {
	tx, err := s.db.Load().Begin(false)
	if err != nil {
		return nil, err
	}
	return &Snapshot{tx: tx}, nil
}

// WriteTo writes the snapshot: the applied index it holds (8 bytes), then the bbolt file.
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) {
	var applied uint64
	if raw := sn.tx.Bucket(bucketMeta).Get([]byte(metaAppliedIndex)); raw != nil {
		applied, _ = strconv.ParseUint(string(raw), 10, 64)
	}
	if _, err := w.Write(binary.BigEndian.AppendUint64(nil, applied)); err != nil {
		return 0, err
	}
	n, err := sn.tx.WriteTo(w)
	return n + 8, err
}

// Release lets the store reuse what the snapshot kept.
func (sn *Snapshot) Release() { sn.once.Do(func() { sn.tx.Rollback() }) }

// Restore replaces every record with a snapshot another replica wrote (BeginSnapshot), unless the
// store has applied as much already (a replica restarting after it restored one). Reads go to the
// new records as soon as they are whole; the file replaces the store's at the same path.
func (s *Store) Restore(r io.Reader) error {
	var header [8]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return fmt.Errorf("receiving a snapshot: %w", err)
	}
	if applied := binary.BigEndian.Uint64(header[:]); applied > 0 && applied <= s.AppliedIndex() {
		return nil
	}
	old, path := s.db.Load(), s.path
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".restore-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return fmt.Errorf("receiving a snapshot: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	db, err := openBolt(tmp.Name(), time.Second, s.mmap)
	if err != nil {
		return fmt.Errorf("opening a snapshot: %w", err)
	}
	if err := prepare(db); err != nil {
		db.Close()
		return fmt.Errorf("a snapshot: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		db.Close()
		return err
	}
	db.NoSync = s.unsynced
	s.db.Store(db)
	s.cache.forget()
	if err := s.loadApplied(); err != nil {
		return err
	}
	return old.Close()
}
