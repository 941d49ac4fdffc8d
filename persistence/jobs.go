package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// preparedJob is what creating a job writes besides its counters, in bytes: its record, its
// index entries and its first log line.
type preparedJob struct {
	record  []byte
	entries []jobIndexEntry
	logLine []byte
}

// prepareJob stamps a new job with its time and encodes what its creation writes.
func prepareJob(j *Job, at time.Time) preparedJob {
	j.UpdatedAt = at
	compactJSONValues(j)
	return preparedJob{
		record:  encodeJob(j),
		entries: jobIndexEntries(j, filedAs(j)),
		logLine: logEntry(at, creationLine(j)),
	}
}

// creationLine is the first line of a job's log.
func creationLine(j *Job) string {
	line := "created as " + j.State.String()
	switch {
	case j.Split():
		line = fmt.Sprintf("created, split into %d chunks of %d frames", len(j.Children), j.ChunkFrames)
		if f := j.Spec.Settings.Frames; f != nil {
			line += fmt.Sprintf(" (frames %d to %d)", f.Start, f.End)
		}
	case j.Kind == KindChunk:
		line += fmt.Sprintf(", a chunk of job %s: frames %d to %d", j.ParentID, j.Spec.Settings.Frames.Start, j.Spec.Settings.Frames.End)
	case j.Unsplit != "":
		line += "; renders whole on one node: " + j.Unsplit
	}
	if len(j.MissingFonts) > 0 {
		// A font replaced by another is a render to do again: said where the user looks.
		line += fmt.Sprintf("; fonts the farm has none of, which the render replaces with others: %s (upload them with POST /api/v2/fonts, or bundle them in the template)",
			strings.Join(j.MissingFonts, ", "))
	}
	return line
}

// insertJob stores a prepared new job and its index entries.
func (t *txn) insertJob(j *Job, p preparedJob) error {
	if t.get(bucketJobs, id(j.ID)) != nil {
		return fmt.Errorf("job %s already exists", j.ID)
	}
	if err := t.bucket(bucketJobs).Put(id(j.ID), p.record); err != nil {
		return err
	}
	if err := t.putIndexEntries(p.entries); err != nil {
		return err
	}
	return t.addJobCounts(j, j.Listed(), 1)
}

// updateJob stores a new version of a job whose stored state was prev, moving its index entries
// when the state it is filed under changed: its state, or the state a split job is listed in
// (its first chunk started).
func (t *txn) updateJob(prev JobState, j *Job, at time.Time) error {
	was := filing{state: prev, listed: prev}
	if j.Split() && prev.Cancellable() { // pending on its chunks, or queued to join them
		old, err := t.Job(j.ID)
		if err != nil {
			return err
		}
		was.listed = old.Listed()
	}
	if err := t.putJob(j, at); err != nil {
		return err
	}
	if was == filedAs(j) {
		return nil
	}
	if err := t.deleteJobIndexes(j, was); err != nil {
		return err
	}
	return t.writeJobIndexes(j, filedAs(j))
}

// retagJob is RetagJob: the job's index entries and counts go with its old priority and tags,
// and come back with the new.
func (t *txn) retagJob(c *RetagJob) (*Job, error) {
	old, err := t.Job(c.JobID)
	if errors.Is(err, ErrNotFound) || (err == nil && old.State != JobQueued && old.State != JobPending) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	next := old.Clone()
	next.Priority, next.Tags = c.Priority, c.Tags
	if err := t.deleteJobIndexes(old, filedAs(old)); err != nil {
		return nil, err
	}
	if err := t.putJob(next, c.At); err != nil {
		return nil, err
	}
	if err := t.writeJobIndexes(next, filedAs(next)); err != nil {
		return nil, err
	}
	return next, t.appendLog(next.ID, c.At, c.Line)
}

// Job loads a job by id.
func (t *txn) Job(jobID ulid.ULID) (*Job, error) {
	raw := t.get(bucketJobs, id(jobID))
	if raw == nil {
		return nil, ErrNotFound
	}
	return decodeJob(raw)
}

// TeamJob loads a job that belongs to team; another team's job is ErrNotFound.
func (t *txn) TeamJob(teamID, jobID ulid.ULID) (*Job, error) {
	j, err := t.Job(jobID)
	if err == nil && j.TeamID != teamID {
		return nil, ErrNotFound
	}
	return j, err
}

