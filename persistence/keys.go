package persistence

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
)

// Buckets. Keys are binary: ULIDs as 16 bytes (their byte order is creation order), states as one
// byte, integers big-endian. Secondary indexes are written in the same transaction as the record.
var (
	bucketTeams     = []byte("teams")      // team id -> Team
	bucketTeamNames = []byte("team_names") // name -> team id
	bucketTokens    = []byte("tokens")     // sha256(token) -> Token

	bucketTemplates   = []byte("templates")    // team + template id -> Template
	bucketFonts       = []byte("fonts")        // team + font id -> Font
	bucketFontNames   = []byte("font_names")   // team + file name -> font id
	bucketSecrets     = []byte("secrets")      // team + secret id -> Secret
	bucketSecretNames = []byte("secret_names") // team + name -> secret id

	bucketJobs = []byte("jobs") // job id -> Job
	// team + state + job id -> nothing, or ownPriorityMark: creation order per team and state
	// (every state at once by merging them)
	bucketJobsByTeamState = []byte("jobs_by_team_state")
	// team + len(tag) + tag + job id -> state
	bucketJobsByTeamTag = []byte("jobs_by_team_tag")
	// team + inverted priority + job id -> state, for jobs with a priority of their own (not
	// 0): pickup order per team, the others coming between, oldest first, from the creation index
	bucketJobsByTeamPriority = []byte("jobs_by_team_priority")
	// state + job id -> the queue entry (queued) or nothing, for live states only: what to
	// resume after a restart
	bucketLiveJobs = []byte("live_jobs")
	// template id -> how many live jobs use it: templates in use
	bucketTemplateLiveJobs = []byte("template_live_jobs")
	// batch id + index -> job id + state: a batch's top-level jobs
	bucketJobsByBatch = []byte("jobs_by_batch")
	// team + state -> count
	bucketJobCounts = []byte("job_counts")
	// team + len(tag) + tag + state -> count
	bucketTagCounts = []byte("tag_counts")
	// end millisecond + job id -> nothing, for terminal top-level jobs: what retention removes
	bucketJobsByEnd = []byte("jobs_by_end")
	// team + state + level + time unit -> count (timecounts.go)
	bucketJobTimeCounts = []byte("job_time_counts")
	// team + len(tag) + tag + state + level + time unit -> count
	bucketTagTimeCounts = []byte("tag_time_counts")
	// team + len(tag) + tag (none: the team's jobs) + 0 + state + level + time unit -> count, of
	// jobs with a priority of their own; the same with 1 + inverted priority after the tag: of
	// the jobs of each priority
	bucketPriorityTimeCounts = []byte("priority_time_counts")
	// team + len(tag) + tag (none: the team's jobs) + 1 + inverted priority + state -> count, of
	// jobs with a priority of their own: the priorities in pickup order, and how many jobs each;
	// the same with 0 + block of 1024 inverted priorities: what a deep offset steps over at once
	bucketPriorityCounts = []byte("priority_counts")

	bucketBatches = []byte("batches") // batch id -> Batch
	// bucketJobsByTeamTemplate files each job under its template: team + template id + job id
	// -> state (listings of one template's jobs).
	bucketJobsByTeamTemplate = []byte("jobs_by_team_template")
	// bucketBatchesByTeam lists each team's batches: team + batch id -> the batch's name.
	bucketBatchesByTeam = []byte("batches_by_team")
	bucketLogs          = []byte("logs")    // job id + sequence -> log line
	bucketOutbox        = []byte("outbox")  // delivery id -> Delivery
	bucketMeta          = []byte("meta")    // name -> value: facts about the store itself
	bucketAnswers       = []byte("answers") // team + sha256(idempotency key) -> Answer
	// bucketObjectDeletes holds the objects nothing refers to any more until the object store
	// deleted them: key (a folder when it ends in "/") -> nothing.
	bucketObjectDeletes = []byte("object_deletes")
	// bucketWaits holds why an engine's queued jobs cannot start, as it changed: engine, 0,
	// Unix nanoseconds -> the reason ("" once they can again).
	bucketWaits = []byte("waits")
	// bucketChunkCounts counts the chunks of split jobs in live states: team + state -> count
	// (a team's queue cap on chunks).
	bucketChunkCounts = []byte("chunk_counts")
	// bucketLimits holds the farm's limits: name -> Limit.
	bucketLimits = []byte("limits")
	// bucketJobsByName files named jobs by name: team (or FarmScope) + name, lowered, + 0 + job
	// id -> state (farm.go).
	bucketJobsByName = []byte("jobs_by_name")
	// bucketUsage holds what each team used of each engine, per hour: hour (since the epoch) +
	// team + engine -> Usage (usage.go).
	bucketUsage = []byte("usage")
)

// ownPriorityMark is the creation index's value for a job with a priority of its own.
var ownPriorityMark = []byte{1}

var allBuckets = [][]byte{
	bucketTeams, bucketTeamNames, bucketTokens, bucketTemplates, bucketFonts, bucketFontNames,
	bucketSecrets, bucketSecretNames, bucketJobs, bucketJobsByTeamState, bucketJobsByTeamTag,
	bucketJobsByTeamPriority, bucketLiveJobs, bucketTemplateLiveJobs, bucketJobsByBatch,
	bucketJobCounts, bucketTagCounts, bucketJobsByEnd, bucketJobTimeCounts, bucketTagTimeCounts, bucketPriorityTimeCounts,
	bucketPriorityCounts, bucketBatches, bucketBatchesByTeam, bucketJobsByTeamTemplate,
	bucketLogs, bucketOutbox, bucketMeta, bucketAnswers, bucketObjectDeletes, bucketWaits, bucketChunkCounts, bucketLimits, bucketJobsByName, bucketUsage,
}

