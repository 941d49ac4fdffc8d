package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/oklog/ulid/v2"
)

// QueueEntry is what the scheduler needs of a queued job: enough to order and place it without
// its record. The live-jobs index carries it as its value, so a restart rebuilds the queue from
// the index alone.
type QueueEntry struct {
	JobID    ulid.ULID
	TeamID   ulid.ULID
	Priority int
	Engine   string
	Tags     []string
	// Avoid are the nodes the job failed on.
	Avoid []string
	// Pool and Limits are the job's (Job.Pool, Job.Limits).
	Pool   string
	Limits []string
}

// QueueEntry is the job's entry in the scheduler's queue.
func (j *Job) QueueEntry() QueueEntry {
	var avoid []string
	for _, f := range j.Failures {
		if !slices.Contains(avoid, f.Node) {
			avoid = append(avoid, f.Node)
		}
	}
	return QueueEntry{JobID: j.ID, TeamID: j.TeamID, Priority: j.Priority, Engine: j.Engine, Tags: j.Tags, Avoid: avoid, Pool: j.Pool, Limits: j.Limits}
}

// encodeQueueEntry writes the entry without its job id (the index key holds it): team, priority,
// then engine, tags and avoided nodes as length-prefixed strings, and, when the job has any, its
// pool and limits (entries written before them end after the avoided nodes).
func encodeQueueEntry(e QueueEntry) []byte {
	n := 16 + 8 + binary.MaxVarintLen64*(5+len(e.Tags)+len(e.Avoid)+len(e.Limits)) + len(e.Engine) + len(e.Pool)
	for _, s := range e.Limits {
		n += len(s)
	}
	for _, s := range e.Tags {
		n += len(s)
	}
	for _, s := range e.Avoid {
		n += len(s)
	}
	b := make([]byte, 0, n)
	b = append(b, e.TeamID[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(int64(e.Priority)))
	b = appendString(b, e.Engine)
	b = appendStrings(b, e.Tags)
	b = appendStrings(b, e.Avoid)
	if e.Pool == "" && len(e.Limits) == 0 {
		return b
	}
	b = appendString(b, e.Pool)
	return appendStrings(b, e.Limits)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendStrings(b []byte, list []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(list)))
	for _, s := range list {
		b = appendString(b, s)
	}
	return b
}

var errShortEntry = errors.New("truncated queue entry")

func decodeQueueEntry(jobID ulid.ULID, b []byte) (QueueEntry, error) {
	e := QueueEntry{JobID: jobID}
	if len(b) < 24 {
		return e, errShortEntry
	}
	copy(e.TeamID[:], b)
	e.Priority = int(int64(binary.BigEndian.Uint64(b[16:])))
	r := entryReader{b: b[24:]}
	e.Engine = r.string()
	e.Tags = r.strings()
	e.Avoid = r.strings()
	if len(r.b) > 0 {
		e.Pool = r.string()
		e.Limits = r.strings()
	}
	if r.err != nil {
		return e, r.err
	}
	return e, nil
}

// entryReader reads length-prefixed strings, remembering the first error.
type entryReader struct {
	b   []byte
	err error
}

func (r *entryReader) uvarint() int {
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > uint64(len(r.b)) {
		r.err = errShortEntry
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}

func (r *entryReader) string() string {
	n := r.uvarint()
	if r.err != nil || n > len(r.b) {
		r.err = errShortEntry
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *entryReader) strings() []string {
	n := r.uvarint()
	if r.err != nil || n == 0 {
		return nil
	}
	list := make([]string, 0, min(n, len(r.b)))
	for range n {
		list = append(list, r.string())
		if r.err != nil {
			return nil
		}
	}
	return list
}

// QueuedJobs calls fn with the queue entry of every queued job, in id (creation) order, from
// the live-jobs index alone.
func (t *txn) QueuedJobs(fn func(QueueEntry) error) error {
	var err error
	t.scanPrefix(bucketLiveJobs, stateKey(JobQueued), func(k, v []byte) bool {
		var e QueueEntry
		if e, err = decodeQueueEntry(ulidAt(k[1:]), v); err != nil {
			err = fmt.Errorf("queued job %s: %w", e.JobID, err)
			return false
		}
		err = fn(e)
		return err == nil
	})
	return err
}

// JobsIn calls fn with every job in a live state (pending or rendering), in id order.
func (t *txn) JobsIn(s JobState, fn func(*Job) error) error {
	var err error
	t.scanPrefix(bucketLiveJobs, stateKey(s), func(k, _ []byte) bool {
		var j *Job
		if j, err = t.Job(ulidAt(k[1:])); err != nil {
			err = fmt.Errorf("live job %s: %w", ulidAt(k[1:]), err)
			return false
		}
		err = fn(j)
		return err == nil
	})
	return err
}
