package persistence

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"iter"
	"slices"

	"github.com/oklog/ulid/v2"
)

// Rank indexes: from the counters by creation time (timecounts.go) and the indexes they count,
// how many of a scope's jobs come before an id, which job has a rank, and a page from an id.

// jobsInUnit is one unit of a level and how many matching jobs it holds.
type jobsInUnit struct {
	unit  uint64
	count int
}

// signedCounters is one set of counters a time index adds (sign 1) or takes away (sign -1).
type signedCounters struct {
	bucket, scope []byte
	sign          int
}

// rankSource is what ranks jobs in id order: their counts by unit of creation time, and the jobs.
type rankSource interface {
	// children lists, in unit order, the non-empty units of a level inside a parent unit of
	// the level above (level 0: every unit), with their jobs' count.
	children(level int, parent uint64) []jobsInUnit
	// bottomUnit finds the bottom-level unit under parent that holds rank r of the jobs there,
	// the rank within it, its number of jobs and the states to read them in (none past the end).
	bottomUnit(parent uint64, r int) (unit uint64, rank, count int, states []JobState)
	// jobsIn yields, in id order (or reversed), the jobs in some states with ids in [lo, hi).
	jobsIn(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID]
	// heldStates are the states the source's jobs may be in.
	heldStates() []JobState
}

// rankIndex answers rank questions over a source: how many jobs come before an id, which job
// has a rank, a page from an id.
type rankIndex struct{ rankSource }

// jobList yields, in id order (or reversed), a scope's jobs in some states with ids in [lo, hi).
type jobList func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID]

// timeIndex is the rank source of the jobs of a scope in a set of states: its counters are the
// sum of its terms.
type timeIndex struct {
	tx     *txn
	terms  []signedCounters
	states []JobState
	list   jobList
	// units memoizes the counters read: level and parent unit -> the units below it.
	units map[[2]uint64][]jobsInUnit
}

var _ rankSource = (*timeIndex)(nil)

func (t *txn) newTimeIndex(states []JobState, list jobList, terms ...signedCounters) rankIndex {
	return rankIndex{&timeIndex{tx: t, terms: terms, states: states, list: list, units: make(map[[2]uint64][]jobsInUnit)}}
}

func (ix *timeIndex) jobsIn(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID] {
	return ix.list(states, lo, hi, reverse)
}

func (ix *timeIndex) heldStates() []JobState { return ix.states }

// scopeIndex ranks the jobs of a scope: a team's from its counters and the creation index, a
// tag's from the tag's counters and index (whose entries carry the job's state).
func (t *txn) scopeIndex(sc jobScope, states []JobState) rankIndex {
	return t.newTimeIndex(states, t.scopeJobs(sc, false), sc.counters())
}

// counters is the scope's term of all its jobs.
func (sc jobScope) counters() signedCounters {
	if sc.tag == "" {
		return signedCounters{bucketJobTimeCounts, id(sc.team), 1}
	}
	return signedCounters{bucketTagTimeCounts, sc.prefix(), 1}
}

// scopeJobs lists the scope's jobs from the creation index or the tag's; with onlyDefault, only
// the jobs with the default priority (those the creation index does not mark).
func (t *txn) scopeJobs(sc jobScope, onlyDefault bool) jobList {
	if sc.tag != "" {
		return t.tagJobs([]jobScope{sc}, onlyDefault)
	}
	var keep func(jobID, v []byte) bool
	if onlyDefault {
		keep = func(_, v []byte) bool { return len(v) == 0 }
	}
	team := id(sc.team)
	return func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID] {
		prefixes := make([][]byte, len(states))
		for i, s := range states {
			prefixes[i] = key(team, stateKey(s))
		}
		return t.mergeRanges(bucketJobsByTeamState, prefixes, lo, hi, reverse, keep)
	}
}

// tagJobs lists the jobs carrying any of the scopes' tags, each once, from the tags' index; with
// onlyDefault, only the jobs with the default priority (looked up in the creation index).
func (t *txn) tagJobs(scopes []jobScope, onlyDefault bool) jobList {
	prefixes := make([][]byte, len(scopes))
	for i, sc := range scopes {
		prefixes[i] = sc.prefix()
	}
	var keep func(jobID, v []byte) bool
	if onlyDefault {
		team := id(scopes[0].team)
		keep = func(jobID, v []byte) bool { return len(t.get(bucketJobsByTeamState, key(team, v[:1], jobID))) == 0 }
	}
	return t.indexJobs(bucketJobsByTeamTag, prefixes, keep)
}

