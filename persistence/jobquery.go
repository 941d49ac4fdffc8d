package persistence

import (
	"bytes"
	"encoding/binary"
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
	// Template, when set, lists that template's jobs alone (oldest or newest first, not with
	// Tags); they are read from the template's index, so the page costs the template's jobs.
	Template ulid.ULID
	// Name, when set, lists the jobs whose name starts with it, case aside, in name order (not
	// with Tags or Template); the page costs the jobs whose name starts so.
	Name string
}

// ListJobs returns one page of jobs matching q and how many match in all. It reads indexes only;
// job records are loaded for the page alone. The counters by creation time of the team, or of
// each tag asked, find the page's first job, the total and random samples without walking the
// jobs before them, in any order.
func (t *txn) ListJobs(q JobQuery) ([]*Job, int, error) {
	lo, hi := idBounds(q.CreatedFrom, q.CreatedTo)
	var ids []ulid.ULID
	total := 0
	if q.Template != (ulid.ULID{}) {
		ids, total = t.templateList(q, lo, hi)
	} else if q.Name != "" {
		ids, total = t.nameList(q, lo, hi)
	} else if scopes := t.heldScopes(q, stateSet(q.States)); len(scopes) > 0 {
		if q.Sort == SortPriority {
			ids, total = t.priorityList(q, scopes, lo, hi)
		} else {
			ids, total = t.rankedList(q, scopes, lo, hi)
		}
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

// heldScope is a scope a listing reads (its team, or one of the tags it asks for), with the
// states among those asked that the scope's jobs are in.
type heldScope struct {
	jobScope
	states []JobState
}

// heldScopes are q's scopes with jobs in the allowed states: the team, or each tag asked (a tag
// no such job carries changes nothing).
func (t *txn) heldScopes(q JobQuery, allowed map[JobState]bool) []heldScope {
	scopes := []jobScope{{team: q.TeamID}}
	if len(q.Tags) > 0 {
		scopes = scopes[:0]
		for _, tag := range slices.Compact(slices.Sorted(slices.Values(q.Tags))) {
			scopes = append(scopes, jobScope{q.TeamID, tag})
		}
	}
	var held []heldScope
	for _, sc := range scopes {
		// A rank index leaves out the states with no job in its scope: each would cost a
		// seek per level and per millisecond read.
		states, count := heldStates(allowed, func(s JobState) int {
			if sc.tag != "" {
				return t.TagCount(sc.team, sc.tag, s)
			}
			return t.JobCount(sc.team, s)
		})
		if count > 0 {
			held = append(held, heldScope{sc, states})
		}
	}
	return held
}

// union ranks the jobs of several scopes (tags of one team), each job once, from the index of
// each; merged lists their jobs. Scopes whose index holds no job are left out (a tag on none of
// the jobs of one priority would have its jobs listed only to be refused); the same index of the
// whole team bounds the union.
func union(scopes []heldScope, index func(heldScope) rankIndex, merged func([]jobScope) jobList) rankIndex {
	if len(scopes) == 1 {
		return index(scopes[0])
	}
	var members []rankIndex
	var plain []jobScope
	var states []JobState
	for _, sc := range scopes {
		if ix := index(sc); len(ix.children(0, 0)) > 0 {
			members, plain = append(members, ix), append(plain, sc.jobScope)
			states = append(states, sc.states...)
		}
	}
	switch len(members) {
	case 0:
		return index(scopes[0])
	case 1:
		return members[0]
	}
	states = slices.Compact(slices.Sorted(slices.Values(states)))
	team := index(heldScope{jobScope{team: scopes[0].team}, states})
	return newUnionIndex(members, states, merged(plain), team)
}

// ranks is the rank index of the scopes' jobs and the ranks [start, end) of those created within
// [lo, hi).
func (t *txn) ranks(scopes []heldScope, lo, hi []byte) (ix rankIndex, start, end int) {
	ix = union(scopes, func(sc heldScope) rankIndex { return t.scopeIndex(sc.jobScope, sc.states) },
		func(tags []jobScope) jobList { return t.tagJobs(tags, false) })
	start, end = ix.span(lo, hi)
	return ix, start, end
}

// rankedList pages through the scopes' jobs in creation order (or samples them) by rank.
func (t *txn) rankedList(q JobQuery, scopes []heldScope, lo, hi []byte) ([]ulid.ULID, int) {
	ix, start, end := t.ranks(scopes, lo, hi)
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

// priorityList pages through the scopes' jobs in pickup order: each priority above the default,
// highest first, then the default's jobs, then the priorities below, each oldest first. The
// counters find the segment holding the page's first job and its rank there, the page reads on
// from it; segments after the page are never looked at.
func (t *txn) priorityList(q JobQuery, scopes []heldScope, lo, hi []byte) ([]ulid.ULID, int) {
	_, start, end := t.ranks(scopes, lo, hi)
	total := max(end-start, 0)
	if total <= q.Offset || q.Limit <= 0 {
		return nil, total
	}
	skip := q.Offset
	ids := make([]ulid.ULID, 0, q.Limit)
	// read takes a segment's part of the page, or steps over it when the page starts after it;
	// count is its number of jobs when the counters by priority know it (-1: count them by rank).
	// The page stops at the segment's last job: the index it reads may hold other segments'
	// jobs after it, to be passed over one by one. It tells whether the page wants more.
	read := func(ix rankIndex, count int) bool {
		first, last := 0, count
		if count < 0 {
			first, last = ix.span(lo, hi)
		}
		n := max(last-first, 0)
		if skip >= n {
			skip -= n
			return true
		}
		from := lo
		if skip > 0 {
			jobID, ok := ix.nth(first + skip)
			if !ok {
				return false
			}
			from = jobID[:]
		}
		ids = append(ids, ix.page(min(q.Limit-len(ids), n-skip), from, hi, false)...)
		skip = 0
		return len(ids) < q.Limit
	}
	defaultRead := false
	readDefault := func() bool {
		defaultRead = true
		return read(union(scopes, func(sc heldScope) rankIndex { return t.defaultPriorityIndex(sc.jobScope, sc.states) },
			func(tags []jobScope) jobList { return t.tagJobs(tags, true) }), -1)
	}
	// Without a date range, one scope's counters by priority step over whole blocks of priorities
	// before the page. A block is all above the default or all below it (the default's inverted
	// priority ends its block), so the default's jobs come before any block below.
	var skipBlock func(block uint64, count int) bool
	if len(scopes) == 1 && lo == nil && hi == nil {
		defaultBlock := binary.BigEndian.Uint64(invertedPriority(0)) >> priorityBlockShift
		skipBlock = func(block uint64, count int) bool {
			if skip < count || block > defaultBlock && !defaultRead && (!readDefault() || skip < count) {
				return false
			}
			skip -= count
			return true
		}
	}
	for level := range t.priorityLevels(scopes, skipBlock) {
		if !defaultRead && bytes.Compare(level.inverted, invertedPriority(0)) > 0 && !readDefault() {
			return ids, total
		}
		count := -1
		if len(level.scopes) == 1 && lo == nil && hi == nil {
			count = level.count
		}
		ix := union(level.scopes, func(sc heldScope) rankIndex { return t.priorityLevelIndex(sc.jobScope, level.inverted, sc.states) },
			func(tags []jobScope) jobList { return t.levelJobs(tags, level.inverted) })
		if !read(ix, count) {
			return ids, total
		}
	}
	if !defaultRead {
		readDefault()
	}
	return ids, total
}

// successor is the id bound just after id (nil past the last id).
func successor(u ulid.ULID) []byte {
	return prefixEnd(u[:])
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

// mergeRanges yields, in id order and each once, the job ids ending the keys under each prefix
// that accept takes, given the job id and the value (nil takes all): a k-way merge of sorted
// index ranges.
func (t *txn) mergeRanges(bucket []byte, prefixes [][]byte, lo, hi []byte, reverse bool, accept func(jobID, v []byte) bool) iter.Seq[ulid.ULID] {
	return func(yield func(ulid.ULID) bool) {
		ranges := make([]*keyRange, len(prefixes))
		for i, prefix := range prefixes {
			ranges[i] = t.openRange(bucket, prefix, lo, hi, reverse)
			ranges[i].skipTo(accept)
		}
		defer func() {
			for _, r := range ranges {
				t.closeRange(r)
			}
		}()
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

// keyRange steps through the keys under prefix whose remainder lies in [lo, hi), forwards or
// backwards; k is nil past the end.
type keyRange struct {
	c              *bolt.Cursor
	prefix, lo, hi []byte
	reverse        bool
	k, v           []byte
}

func (t *txn) openRange(bucket, prefix, lo, hi []byte, reverse bool) *keyRange {
	r := &keyRange{c: t.cursor(t.bucket(bucket)), prefix: prefix, lo: lo, hi: hi, reverse: reverse}
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

// closeRange hands the range's cursor back; the range is not used after.
func (t *txn) closeRange(r *keyRange) {
	t.handBack(r.c)
	r.c, r.k, r.v = nil, nil, nil
}

func (r *keyRange) next() {
	if r.reverse {
		r.k, r.v = r.c.Prev()
	} else {
		r.k, r.v = r.c.Next()
	}
	r.check()
}

// skipTo steps past the keys whose job id and value accept refuses (nil accepts all).
func (r *keyRange) skipTo(accept func(jobID, v []byte) bool) {
	for accept != nil && r.k != nil && !accept(r.k[len(r.prefix):], r.v) {
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

// templateList walks a template's index in creation order (newest first when asked), counting
// the jobs in q's states created within [lo, hi) and keeping the page's.
func (t *txn) templateList(q JobQuery, lo, hi []byte) (ids []ulid.ULID, total int) {
	return t.indexPage(bucketJobsByTeamTemplate, key(id(q.TeamID), id(q.Template)), q, lo, hi)
}

// indexPage walks the keys of an index under prefix, each ending with a job id and holding its
// state, in key order (backwards for newest first): it counts the jobs in q's states created
// within [lo, hi) and keeps those of q's page. The page costs the keys under the prefix.
func (t *txn) indexPage(bucket, prefix []byte, q JobQuery, lo, hi []byte) (ids []ulid.ULID, total int) {
	allowed := stateSet(q.States)
	c := t.bucket(bucket).Cursor()
	k, v := c.Seek(prefix)
	next := c.Next
	if q.Sort == SortNewestFirst {
		if k, _ = c.Seek(prefixEnd(prefix)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		next = c.Prev
	}
	for ; k != nil && hasPrefix(k, prefix); k, v = next() {
		jobID := k[len(k)-16:]
		if (lo != nil && bytes.Compare(jobID, lo) < 0) || (hi != nil && bytes.Compare(jobID, hi) >= 0) || len(v) == 0 || !allowed[JobState(v[0])] {
			continue
		}
		if total >= q.Offset && len(ids) < q.Limit {
			ids = append(ids, ulidAt(jobID))
		}
		total++
	}
	return ids, total
}
