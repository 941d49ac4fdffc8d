package persistence

import (
	"bytes"
	"encoding/binary"
	"iter"
	"slices"

	"github.com/oklog/ulid/v2"
)

// Job counts by creation time: for each team (and each team's tag), state and level, how many
// jobs were created in each unit of time (a job's id carries its creation millisecond). Four
// levels, each unit of one splitting into 256 or 64 units of the next, let a listing count the
// jobs before any id, or find the job at any rank, by reading a few hundred counters per level
// and then the jobs of one millisecond: offsets, date-range totals and random samples at any
// size.
//
//	level 0: 2^22 ms (about 70 minutes)   level 1: 2^14 ms (about 16 s)
//	level 2: 2^6 ms (64 ms)               level 3: 1 ms
var timeLevelShifts = [...]uint{22, 14, 6, 0}

// timeCountKey is scope + state + level + unit, where the scope is a team (bucketJobTimeCounts)
// or a team and a tag (bucketTagTimeCounts).
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

// unitCount is the number of matching jobs in one unit of a level.
type unitCount struct {
	unit  uint64
	count int
}

// counterTerm is one set of counters a time index adds (sign 1) or takes away (sign -1).
type counterTerm struct {
	bucket, scope []byte
	sign          int
}

// timeIndex answers rank questions over the jobs of a scope in a set of states, in id order:
// its counters are the sum of its terms.
type timeIndex struct {
	tx     *Tx
	terms  []counterTerm
	states []JobState
	// jobs yields, in id order (or reversed), the index's jobs in some states with ids in
	// [lo, hi).
	jobs func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID]
	// units memoizes the counters read: level and parent unit -> the units below it.
	units map[[2]uint64][]unitCount
}

func (t *Tx) newTimeIndex(states []JobState, jobs func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID], terms ...counterTerm) *timeIndex {
	return &timeIndex{tx: t, terms: terms, states: states, jobs: jobs, units: make(map[[2]uint64][]unitCount)}
}

// scopeIndex ranks the jobs of a scope: a team's from its counters and the creation index, a
// tag's from the tag's counters and index (whose entries carry the job's state).
func (t *Tx) scopeIndex(sc jobScope, states []JobState) *timeIndex {
	return t.newTimeIndex(states, t.scopeJobs(sc, nil), sc.counters())
}

// counters is the scope's term of all its jobs.
func (sc jobScope) counters() counterTerm {
	if sc.tag == "" {
		return counterTerm{bucketJobTimeCounts, id(sc.team), 1}
	}
	return counterTerm{bucketTagTimeCounts, key(id(sc.team), tagKey(sc.tag)), 1}
}

// scopeJobs yields the scope's jobs in some states from the creation index or the tag's; with
// onlyDefault, only the jobs with the default priority (those the creation index does not mark;
// onlyDefault checks a tag's).
func (t *Tx) scopeJobs(sc jobScope, onlyDefault func(team, state, jobID []byte) bool) func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID] {
	team := id(sc.team)
	return func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID] {
		if sc.tag == "" {
			prefixes := make([][]byte, len(states))
			for i, s := range states {
				prefixes[i] = key(team, stateKey(s))
			}
			var accept func(v []byte) bool
			if onlyDefault != nil {
				accept = func(v []byte) bool { return len(v) == 0 }
			}
			return t.mergeRanges(bucketJobsByTeamState, prefixes, lo, hi, reverse, accept)
		}
		in := make(map[JobState]bool, len(states))
		for _, s := range states {
			in[s] = true
		}
		prefix := key(team, tagKey(sc.tag))
		return func(yield func(ulid.ULID) bool) {
			t.rangeScan(bucketJobsByTeamTag, prefix, lo, hi, reverse, func(k, v []byte) bool {
				jobID := k[len(prefix):]
				if !in[JobState(v[0])] || (onlyDefault != nil && !onlyDefault(team, v[:1], jobID)) {
					return true
				}
				return yield(ulidAt(jobID))
			})
		}
	}
}