// levelJobs lists the jobs of one priority (inverted) of a team, or of those carrying any of
// the scopes' tags, from the priority index (tags looked up job by job).
func (t *txn) levelJobs(scopes []jobScope, inverted []byte) jobList {
	var keep func(jobID, v []byte) bool
	if scopes[0].tag != "" {
		keep = func(jobID, _ []byte) bool {
			for _, sc := range scopes {
				if t.get(bucketJobsByTeamTag, key(sc.prefix(), jobID)) != nil {
					return true
				}
			}
			return false
		}
	}
	return t.indexJobs(bucketJobsByTeamPriority, [][]byte{key(id(scopes[0].team), inverted)}, keep)
}

// indexJobs lists the jobs ending the keys under the prefixes, each once, whose value (the job's
// state) is among those asked and that keep (nil: all) accepts.
func (t *txn) indexJobs(bucket []byte, prefixes [][]byte, keep func(jobID, v []byte) bool) jobList {
	return func(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID] {
		in := stateIn(states)
		return t.mergeRanges(bucket, prefixes, lo, hi, reverse, func(jobID, v []byte) bool {
			return in(v) && (keep == nil || keep(jobID, v))
		})
	}
}

// stateIn accepts an index value that starts with one of the states.
func stateIn(states []JobState) func(v []byte) bool {
	var in [256]bool
	for _, s := range states {
		in[s] = true
	}
	return func(v []byte) bool { return in[v[0]] }
}

// defaultPriorityIndex ranks the scope's jobs with the default priority: all its jobs less those
// with a priority of their own.
func (t *txn) defaultPriorityIndex(sc jobScope, states []JobState) rankIndex {
	return t.newTimeIndex(states, t.scopeJobs(sc, true), sc.counters(), signedCounters{bucketPriorityTimeCounts, sc.ownPriority(), -1})
}

// priorityLevelIndex ranks the scope's jobs of one priority (inverted), from the priority index.
func (t *txn) priorityLevelIndex(sc jobScope, inverted []byte, states []JobState) rankIndex {
	return t.newTimeIndex(states, t.levelJobs([]jobScope{sc}, inverted), signedCounters{bucketPriorityTimeCounts, sc.priorityLevel(inverted), 1})
}

// priorityLevel is a priority (inverted) some of a listing's scopes have jobs of, the scopes
// holding it, and how many of their jobs, in the states asked, have it (more than that when
// jobs are in several scopes).
type priorityLevel struct {
	inverted []byte
	scopes   []heldScope
	count    int
}

// priorityLevels yields the priorities of the scopes' jobs with a priority of their own, in
// pickup order, from the counters by priority: reading on only as far as the caller goes, and
// stepping over priorities held only by jobs in other states without a seek. With one scope,
// skipBlock (when set) is asked, before each block of priorities, whether to step over it whole
// given how many jobs it holds in the scope's states.
func (t *txn) priorityLevels(scopes []heldScope, skipBlock func(block uint64, count int) bool) iter.Seq[priorityLevel] {
	if len(scopes) > 1 {
		skipBlock = nil
	}
	return func(yield func(priorityLevel) bool) {
		t.mustFlushCounts()
		type head struct {
			sc       heldScope
			next     func() ([]byte, int, bool)
			inverted []byte
			count    int
			ok, used bool
		}
		heads := make([]*head, len(scopes))
		for i, sc := range scopes {
			heads[i] = &head{sc: sc, next: t.scopeLevels(sc, skipBlock), used: true}
		}
		for {
			// A scope reads on only once the caller is done with its last priority: skipBlock
			// must see the caller's state after it.
			for _, h := range heads {
				if h.used {
					h.inverted, h.count, h.ok = h.next()
					h.used = false
				}
			}
			var level priorityLevel
			for _, h := range heads {
				if h.ok && (level.inverted == nil || bytes.Compare(h.inverted, level.inverted) < 0) {
					level.inverted = h.inverted
				}
			}
			if level.inverted == nil {
				return
			}
			for _, h := range heads {
				if h.ok && bytes.Equal(h.inverted, level.inverted) {
					level.scopes, level.count = append(level.scopes, h.sc), level.count+h.count
					h.used = true
				}
			}
			if !yield(level) {
				return
			}
		}
	}
}