// ClientJob loads a job of team as its client knows it: another team's job, and a chunk (the
// farm's part of a split job), are ErrNotFound.
func (t *txn) ClientJob(teamID, jobID ulid.ULID) (*Job, error) {
	j, err := t.TeamJob(teamID, jobID)
	if err == nil && j.Kind == KindChunk {
		return nil, ErrNotFound
	}
	return j, err
}

func (t *txn) putJob(j *Job, at time.Time) error {
	j.UpdatedAt = at
	compactJSONValues(j)
	return t.bucket(bucketJobs).Put(id(j.ID), encodeJob(j))
}

// TemplateInUse reports whether a live job uses the template.
func (t *txn) TemplateInUse(templateID ulid.ULID) bool {
	return t.readCounter(bucketTemplateLiveJobs, id(templateID)) > 0
}

// BatchJob is one top-level job of a batch as the batch index sees it.
type BatchJob struct {
	Index int
	JobID ulid.ULID
	State JobState
}

// BatchJobs lists a batch's top-level jobs in request order, with their states.
func (t *txn) BatchJobs(batchID ulid.ULID) []BatchJob {
	var out []BatchJob
	t.scanPrefix(bucketJobsByBatch, id(batchID), func(k, v []byte) bool {
		out = append(out, BatchJob{
			Index: int(binary.BigEndian.Uint32(k[16:])),
			JobID: ulidAt(v),
			State: JobState(v[16]),
		})
		return true
	})
	return out
}

// JobCount is how many of a team's jobs are in a state.
func (t *txn) JobCount(teamID ulid.ULID, s JobState) int {
	return t.readCounter(bucketJobCounts, key(id(teamID), stateKey(s)))
}

// TagCount is how many of a team's jobs carrying a tag are in a state.
func (t *txn) TagCount(teamID ulid.ULID, tag string, s JobState) int {
	return t.readCounter(bucketTagCounts, key(id(teamID), tagKey(tag), stateKey(s)))
}

func (t *txn) readCounter(bucket, k []byte) int {
	t.mustFlushCounts()
	return readCount(t.get(bucket, k))
}

func readCount(raw []byte) int {
	if raw == nil {
		return 0
	}
	return int(binary.BigEndian.Uint64(raw))
}

// JobCountsByState sums every team's jobs per state.
func (t *txn) JobCountsByState() map[JobState]int {
	t.mustFlushCounts()
	counts := make(map[JobState]int)
	t.scanPrefix(bucketJobCounts, nil, func(k, v []byte) bool {
		if ulidAt(k) != FarmScope { // the farm's counts are the teams' again
			counts[JobState(k[16])] += int(binary.BigEndian.Uint64(v))
		}
		return true
	})
	return counts
}

// addJobCounts moves the per-state counters of a job (s: the state it is listed under): overall,
// by creation time and per tag, and its template's count of live jobs.
func (t *txn) addJobCounts(j *Job, s JobState, delta int) error {
	if j.Kind == KindChunk {
		if s.Terminal() {
			return nil
		}
		return t.addCount(bucketChunkCounts, key(id(j.TeamID), stateKey(s)), delta)
	}
	if err := t.addCount(bucketJobCounts, key(id(j.TeamID), stateKey(s)), delta); err != nil {
		return err
	}
	if !s.Terminal() && j.TemplateID != (ulid.ULID{}) {
		if err := t.addCount(bucketTemplateLiveJobs, id(j.TemplateID), delta); err != nil {
			return err
		}
	}
	t.addTimeCounts(j, s, delta)
	if err := t.addFarmCounts(j, s, delta); err != nil {
		return err
	}
	if j.Priority != 0 {
		t.addPriorityCounts(j, s, delta)
	}
	for _, tag := range j.Tags {
		if err := t.addCount(bucketTagCounts, key(id(j.TeamID), tagKey(tag), stateKey(s)), delta); err != nil {
			return err
		}
	}
	return nil
}

// addCount adds delta to a counter when the transaction commits: the jobs one group commit
// creates or moves mostly share their counters (team and state, creation time units), so each
// is read and written once per commit, not once per job. Its name is put together in a buffer
// the transaction keeps, so a counter changed before costs a lookup and no allocation.
func (t *txn) addCount(bucket, k []byte, delta int) error {
	if t.counts == nil {
		t.counts = make(map[string]*int)
	}
	t.countName = append(append(append(t.countName[:0], bucket...), 0), k...)
	if n, ok := t.counts[string(t.countName)]; ok {
		*n += delta
		return nil
	}
	n := new(int)
	*n = delta
	t.counts[string(t.countName)] = n
	return nil
}