// defaultPriorityIndex ranks the scope's jobs with the default priority: all its jobs less those
// with a priority of their own.
func (t *Tx) defaultPriorityIndex(sc jobScope, states []JobState) *timeIndex {
	byState := t.bucket(bucketJobsByTeamState)
	unmarked := func(team, state, jobID []byte) bool { return len(byState.Get(key(team, state, jobID))) == 0 }
	return t.newTimeIndex(states, t.scopeJobs(sc, unmarked), sc.counters(), counterTerm{bucketPriorityTimeCounts, sc.ownPriority(), -1})
}

// priorityLevelIndex ranks the scope's jobs of one priority (inverted), from the priority index.
func (t *Tx) priorityLevelIndex(sc jobScope, inverted []byte, states []JobState) *timeIndex {
	prefix := key(id(sc.team), inverted)
	var hasTag func(jobID []byte) bool
	if sc.tag != "" {
		hasTag = t.tagLookup(sc.team, []string{sc.tag})
	}
	jobs := func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID] {
		in := make(map[JobState]bool, len(states))
		for _, s := range states {
			in[s] = true
		}
		return func(yield func(ulid.ULID) bool) {
			t.rangeScan(bucketJobsByTeamPriority, prefix, lo, hi, reverse, func(k, v []byte) bool {
				jobID := k[len(prefix):]
				if !in[JobState(v[0])] || (hasTag != nil && !hasTag(jobID)) {
					return true
				}
				return yield(ulidAt(jobID))
			})
		}
	}
	return t.newTimeIndex(states, jobs, counterTerm{bucketPriorityTimeCounts, sc.priorityLevel(inverted), 1})
}

// priorityLevels lists the priorities (inverted) the scope's jobs with a priority of their own
// have, highest first.
func (t *Tx) priorityLevels(sc jobScope) [][]byte {
	t.mustFlushCounts()
	prefix := sc.priorityLevel(nil)
	var levels [][]byte
	c := t.bucket(bucketPriorityTimeCounts).Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix) && len(k) >= len(prefix)+8; k, _ = c.Seek(prefixEnd(k[:len(prefix)+8])) {
		levels = append(levels, bytes.Clone(k[len(prefix):len(prefix)+8]))
	}
	return levels
}

// children lists, in unit order, the non-empty units of a level inside a parent unit of the
// level above (level 0: every unit), summed over the states and the terms.
func (ix *timeIndex) children(level int, parent uint64) []unitCount {
	memo := [2]uint64{uint64(level), parent}
	if cached, ok := ix.units[memo]; ok {
		return cached
	}
	ix.tx.mustFlushCounts()
	var lo, hi uint64 = 0, ^uint64(0)
	if level > 0 {
		span := timeLevelShifts[level-1] - timeLevelShifts[level]
		lo, hi = parent<<span, (parent+1)<<span
	}
	// Each state's counters come in unit order; with several states or terms, sorting them
	// together and adding up equal units sums them.
	var out []unitCount
	for _, term := range ix.terms {
		c := ix.tx.bucket(term.bucket).Cursor()
		for _, s := range ix.states {
			prefix := key(term.scope, []byte{byte(s), byte(level)})
			for k, v := c.Seek(timeCountKey(term.scope, s, level, lo)); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
				unit := binary.BigEndian.Uint64(k[len(prefix):])
				if unit >= hi {
					break
				}
				out = append(out, unitCount{unit, term.sign * readCount(v)})
			}
		}
	}
	if len(ix.states)*len(ix.terms) > 1 {
		slices.SortFunc(out, func(a, b unitCount) int { return cmpUint(a.unit, b.unit) })
		summed := out[:0]
		for _, uc := range out {
			if last := len(summed) - 1; last >= 0 && summed[last].unit == uc.unit {
				summed[last].count += uc.count
			} else {
				summed = append(summed, uc)
			}
		}
		out = summed
	}
	out = slices.DeleteFunc(out, func(uc unitCount) bool { return uc.count <= 0 })
	ix.units[memo] = out
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// before counts the matching jobs whose id sorts before bound (a 16-byte id prefix).
func (ix *timeIndex) before(bound []byte) int {
	ms := ulidAt(bound).Time()
	n := 0
	var parent uint64
	for level, shift := range timeLevelShifts {
		unit := ms >> shift
		for _, uc := range ix.children(level, parent) {
			if uc.unit >= unit {
				break
			}
			n += uc.count
		}
		parent = unit
	}
	// The bottom unit holding the bound: count its jobs before the bound.
	for range ix.jobs(ix.states, msKey(parent<<timeLevelShifts[len(timeLevelShifts)-1]), bound, false) {
		n++
	}
	return n
}