// scopeLevels steps through a scope's priorities in pickup order: each call answers the next
// priority (inverted) with jobs in the scope's states and how many; false past the last. Blocks
// skipBlock (nil: none) steps over are not read.
func (t *txn) scopeLevels(sc heldScope, skipBlock func(block uint64, count int) bool) func() ([]byte, int, bool) {
	levels, blocks := sc.priorityLevel(nil), sc.ownPriority()
	held := stateIn(sc.states)
	b := t.bucket(bucketPriorityCounts)
	c := b.Cursor()
	k, v := c.Seek(levels)
	// blockCount sums a block's jobs in the scope's states.
	blockCount := func(block uint64) int {
		at := binary.BigEndian.AppendUint64(bytes.Clone(blocks), block)
		n := 0
		bc := b.Cursor()
		for bk, bv := bc.Seek(at); bk != nil && hasPrefix(bk, at); bk, bv = bc.Next() {
			if held(bk[len(at):]) {
				n += readCount(bv)
			}
		}
		return n
	}
	asked, first := uint64(0), true // the last block skipBlock was asked about
	return func() ([]byte, int, bool) {
		// levels + inverted priority + state -> count
		for k != nil && hasPrefix(k, levels) {
			inverted := bytes.Clone(k[len(levels) : len(levels)+8])
			if block := binary.BigEndian.Uint64(inverted) >> priorityBlockShift; skipBlock != nil && (first || block != asked) {
				asked, first = block, false
				if skipBlock(block, blockCount(block)) {
					if block == ^uint64(0)>>priorityBlockShift {
						return nil, 0, false
					}
					k, v = c.Seek(binary.BigEndian.AppendUint64(bytes.Clone(levels), (block+1)<<priorityBlockShift))
					continue
				}
			}
			n := 0
			for ; k != nil && hasPrefix(k, levels) && bytes.Equal(k[len(levels):len(levels)+8], inverted); k, v = c.Next() {
				if held(k[len(levels)+8:]) {
					n += readCount(v)
				}
			}
			if n > 0 {
				return inverted, n, true
			}
		}
		return nil, 0, false
	}
}

// children sums the counters of the states and the terms.
func (ix *timeIndex) children(level int, parent uint64) []jobsInUnit {
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
	var out []jobsInUnit
	for _, term := range ix.terms {
		c := ix.tx.bucket(term.bucket).Cursor()
		for _, s := range ix.states {
			prefix := key(term.scope, []byte{byte(s), byte(level)})
			for k, v := c.Seek(timeCountKey(term.scope, s, level, lo)); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
				unit := binary.BigEndian.Uint64(k[len(prefix):])
				if unit >= hi {
					break
				}
				out = append(out, jobsInUnit{unit, term.sign * readCount(v)})
			}
		}
	}
	if len(ix.states)*len(ix.terms) > 1 {
		slices.SortFunc(out, func(a, b jobsInUnit) int { return cmp.Compare(a.unit, b.unit) })
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
	out = slices.DeleteFunc(out, func(uc jobsInUnit) bool { return uc.count <= 0 })
	ix.units[memo] = out
	return out
}

// before counts the jobs whose id sorts before bound (a 16-byte id prefix).
func (ix rankIndex) before(bound []byte) int {
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
	for range ix.jobsIn(ix.heldStates(), msKey(parent<<timeLevelShifts[len(timeLevelShifts)-1]), bound, false) {
		n++
	}
	return n
}

// nth returns the id of the job at rank r (0-based, in id order); false past the end. The upper
// levels' counters are read once per index and kept; a time index reads the bottom level's, and
// the jobs of the millisecond found, from its nearer end up to the rank and no further, nothing
// kept: a random page's samples mostly fall in different milliseconds.
func (ix rankIndex) nth(r int) (ulid.ULID, bool) {
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
	unit, r, n, held := ix.bottomUnit(parent, r)
	if len(held) == 0 {
		return ulid.ULID{}, false
	}
	// The millisecond's jobs are read from its nearer end.
	reverse := r >= n/2
	if reverse {
		r = n - 1 - r
	}
	shift := timeLevelShifts[bottom]
	for jobID := range ix.jobsIn(held, msKey(unit<<shift), msKey((unit+1)<<shift), reverse) {
		if r == 0 {
			return jobID, true
		}
		r--
	}
	return ulid.ULID{}, false
}

// span is the ranks [start, end) of the index's jobs created within [lo, hi).
func (ix rankIndex) span(lo, hi []byte) (start, end int) {
	if lo != nil {
		start = ix.before(lo)
	}
	if hi != nil {
		return start, ix.before(hi)
	}
	for _, uc := range ix.children(0, 0) {
		end += uc.count
	}
	return start, end
}