// flushCounts writes the counters changed in this transaction, in key order (the same
// transaction always writes the same bytes).
func (t *txn) flushCounts() error {
	t.spreadTimeCounts()
	keys := make([]string, 0, len(t.counts))
	for k, delta := range t.counts {
		if *delta != 0 {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, bk := range keys {
		name, k, _ := strings.Cut(bk, "\x00")
		b := t.bucket([]byte(name))
		var n uint64
		if raw := t.get([]byte(name), []byte(k)); raw != nil {
			n = binary.BigEndian.Uint64(raw)
		}
		n = uint64(int64(n) + int64(*t.counts[bk]))
		// A counter back at zero goes: reads take a missing counter for zero, and rank reads
		// would otherwise step over the empty units of states jobs have left.
		var err error
		if n == 0 {
			err = b.Delete([]byte(k))
		} else {
			err = b.Put([]byte(k), binary.BigEndian.AppendUint64(nil, n))
		}
		if err != nil {
			return err
		}
	}
	clear(t.counts)
	return nil
}

// mustFlushCounts makes pending counter changes readable before a write transaction reads a
// counter; a failure there fails the commit, which flushes again.
func (t *txn) mustFlushCounts() {
	if len(t.counts) > 0 || len(t.timeCounts) > 0 {
		if err := t.flushCounts(); err != nil {
			t.countsErr = err
		}
	}
}

// jobIndexEntry is one index key of a job in a given state, with its value.
type jobIndexEntry struct {
	bucket []byte
	key    []byte
	value  []byte
}

// filing is where a job's index entries go: its state in the live index (what the coordinator
// works from), and the state it is listed under (what its clients see: Job.Listed) in the rest.
type filing struct{ state, listed JobState }

func filedAs(j *Job) filing { return filing{state: j.State, listed: j.Listed()} }

// jobIndexEntries lists every index entry a job has while filed as f. A chunk has its queue
// entry only: its client sees it through its job.
func jobIndexEntries(j *Job, f filing) []jobIndexEntry {
	team, jid, st := id(j.TeamID), id(j.ID), stateKey(f.listed)
	s := f.listed
	var a keyArena
	entries := make([]jobIndexEntry, 0, 12)
	if !f.state.Terminal() {
		var entry []byte
		if f.state == JobQueued {
			entry = encodeQueueEntry(j.QueueEntry())
		}
		entries = append(entries, jobIndexEntry{bucketLiveJobs, a.key(stateKey(f.state), jid), entry})
	}
	if j.Kind == KindChunk {
		return entries
	}
	var teamState []byte
	if j.Priority != 0 {
		teamState = ownPriorityMark
		entries = append(entries, jobIndexEntry{bucketJobsByTeamPriority, a.key(team, invertedPriority(j.Priority), jid), st})
	}
	entries = append(entries, jobIndexEntry{bucketJobsByTeamState, a.key(team, st, jid), teamState})
	for _, tag := range j.Tags {
		entries = append(entries, jobIndexEntry{bucketJobsByTeamTag, a.tagged(team, tag, jid), st})
	}
	if j.TemplateID != (ulid.ULID{}) {
		entries = append(entries, jobIndexEntry{bucketJobsByTeamTemplate, a.key(team, id(j.TemplateID), jid), st})
	}
	if s.Terminal() && j.ParentID == (ulid.ULID{}) {
		entries = append(entries, jobIndexEntry{bucketJobsByEnd, endKey(j), nil})
	}
	entries = append(entries, farmIndexEntries(&a, j, st, jid)...)
	if j.BatchID != (ulid.ULID{}) && j.ParentID == (ulid.ULID{}) {
		entries = append(entries, jobIndexEntry{bucketJobsByBatch, a.key(id(j.BatchID), u32(j.BatchIndex)), a.key(jid, st)})
	}
	return entries
}

func (t *txn) writeJobIndexes(j *Job, f filing) error {
	if err := t.putIndexEntries(jobIndexEntries(j, f)); err != nil {
		return err
	}
	return t.addJobCounts(j, f.listed, 1)
}

func (t *txn) putIndexEntries(entries []jobIndexEntry) error {
	for _, e := range entries {
		value := e.value
		if value == nil {
			value = []byte{}
		}
		if err := t.bucket(e.bucket).Put(e.key, value); err != nil {
			return err
		}
	}
	return nil
}

func (t *txn) deleteJobIndexes(j *Job, f filing) error {
	for _, e := range jobIndexEntries(j, f) {
		if err := t.bucket(e.bucket).Delete(e.key); err != nil {
			return err
		}
	}
	return t.addJobCounts(j, f.listed, -1)
}
