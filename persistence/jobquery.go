package persistence

import (
	"bytes"
	"iter"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"
)

// JobSort orders a job listing.
type JobSort string

// Listing orders. Priority order is pickup order: highest priority first, then oldest.
const (
	SortOldestFirst JobSort = "oldest_first"
	SortNewestFirst JobSort = "newest_first"
	SortPriority    JobSort = "priority"
	SortRandom      JobSort = "random"
)

// JobQuery selects a page of one team's jobs.
type JobQuery struct {
	TeamID ulid.ULID
	Offset int
	Limit  int
	// CreatedFrom (inclusive) and CreatedTo (exclusive) bound creation time; zero is unbounded.
	CreatedFrom time.Time
	CreatedTo   time.Time
	// States the jobs may be in; empty means every state.
	States []JobState
	// Tags: a job matches when it carries any of them; empty means no tag filter.
	Tags []string
	Sort JobSort
}

// ListJobs returns one page of jobs matching q and how many match in all. It reads indexes only;
// job records are loaded for the page alone. With at most one tag, in any order, the counters by
// creation time find the page's first job, the total and random samples without walking the
// jobs before them; several tags walk their merged index.
func (t *Tx) ListJobs(q JobQuery) ([]*Job, int, error) {
	allowed := stateSet(q.States)
	lo, hi := idBounds(q.CreatedFrom, q.CreatedTo)
	if len(q.Tags) > 1 {
		// Tags no job in these states carries change nothing; one left is ranked like one asked.
		q.Tags = slices.DeleteFunc(slices.Clone(q.Tags), func(tag string) bool {
			return t.taggedCount(JobQuery{TeamID: q.TeamID, Tags: []string{tag}}, allowed) == 0
		})
		if len(q.Tags) == 0 {
			return []*Job{}, 0, nil
		}
	}
	var ids []ulid.ULID
	var total int
	switch {
	case len(q.Tags) > 1:
		ids, total = t.walkList(q, allowed, lo, hi)
	case q.Sort == SortPriority:
		ids, total = t.priorityList(q, allowed, lo, hi)
	default:
		ids, total = t.rankedList(q, allowed, lo, hi)
	}
	jobs := make([]*Job, 0, len(ids))
	for _, jobID := range ids {
		j, err := t.Job(jobID)
		if err != nil {
			return nil, 0, err
		}
		jobs = append(jobs, j)
	}
	return jobs, total, nil
}

// rankedList pages through the jobs of some states, or those of them carrying q's one tag, in
// creation order (or samples them) by rank.
func (t *Tx) rankedList(q JobQuery, allowed map[JobState]bool, lo, hi []byte) ([]ulid.ULID, int) {
	ix, start, end := t.ranks(q, allowed, lo, hi)
	total := max(end-start, 0)
	var ids []ulid.ULID
	switch q.Sort {
	case SortRandom:
		for _, r := range sampleRanks(start+q.Offset, end, q.Limit, rand.IntN) {
			if jobID, ok := ix.nth(r); ok {
				ids = append(ids, jobID)
			}
		}
	case SortNewestFirst:
		if pos := end - 1 - q.Offset; pos >= start {
			if last, ok := ix.nth(pos); ok {
				ids = ix.page(q.Limit, lo, successor(last), true)
			}
		}
	default:
		if pos := start + q.Offset; pos < end {
			if first, ok := ix.nth(pos); ok {
				ids = ix.page(q.Limit, first[:], hi, false)
			}
		}
	}
	return ids, total
}

// ranks is the rank index of q's jobs (of a team, or of its one tag) and the ranks [start, end)
// of those created within [lo, hi).
func (t *Tx) ranks(q JobQuery, allowed map[JobState]bool, lo, hi []byte) (ix *timeIndex, start, end int) {
	sc := scopeOf(q)
	// The rank index leaves out the states with no job in its scope: each would cost a seek per
	// level and per millisecond read.
	held, end := heldStates(allowed, func(s JobState) int {
		if sc.tag != "" {
			return t.TagCount(q.TeamID, sc.tag, s)
		}
		return t.JobCount(q.TeamID, s)
	})
	ix = t.scopeIndex(sc, held)
	if lo != nil {
		start = ix.before(lo)
	}
	if hi != nil {
		end = ix.before(hi)
	}
	return ix, start, end
}

// scopeOf is the scope of a query with at most one tag.
func scopeOf(q JobQuery) jobScope {
	if len(q.Tags) == 1 {
		return jobScope{q.TeamID, q.Tags[0]}
	}
	return jobScope{team: q.TeamID}
}