// nth returns the id of the matching job at rank r (0-based, in id order); false past the end.
// The upper levels' counters are read once per index and kept; the bottom level's, and the jobs
// of the millisecond found, are read in order up to the rank and no further, nothing kept: a
// random page's samples mostly fall in different milliseconds.
func (ix *timeIndex) nth(r int) (ulid.ULID, bool) {
	if r < 0 {
		return ulid.ULID{}, false
	}
	var parent uint64
	bottom := len(timeLevelShifts) - 1
	for level := range bottom {
		units := ix.children(level, parent)
		found := false
		for _, uc := range units {
			if r < uc.count {
				parent, found = uc.unit, true
				break
			}
			r -= uc.count
		}
		if !found {
			return ulid.ULID{}, false
		}
	}
	unit, r, held := ix.bottomUnit(parent, r)
	if len(held) == 0 {
		return ulid.ULID{}, false
	}
	shift := timeLevelShifts[bottom]
	for jobID := range ix.jobs(held, msKey(unit<<shift), msKey((unit+1)<<shift), false) {
		if r == 0 {
			return jobID, true
		}
		r--
	}
	return ulid.ULID{}, false
}

// bottomUnit finds the bottom-level unit under parent that holds rank r of the jobs there, the
// rank within it and the states with jobs in it (none past the end), reading the counters of
// the states and terms in unit order, summed, up to that unit.
func (ix *timeIndex) bottomUnit(parent uint64, r int) (uint64, int, []JobState) {
	level := len(timeLevelShifts) - 1
	span := timeLevelShifts[level-1] - timeLevelShifts[level]
	lo, hi := binary.BigEndian.AppendUint64(nil, parent<<span), binary.BigEndian.AppendUint64(nil, (parent+1)<<span)
	ix.tx.mustFlushCounts()
	type counterRange struct {
		*keyRange
		state, sign int
	}
	var ranges []counterRange
	for _, term := range ix.terms {
		for i, s := range ix.states {
			kr := ix.tx.openRange(term.bucket, key(term.scope, []byte{byte(s), byte(level)}), lo, hi, false)
			ranges = append(ranges, counterRange{kr, i, term.sign})
		}
	}
	perState := make([]int, len(ix.states))
	for {
		unit, more := ^uint64(0), false
		for _, kr := range ranges {
			if kr.k != nil {
				unit, more = min(unit, binary.BigEndian.Uint64(kr.k[len(kr.prefix):])), true
			}
		}
		if !more {
			return 0, 0, nil
		}
		clear(perState)
		for _, kr := range ranges {
			if kr.k != nil && binary.BigEndian.Uint64(kr.k[len(kr.prefix):]) == unit {
				perState[kr.state] += kr.sign * readCount(kr.v)
				kr.next()
			}
		}
		n := 0
		for _, count := range perState {
			n += max(count, 0)
		}
		if r < n {
			var held []JobState
			for i, count := range perState {
				if count > 0 {
					held = append(held, ix.states[i])
				}
			}
			return unit, r, held
		}
		r -= n
	}
}

// sampleRanks returns up to n distinct ranks in [from, to), uniformly, in random order.
func sampleRanks(from, to, n int, intN func(int) int) []int {
	size := to - from
	if size <= 0 {
		return nil
	}
	if n >= size {
		out := make([]int, size)
		for i := range out {
			out[i] = from + i
		}
		shuffle(out, intN)
		return out
	}
	seen := make(map[int]bool, n)
	out := make([]int, 0, n)
	for len(out) < n {
		r := from + intN(size)
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

func shuffle(list []int, intN func(int) int) {
	for i := len(list) - 1; i > 0; i-- {
		k := intN(i + 1)
		list[i], list[k] = list[k], list[i]
	}
}