// page reads up to limit ids of the index's jobs within [lo, hi), from one end.
func (ix rankIndex) page(limit int, lo, hi []byte, reverse bool) []ulid.ULID {
	if limit <= 0 {
		return nil
	}
	ids := make([]ulid.ULID, 0, limit)
	for jobID := range ix.jobsIn(ix.heldStates(), lo, hi, reverse) {
		if ids = append(ids, jobID); len(ids) == limit {
			break
		}
	}
	return ids
}

// bottomUnit reads the counters of the states and terms in unit order, summed, up to the unit
// holding rank r, and answers the states with jobs in it.
func (ix *timeIndex) bottomUnit(parent uint64, r int) (uint64, int, int, []JobState) {
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
	defer func() {
		for _, kr := range ranges {
			ix.tx.closeRange(kr.keyRange)
		}
	}()
	perState := make([]int, len(ix.states))
	for {
		unit, more := ^uint64(0), false
		for _, kr := range ranges {
			if kr.k != nil {
				unit, more = min(unit, binary.BigEndian.Uint64(kr.k[len(kr.prefix):])), true
			}
		}
		if !more {
			return 0, 0, 0, nil
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
			return unit, r, n, held
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

// unionIndex ranks the jobs in any of several indexes, each job once (a listing asking for
// several tags). A unit's count is its members' sum where one member alone has jobs in it, and
// the bound's where a member has as many jobs as the bound (an index holding every member's
// jobs: the team's), for then that member has them all. Elsewhere it is counted from the units
// below, and at the bottom from the jobs: the cost grows with how many milliseconds the members
// share some but not all of their jobs in, not with how many jobs they hold.
type unionIndex struct {
	members []rankIndex
	bound   rankIndex
	states  []JobState
	// merged lists the members' jobs, each once.
	merged jobList
	units  map[[2]uint64][]jobsInUnit
}

var _ rankSource = (*unionIndex)(nil)

func newUnionIndex(members []rankIndex, states []JobState, merged jobList, bound rankIndex) rankIndex {
	return rankIndex{&unionIndex{members: members, bound: bound, states: states, merged: merged, units: make(map[[2]uint64][]jobsInUnit)}}
}

func (u *unionIndex) heldStates() []JobState { return u.states }

func (u *unionIndex) children(level int, parent uint64) []jobsInUnit {
	memo := [2]uint64{uint64(level), parent}
	if cached, ok := u.units[memo]; ok {
		return cached
	}
	var all []jobsInUnit
	for _, m := range u.members {
		all = append(all, m.children(level, parent)...)
	}
	slices.SortStableFunc(all, func(a, b jobsInUnit) int { return cmp.Compare(a.unit, b.unit) })
	var out []jobsInUnit
	for i := 0; i < len(all); {
		k := i + 1
		for k < len(all) && all[k].unit == all[i].unit {
			k++
		}
		uc := all[i]
		if k-i > 1 {
			uc.count = u.sharedCount(level, parent, all[i:k])
		}
		out = append(out, uc)
		i = k
	}
	u.units[memo] = out
	return out
}

// sharedCount counts the jobs of a unit (under parent) where several members have jobs (their
// counts there): the bound's count when a member has as many, else the sum of its units below,
// or at the bottom its jobs, each once. The bound's counters are read only here, so tags that
// share no unit never read them.
func (u *unionIndex) sharedCount(level int, parent uint64, counts []jobsInUnit) int {
	unit := counts[0].unit
	bound := u.bound.children(level, parent)
	if i, ok := slices.BinarySearchFunc(bound, unit, func(uc jobsInUnit, unit uint64) int { return cmp.Compare(uc.unit, unit) }); ok {
		for _, uc := range counts {
			if uc.count == bound[i].count {
				return uc.count
			}
		}
	}
	n := 0
	if level < len(timeLevelShifts)-1 {
		for _, uc := range u.children(level+1, unit) {
			n += uc.count
		}
		return n
	}
	for range u.jobsIn(u.states, msKey(unit), msKey(unit+1), false) {
		n++
	}
	return n
}

func (u *unionIndex) bottomUnit(parent uint64, r int) (uint64, int, int, []JobState) {
	for _, uc := range u.children(len(timeLevelShifts)-1, parent) {
		if r < uc.count {
			return uc.unit, r, uc.count, u.states
		}
		r -= uc.count
	}
	return 0, 0, 0, nil
}

func (u *unionIndex) jobsIn(states []JobState, lo, hi []byte, reverse bool) iter.Seq[ulid.ULID] {
	return u.merged(states, lo, hi, reverse)
}