// span is the ranks [start, end) of the index's jobs created within [lo, hi).
func (ix *timeIndex) span(lo, hi []byte) (start, end int) {
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

// priorityList pages through q's jobs (of a team, or of its one tag) in pickup order: each
// priority above the default, highest first, then the default's jobs, then the priorities
// below, each oldest first. The segments' counters find the one holding the page's first job
// and its rank there; the page reads on from it.
func (t *Tx) priorityList(q JobQuery, allowed map[JobState]bool, lo, hi []byte) ([]ulid.ULID, int) {
	all, start, end := t.ranks(q, allowed, lo, hi)
	total := max(end-start, 0)
	if total <= q.Offset || q.Limit <= 0 {
		return nil, total
	}
	sc, held := scopeOf(q), all.states
	levels := t.priorityLevels(sc)
	defaultAt, _ := slices.BinarySearchFunc(levels, invertedPriority(0), bytes.Compare)
	segments := make([]func() *timeIndex, 0, len(levels)+1)
	for _, inverted := range levels[:defaultAt] {
		segments = append(segments, func() *timeIndex { return t.priorityLevelIndex(sc, inverted, held) })
	}
	segments = append(segments, func() *timeIndex { return t.defaultPriorityIndex(sc, held) })
	for _, inverted := range levels[defaultAt:] {
		segments = append(segments, func() *timeIndex { return t.priorityLevelIndex(sc, inverted, held) })
	}
	skip := q.Offset
	ids := make([]ulid.ULID, 0, q.Limit)
	for _, segment := range segments {
		ix := segment()
		from := lo
		if skip > 0 {
			first, last := ix.span(lo, hi)
			if n := last - first; skip >= n {
				skip -= max(n, 0)
				continue
			}
			jobID, ok := ix.nth(first + skip)
			if !ok {
				break
			}
			from, skip = jobID[:], 0
		}
		if ids = append(ids, ix.page(q.Limit-len(ids), from, hi, false)...); len(ids) == q.Limit {
			break
		}
	}
	return ids, total
}

// page reads up to limit ids of the index's jobs within [lo, hi), from one end.
func (ix *timeIndex) page(limit int, lo, hi []byte, reverse bool) []ulid.ULID {
	if limit <= 0 {
		return nil
	}
	ids := make([]ulid.ULID, 0, limit)
	for jobID := range ix.jobs(ix.states, lo, hi, reverse) {
		if ids = append(ids, jobID); len(ids) == limit {
			break
		}
	}
	return ids
}

// successor is the id bound just after id (nil past the last id).
func successor(u ulid.ULID) []byte {
	return prefixEnd(u[:])
}

// walkList pages through the jobs carrying any of several tags by walking their index. The total
// comes first, by counting their merged index, so the walk stops at the page.
func (t *Tx) walkList(q JobQuery, allowed map[JobState]bool, lo, hi []byte) ([]ulid.ULID, int) {
	var ids []ulid.ULID
	if q.Sort == SortRandom { // several tags: their union has no rank index
		for jobID := range t.matchingJobs(q, allowed, lo, hi) {
			ids = append(ids, jobID)
		}
		rand.Shuffle(len(ids), func(i, k int) { ids[i], ids[k] = ids[k], ids[i] })
		return page(ids, q.Offset, q.Limit), len(ids)
	}
	total := 0
	for range t.mergeRanges(bucketJobsByTeamTag, t.tagPrefixes(q), lo, hi, false, stateIn(allowed)) {
		total++
	}
	if total <= q.Offset || q.Limit <= 0 {
		return nil, total
	}
	n := 0
	for jobID := range t.matchingJobs(q, allowed, lo, hi) {
		if n >= q.Offset {
			if ids = append(ids, jobID); len(ids) == q.Limit {
				break
			}
		}
		n++
	}
	return ids, total
}

// costOfLookup is the cost, in reads of consecutive index entries, of looking one key up: what
// chooses between reading every job of a tag and checking the tag of each job a walk meets (a
// variable so that tests can force either way).
var costOfLookup = 8

// heldJobs lists the states among allowed the team has jobs in, and how many jobs they hold.
func (t *Tx) heldJobs(teamID ulid.ULID, allowed map[JobState]bool) ([]JobState, int) {
	return heldStates(allowed, func(s JobState) int { return t.JobCount(teamID, s) })
}

// heldStates lists the states among allowed that count says hold jobs, and how many in all.
func heldStates(allowed map[JobState]bool, count func(JobState) int) ([]JobState, int) {
	var held []JobState
	all := 0
	for _, s := range AllJobStates {
		if allowed[s] {
			if n := count(s); n > 0 {
				held, all = append(held, s), all+n
			}
		}
	}
	return held, all
}

func page(ids []ulid.ULID, offset, limit int) []ulid.ULID {
	if offset >= len(ids) {
		return nil
	}
	return ids[offset:min(len(ids), offset+limit)]
}

func stateSet(states []JobState) map[JobState]bool {
	set := make(map[JobState]bool)
	if len(states) == 0 {
		states = AllJobStates
	}
	for _, s := range states {
		set[s] = true
	}
	return set
}

// idBounds turns a creation-time window into ULID key bounds: ids carry their creation
// millisecond, so [lo, hi) holds exactly the jobs created in [from, to).
func idBounds(from, to time.Time) (lo, hi []byte) {
	if !from.IsZero() {
		lo = msBound(from)
	}
	if !to.IsZero() {
		hi = msBound(to)
	}
	return lo, hi
}

// msBound is the smallest ULID whose millisecond is not before t.
func msBound(t time.Time) []byte {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return msKey(uint64(max(ms, 0)))
}

// msKey is the smallest ULID of a millisecond (past the last ULID time: all ones).
func msKey(ms uint64) []byte {
	var u ulid.ULID
	if err := u.SetTime(ms); err != nil {
		u = ulid.ULID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	return u[:]
}

func inBounds(jobID, lo, hi []byte) bool {
	return (lo == nil || bytes.Compare(jobID, lo) >= 0) && (hi == nil || bytes.Compare(jobID, hi) < 0)
}

// matchingJobs yields the ids of q's matching jobs in q's order (any order for random): priority
// order from the priority index, else creation order from the tags' index.
func (t *Tx) matchingJobs(q JobQuery, allowed map[JobState]bool, lo, hi []byte) iter.Seq[ulid.ULID] {
	team := id(q.TeamID)
	if q.Sort == SortPriority {
		hasTag := t.tagFilter(q, allowed, lo, hi)
		wanted := func(jobID []byte) bool {
			return inBounds(jobID, lo, hi) && (hasTag == nil || hasTag(jobID))
		}
		var states [][]byte
		for _, s := range AllJobStates {
			if allowed[s] {
				states = append(states, key(team, stateKey(s)))
			}
		}
		return func(yield func(ulid.ULID) bool) {
			more := true
			ownPriority := func(k, v []byte) bool {
				if jobID := k[len(team)+8:]; allowed[JobState(v[0])] && wanted(jobID) {
					more = yield(ulidAt(jobID))
				}
				return more
			}
			// Priorities above the default, the default's jobs oldest first (the creation
			// index without the jobs it marks), then priorities below.
			t.rangeScan(bucketJobsByTeamPriority, team, nil, invertedPriority(0), false, ownPriority)
			if !more {
				return
			}
			for jobID := range t.mergeRanges(bucketJobsByTeamState, states, lo, hi, false, func(v []byte) bool { return len(v) == 0 }) {
				if wanted(jobID[:]) && !yield(jobID) {
					return
				}
			}
			t.rangeScan(bucketJobsByTeamPriority, team, invertedPriority(-1), nil, false, ownPriority)
		}
	}
	return t.mergeRanges(bucketJobsByTeamTag, t.tagPrefixes(q), lo, hi, q.Sort == SortNewestFirst, stateIn(allowed))
}

// stateIn accepts a tag index entry (its value is the job's state) whose state is in the set.
func stateIn(states map[JobState]bool) func(v []byte) bool {
	return func(v []byte) bool { return states[JobState(v[0])] }
}

// tagPrefixes are the tags' index prefixes of q's team and tags.
func (t *Tx) tagPrefixes(q JobQuery) [][]byte {
	prefixes := make([][]byte, len(q.Tags))
	for i, tag := range q.Tags {
		prefixes[i] = key(id(q.TeamID), tagKey(tag))
	}
	return prefixes
}

// tagFilter tells whether a job, met in an allowed state, carries any of q's tags (nil without
// tags), for a walk in another order that stops at the page: from the set of the tags' jobs, or,
// when the tags are frequent enough that this costs less, by looking each job up in the tags'
// index.
func (t *Tx) tagFilter(q JobQuery, allowed map[JobState]bool, lo, hi []byte) func(jobID []byte) bool {
	if len(q.Tags) == 0 {
		return nil
	}
	_, all := t.heldJobs(q.TeamID, allowed)
	tagged := t.taggedCount(q, allowed)
	// The walk meets about all/tagged jobs per tagged one it keeps.
	walked := float64(q.Offset+q.Limit) * float64(all) / float64(max(tagged, 1))
	if tagged > 0 && float64(costOfLookup*len(q.Tags))*walked < float64(tagged) {
		return t.tagLookup(q.TeamID, q.Tags)
	}
	set := make(map[ulid.ULID]bool, tagged)
	for _, tag := range q.Tags {
		prefix := key(id(q.TeamID), tagKey(tag))
		t.rangeScan(bucketJobsByTeamTag, prefix, lo, hi, false, func(k, v []byte) bool {
			if allowed[JobState(v[0])] {
				set[ulidAt(k[len(prefix):])] = true
			}
			return true
		})
	}
	return func(jobID []byte) bool { return set[ulidAt(jobID)] }
}

// taggedCount is how many jobs in the allowed states carry each of q's tags, summed: the number
// carrying any of them, or more when jobs carry several.
func (t *Tx) taggedCount(q JobQuery, allowed map[JobState]bool) int {
	n := 0
	for _, tag := range q.Tags {
		for s := range allowed {
			n += t.TagCount(q.TeamID, tag, s)
		}
	}
	return n
}

// tagLookup tells whether a job carries any of the tags, from the tags' index one key at a time
// (the walk that meets the job has checked its state).
func (t *Tx) tagLookup(teamID ulid.ULID, tags []string) func(jobID []byte) bool {
	b := t.bucket(bucketJobsByTeamTag)
	prefixes := make([][]byte, len(tags))
	for i, tag := range tags {
		prefixes[i] = key(id(teamID), tagKey(tag))
	}
	return func(jobID []byte) bool {
		for _, prefix := range prefixes {
			if b.Get(key(prefix, jobID)) != nil {
				return true
			}
		}
		return false
	}
}

// mergeRanges yields, in id order and each once, the job ids ending the keys under each prefix
// whose value accept takes (nil takes all): a k-way merge of sorted index ranges.
func (t *Tx) mergeRanges(bucket []byte, prefixes [][]byte, lo, hi []byte, reverse bool, accept func(v []byte) bool) iter.Seq[ulid.ULID] {
	return func(yield func(ulid.ULID) bool) {
		ranges := make([]*keyRange, len(prefixes))
		for i, prefix := range prefixes {
			ranges[i] = t.openRange(bucket, prefix, lo, hi, reverse)
			ranges[i].skipTo(accept)
		}
		var last ulid.ULID
		first := true
		for {
			var best *keyRange
			for _, r := range ranges {
				if r.k != nil && (best == nil || (bytes.Compare(r.k[len(r.prefix):], best.k[len(best.prefix):]) < 0) != reverse) {
					best = r
				}
			}
			if best == nil {
				return
			}
			if jobID := ulidAt(best.k[len(best.prefix):]); first || jobID != last {
				if !yield(jobID) {
					return
				}
				last, first = jobID, false
			}
			best.next()
			best.skipTo(accept)
		}
	}
}

// rangeScan visits the keys under prefix whose remainder lies in [lo, hi), forwards or backwards.
func (t *Tx) rangeScan(bucket, prefix, lo, hi []byte, reverse bool, fn func(k, v []byte) bool) {
	for r := t.openRange(bucket, prefix, lo, hi, reverse); r.k != nil && fn(r.k, r.v); r.next() {
	}
}

// keyRange steps through the keys under prefix whose remainder lies in [lo, hi), forwards or
// backwards; k is nil past the end.
type keyRange struct {
	c              *bolt.Cursor
	prefix, lo, hi []byte
	reverse        bool
	k, v           []byte
}

func (t *Tx) openRange(bucket, prefix, lo, hi []byte, reverse bool) *keyRange {
	r := &keyRange{c: t.bucket(bucket).Cursor(), prefix: prefix, lo: lo, hi: hi, reverse: reverse}
	if !reverse {
		start := prefix
		if lo != nil {
			start = key(prefix, lo)
		}
		r.k, r.v = r.c.Seek(start)
	} else {
		end := prefixEnd(prefix)
		if hi != nil {
			end = key(prefix, hi)
		}
		if end != nil {
			r.k, r.v = r.c.Seek(end)
		}
		if r.k == nil {
			r.k, r.v = r.c.Last()
		} else {
			r.k, r.v = r.c.Prev()
		}
	}
	r.check()
	return r
}

func (r *keyRange) next() {
	if r.reverse {
		r.k, r.v = r.c.Prev()
	} else {
		r.k, r.v = r.c.Next()
	}
	r.check()
}

// skipTo steps past the keys whose value accept refuses (nil accepts all).
func (r *keyRange) skipTo(accept func(v []byte) bool) {
	for accept != nil && r.k != nil && !accept(r.v) {
		r.next()
	}
}

// check ends the range at a key outside it.
func (r *keyRange) check() {
	switch {
	case r.k == nil:
	case !hasPrefix(r.k, r.prefix),
		!r.reverse && r.hi != nil && bytes.Compare(r.k[len(r.prefix):], r.hi) >= 0,
		r.reverse && r.lo != nil && bytes.Compare(r.k[len(r.prefix):], r.lo) < 0:
		r.k, r.v = nil, nil
	}
}

// prefixEnd is the first key after every key with the prefix (nil when there is none).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
