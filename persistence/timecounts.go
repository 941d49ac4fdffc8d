package persistence

import (
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

// addTimeCounts moves a job's counters at every level, its team's and its tags'.
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
	return nil
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

// timeIndex answers rank questions over the jobs of a scope (a team, or a team's tag) in a set of
// states, in id order.
type timeIndex struct {
	tx       *Tx
	counters []byte // the bucket of the scope's counters
	scope    []byte
	states   []JobState
	// jobs yields, in id order (or reversed), the scope's jobs in some states with ids in
	// [lo, hi).
	jobs func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID]
	// units memoizes the counters read: level and parent unit -> the units below it.
	units map[[2]uint64][]unitCount
}

// teamTimeIndex ranks a team's jobs: counters by team, jobs from the creation index.
func (t *Tx) teamTimeIndex(team ulid.ULID, states []JobState) *timeIndex {
	return &timeIndex{tx: t, counters: bucketJobTimeCounts, scope: id(team), states: states, units: make(map[[2]uint64][]unitCount),
		jobs: func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID] {
			prefixes := make([][]byte, len(states))
			for i, s := range states {
				prefixes[i] = key(id(team), stateKey(s))
			}
			return t.mergeRanges(bucketJobsByTeamState, prefixes, lo, hi, reverse, nil)
		}}
}

// tagTimeIndex ranks the jobs of a team carrying a tag: counters by tag, jobs from the tag's
// index (its entries carry the job's state).
func (t *Tx) tagTimeIndex(team ulid.ULID, tag string, states []JobState) *timeIndex {
	scope := key(id(team), tagKey(tag))
	return &timeIndex{tx: t, counters: bucketTagTimeCounts, scope: scope, states: states, units: make(map[[2]uint64][]unitCount),
		jobs: func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID] {
			in := make(map[JobState]bool, len(states))
			for _, s := range states {
				in[s] = true
			}
			return t.mergeRanges(bucketJobsByTeamTag, [][]byte{scope}, lo, hi, reverse, stateIn(in))
		}}
}

// children lists, in unit order, the non-empty units of a level inside a parent unit of the
// level above (level 0: every unit), summed over the states.
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
	// Each state's counters come in unit order; with several states, sorting them together and
	// adding up equal units sums them.
	var out []unitCount
	c := ix.tx.bucket(ix.counters).Cursor()
	for _, s := range ix.states {
		prefix := key(ix.scope, []byte{byte(s), byte(level)})
		for k, v := c.Seek(timeCountKey(ix.scope, s, level, lo)); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
			unit := binary.BigEndian.Uint64(k[len(prefix):])
			if unit >= hi {
				break
			}
			if n := readCount(v); n > 0 {
				out = append(out, unitCount{unit, n})
			}
		}
	}
	if len(ix.states) > 1 {
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
// rank within it and the states with jobs in it (none past the end), reading the states'
// counters in unit order, summed, up to that unit.
func (ix *timeIndex) bottomUnit(parent uint64, r int) (uint64, int, []JobState) {
	level := len(timeLevelShifts) - 1
	span := timeLevelShifts[level-1] - timeLevelShifts[level]
	lo, hi := binary.BigEndian.AppendUint64(nil, parent<<span), binary.BigEndian.AppendUint64(nil, (parent+1)<<span)
	ix.tx.mustFlushCounts()
	ranges := make([]*keyRange, len(ix.states))
	for i, s := range ix.states {
		ranges[i] = ix.tx.openRange(ix.counters, key(ix.scope, []byte{byte(s), byte(level)}), lo, hi, false)
	}
	for {
		unit := ^uint64(0)
		for _, kr := range ranges {
			if kr.k != nil {
				unit = min(unit, binary.BigEndian.Uint64(kr.k[len(kr.prefix):]))
			}
		}
		n, in := 0, uint64(0) // in: bit i for ix.states[i]
		for i, kr := range ranges {
			if kr.k != nil && binary.BigEndian.Uint64(kr.k[len(kr.prefix):]) == unit {
				n += readCount(kr.v)
				in |= 1 << i
				kr.next()
			}
		}
		switch {
		case in == 0:
			return 0, 0, nil
		case r < n:
			var held []JobState
			for i, s := range ix.states {
				if in&(1<<i) != 0 {
					held = append(held, s)
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
