package persistence

import (
	"encoding/binary"

	"github.com/oklog/ulid/v2"
)

// Job counts by creation time: for each team (and each team's tag), state and level, how many
// jobs were created in each unit of time (a job's id carries its creation millisecond); the same
// for the jobs with a priority of their own, in all and per priority. Four levels, each unit of
// one splitting into 256 or 64 units of the next, let a listing count the jobs before any id, or
// find the job at any rank, by reading a few hundred counters per level and then the jobs of one
// millisecond: offsets, date-range totals and random samples at any size.
//
//	level 0: 2^22 ms (about 70 minutes)   level 1: 2^14 ms (about 16 s)
//	level 2: 2^6 ms (64 ms)               level 3: 1 ms
var timeLevelShifts = [...]uint{22, 14, 6, 0}

// timeCountKey is scope + state + level + unit, where the scope is a team (bucketJobTimeCounts),
// a team and a tag (bucketTagTimeCounts), or either's key for jobs with a priority of their own
// (bucketPriorityTimeCounts).
func timeCountKey[S ~string | ~[]byte](scope S, s JobState, level int, unit uint64) []byte {
	k := make([]byte, 0, len(scope)+10)
	k = append(k, scope...)
	k = append(k, byte(s), byte(level))
	return binary.BigEndian.AppendUint64(k, unit)
}

// timeCounter names a bucket of counters by creation time.
type timeCounter uint8

const (
	teamTimeCounter timeCounter = iota
	tagTimeCounter
	priorityTimeCounter
)

func (c timeCounter) bucket() []byte {
	return [...][]byte{bucketJobTimeCounts, bucketTagTimeCounts, bucketPriorityTimeCounts}[c]
}

// timeCount names the counters, at every level, of one scope, state and millisecond. A
// transaction keeps its changes at that grain until it writes them: the jobs of one commit share
// their milliseconds, so each level's counter is worked out once per millisecond, not once per
// job (a job with 20 tags changes 84 counters).
type timeCount struct {
	counter timeCounter
	scope   string
	state   JobState
	ms      uint64
}

// addTimeCounts moves a job's counters at every level: its team's and its tags'.
func (t *txn) addTimeCounts(j *Job, s JobState, delta int) {
	team := id(j.TeamID)
	t.addScopeTimeCounts(teamTimeCounter, team, j.ID, s, delta)
	for _, tag := range j.Tags {
		t.addScopeTimeCounts(tagTimeCounter, key(team, tagKey(tag)), j.ID, s, delta)
	}
}

// addPriorityCounts moves the counters of a job with a priority of its own, for its team and
// each tag: by priority and state, and by creation time, in all and per priority.
func (t *txn) addPriorityCounts(j *Job, s JobState, delta int) {
	inverted := invertedPriority(j.Priority)
	for _, sc := range j.scopes() {
		t.addCount(bucketPriorityCounts, key(sc.priorityLevel(inverted), stateKey(s)), delta)
		t.addCount(bucketPriorityCounts, key(sc.ownPriority(), priorityBlock(inverted), stateKey(s)), delta)
		t.addScopeTimeCounts(priorityTimeCounter, sc.ownPriority(), j.ID, s, delta)
		t.addScopeTimeCounts(priorityTimeCounter, sc.priorityLevel(inverted), j.ID, s, delta)
	}
}

// addScopeTimeCounts moves a job's counters of one scope at every level, when the transaction
// writes its counters.
func (t *txn) addScopeTimeCounts(c timeCounter, scope []byte, jobID ulid.ULID, s JobState, delta int) {
	if t.timeCounts == nil {
		t.timeCounts = make(map[timeCount]*int)
	}
	if n, ok := t.timeCounts[timeCount{c, string(scope), s, jobID.Time()}]; ok {
		*n += delta // looked up without copying scope
		return
	}
	n := new(int)
	*n = delta
	t.timeCounts[timeCount{c, string(scope), s, jobID.Time()}] = n
}

// spreadTimeCounts turns the changes kept by millisecond into changes of each level's counter.
func (t *txn) spreadTimeCounts() {
	for tc, delta := range t.timeCounts {
		if *delta == 0 {
			continue
		}
		for level, shift := range timeLevelShifts {
			t.addCount(tc.counter.bucket(), timeCountKey(tc.scope, tc.state, level, tc.ms>>shift), *delta)
		}
	}
	clear(t.timeCounts)
}

// priorityBlockShift groups inverted priorities by 1,024 in the counters by priority. The
// default priority's inverted value ends its block (its low bits are all ones), so no block
// holds priorities on both sides of it.
const priorityBlockShift = 10

// priorityBlock is the block of an inverted priority, as a key part.
func priorityBlock(inverted []byte) []byte {
	return binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(inverted)>>priorityBlockShift)
}

// jobScope is a team's jobs (tag "") or those of them carrying a tag.
type jobScope struct {
	team ulid.ULID
	tag  string
}

// scopes are the scopes a job is in: its team's and its tags'.
func (j *Job) scopes() []jobScope {
	out := []jobScope{{team: j.TeamID}}
	for _, tag := range j.Tags {
		out = append(out, jobScope{j.TeamID, tag})
	}
	return out
}

// prefix is the scope's team and tag: a tag's key in the tags' index and counters, and the
// scope's in the counters of jobs with a priority of their own (a tag is never empty, so the
// team's own key there cannot be a tag's).
func (sc jobScope) prefix() []byte { return key(id(sc.team), tagKey(sc.tag)) }

// ownPriority is the scope's key in the counters of jobs with a priority of their own (by
// creation time, or by block of priorities).
func (sc jobScope) ownPriority() []byte { return key(sc.prefix(), []byte{0}) }

// priorityLevel is the scope's key in the counters of the jobs of one priority (inverted), by
// creation time or in all.
func (sc jobScope) priorityLevel(inverted []byte) []byte {
	return key(sc.prefix(), []byte{1}, inverted)
}
