package persistence

import (
	"encoding/binary"

	"github.com/oklog/ulid/v2"
)

// Job counts by creation time: for each team (and each team's tag), state and level, how many
// jobs were created in each unit of time (a job's id carries its creation millisecond); the same
// for the jobs with a priority of their own, in all and per priority. Four
// levels, each unit of one splitting into 256 or 64 units of the next, let a listing count the
// jobs before any id, or find the job at any rank, by reading a few hundred counters per level
// and then the jobs of one millisecond: offsets, date-range totals and random samples at any
// size.
//
//	level 0: 2^22 ms (about 70 minutes)   level 1: 2^14 ms (about 16 s)
//	level 2: 2^6 ms (64 ms)               level 3: 1 ms
var timeLevelShifts = [...]uint{22, 14, 6, 0}

// timeCountKey is scope + state + level + unit, where the scope is a team (bucketJobTimeCounts),
// a team and a tag (bucketTagTimeCounts), or either's key for jobs with a priority of their own
// (bucketPriorityTimeCounts).
func timeCountKey(scope []byte, s JobState, level int, unit uint64) []byte {
	k := make([]byte, 0, len(scope)+10)
	k = append(k, scope...)
	k = append(k, byte(s), byte(level))
	return binary.BigEndian.AppendUint64(k, unit)
}

// addTimeCounts moves a job's counters at every level: its team's and its tags', and for a job
// with a priority of its own, the same scopes' counters of such jobs and of its priority.
func (t *Tx) addTimeCounts(j *Job, s JobState, delta int) error {
	team := id(j.TeamID)
	if err := t.addScopeTimeCounts(bucketJobTimeCounts, team, j.ID, s, delta); err != nil {
		return err
	}
	for _, tag := range j.Tags {
		if err := t.addScopeTimeCounts(bucketTagTimeCounts, key(team, tagKey(tag)), j.ID, s, delta); err != nil {
			return err
		}
	}
	if j.Priority != 0 {
		return t.addPriorityTimeCounts(j, s, delta)
	}
	return nil
}

// addPriorityTimeCounts moves the counters of a job with a priority of its own.
func (t *Tx) addPriorityTimeCounts(j *Job, s JobState, delta int) error {
	for _, sc := range j.scopes() {
		for _, scope := range [][]byte{sc.ownPriority(), sc.priorityLevel(invertedPriority(j.Priority))} {
			if err := t.addScopeTimeCounts(bucketPriorityTimeCounts, scope, j.ID, s, delta); err != nil {
				return err
			}
		}
	}
	return nil
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

// ownPriority is the scope's key in the counters of jobs with a priority of their own (a tag is
// never empty, so the team's own key cannot be a tag's).
func (sc jobScope) ownPriority() []byte { return key(id(sc.team), tagKey(sc.tag), []byte{0}) }

// priorityLevel is the scope's key in the counters of the jobs of one priority (inverted).
func (sc jobScope) priorityLevel(inverted []byte) []byte {
	return key(id(sc.team), tagKey(sc.tag), []byte{1}, inverted)
}

// addScopeTimeCounts moves a job's counters of one scope at every level.
func (t *Tx) addScopeTimeCounts(bucket, scope []byte, jobID ulid.ULID, s JobState, delta int) error {
	ms := jobID.Time()
	for level, shift := range timeLevelShifts {
		if err := t.addCount(bucket, timeCountKey(scope, s, level, ms>>shift), delta); err != nil {
			return err
		}
	}
	return nil
}