func createBuckets(tx *bolt.Tx) error {
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// key concatenates parts into one key.
func key(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	k := make([]byte, 0, n)
	for _, p := range parts {
		k = append(k, p...)
	}
	return k
}

// keyArena cuts keys from one buffer: the dozen index keys of a job cost one allocation, not a
// dozen. Each key is capped at its length, so an append to one never runs into the next.
type keyArena struct{ buf []byte }

// keyArenaSize is a buffer's size, enough for the index keys of most jobs.
const keyArenaSize = 512

func (a *keyArena) key(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	a.reserve(n)
	start := len(a.buf)
	for _, p := range parts {
		a.buf = append(a.buf, p...)
	}
	return a.buf[start:len(a.buf):len(a.buf)]
}

// tagged is key(scope, tagKey(tag), jid).
func (a *keyArena) tagged(scope []byte, tag string, jid []byte) []byte {
	a.reserve(len(scope) + 1 + len(tag) + len(jid))
	start := len(a.buf)
	a.buf = append(append(append(append(a.buf, scope...), byte(len(tag))), tag...), jid...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// reserve makes room for n more bytes, in a new buffer when the current one is full (the keys
// cut from it before stay as they are).
func (a *keyArena) reserve(n int) {
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, max(n, keyArenaSize))
	}
}

func id(u ulid.ULID) []byte { return u[:] }

// stateKeys are the keys of the states, one byte each, shared: a state's key costs nothing.
var stateKeys = func() (b [256]byte) {
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

func stateKey(s JobState) []byte { return stateKeys[s : s+1 : s+1] }

func u32(v int) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(v))
	return b
}

// invertedPriority sorts higher priorities first.
func invertedPriority(p int) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, ^(uint64(int64(p)) ^ (1 << 63)))
	return b
}

func tagKey(tag string) []byte { return append([]byte{byte(len(tag))}, tag...) }

// fillPercent is how full bbolt leaves the first page of a split (its default: half). Nearly
// every write lands at the end of a key range (ids and time units grow), where a split's first
// page is never written again: at half, every page stays half empty (the README's table of
// figures shows what fuller pages save).
const fillPercent = 0.95

func (t *txn) bucket(name []byte) *bolt.Bucket {
	if b := t.buckets[string(name)]; b != nil {
		return b
	}
	b := t.tx.Bucket(name)
	if b == nil {
		return nil
	}
	b.FillPercent = fillPercent
	// bbolt keeps the buckets a write transaction opened, not those of a read: each lookup
	// would search the root and set up the bucket again (a random page looks up about 300).
	if !t.tx.Writable() {
		if t.buckets == nil {
			t.buckets = make(map[string]*bolt.Bucket)
		}
		t.buckets[string(name)] = b
	}
	return b
}

// cursor is a cursor of b, one handed back if there is one.
func (t *txn) cursor(b *bolt.Bucket) *bolt.Cursor {
	for i, c := range t.cursors {
		if c.Bucket() == b {
			last := len(t.cursors) - 1
			t.cursors[i], t.cursors[last] = t.cursors[last], nil
			t.cursors = t.cursors[:last]
			return c
		}
	}
	return b.Cursor()
}

// handBack keeps a cursor no longer used for the transaction's next range or lookup.
func (t *txn) handBack(c *bolt.Cursor) { t.cursors = append(t.cursors, c) }

// get is the value of k in the bucket (nil when absent), as bbolt's Get, with a cursor kept
// from an earlier lookup.
func (t *txn) get(bucket, k []byte) []byte {
	c := t.cursor(t.bucket(bucket))
	defer t.handBack(c)
	if found, v := c.Seek(k); bytes.Equal(found, k) {
		return v
	}
	return nil
}

func (t *txn) getJSON(bucket, k []byte, v any) (bool, error) {
	raw := t.get(bucket, k)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("decode %s record: %w", bucket, err)
	}
	return true, nil
}

func (t *txn) putJSON(bucket, k []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return t.bucket(bucket).Put(k, raw)
}

// scanPrefix calls fn for each key with the prefix, in key order, until fn returns false.
func (t *txn) scanPrefix(bucket, prefix []byte, fn func(k, v []byte) bool) {
	c := t.bucket(bucket).Cursor()
	for k, v := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
		if !fn(k, v) {
			return
		}
	}
}

// firstAfter places c on the first key after after (the first key of all when after is nil): where
// a walk in steps goes on from the last key of the step before.
func firstAfter(c *bolt.Cursor, after []byte) (k, v []byte) {
	if after == nil {
		return c.First()
	}
	if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
		return c.Next()
	}
	return k, v
}

func hasPrefix(k, prefix []byte) bool {
	return len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix)
}

func ulidAt(b []byte) ulid.ULID {
	var u ulid.ULID
	copy(u[:], b)
	return u
}

// Meta reads a fact about the store ("" when unset).
func (t *txn) Meta(name string) string { return string(t.get(bucketMeta, []byte(name))) }
