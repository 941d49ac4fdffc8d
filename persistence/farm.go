package persistence

import (
	"bytes"
	"strings"

	"github.com/oklog/ulid/v2"
)

// The farm's admin lists every team's jobs at once, by engine and pool, and any listing may ask
// for the jobs whose name starts with some text. So each job (chunks apart) is also filed:
//
//   - in the creation index and counters of FarmScope, a scope holding every team's jobs, as
//     a team's holds its own (listings of every team at any offset, date range or sample);
//   - under a placement tag (its engine and pool) in the tags' index and counters, of its team
//     and of FarmScope (the admin's filters by engine and pool, a team's too);
//   - by its name, lowered, in bucketJobsByName, of its team and of FarmScope.
//
// A placement tag holds characters no client's tag may ('=' and ','), so it never meets one.

// FarmScope is the scope of every team's jobs, used as a team's id in the listings' indexes: an
// id no team is ever given (team ids are ULIDs of their creation time).
var FarmScope = ulid.ULID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// placementTag files a job by its engine and pool.
func placementTag(engine, pool string) string { return "engine=" + engine + ",pool=" + pool }

// readPlacementTag reads a placement tag; ok is false for a client's tag.
func readPlacementTag(tag string) (engine, pool string, ok bool) {
	rest, ok := strings.CutPrefix(tag, "engine=")
	if !ok {
		return "", "", false
	}
	engine, pool, ok = strings.Cut(rest, ",pool=")
	return engine, pool, ok
}

// nameKey is a name as the names' index orders it: lowered (a search ignores case), ended by a
// byte no name holds, so a name comes before the longer names it begins.
func nameKey(name string) []byte { return append([]byte(strings.ToLower(name)), 0) }

// farmIndexEntries are a job's entries in the farm's listings, by placement and by name, while
// it is in state s (its creation index entry is jid's; st its state's key), their keys cut
// from a.
func farmIndexEntries(a *keyArena, j *Job, st, jid []byte) []jobIndexEntry {
	team, farm := id(j.TeamID), id(FarmScope)
	placed := placementTag(j.Engine, j.Pool)
	entries := []jobIndexEntry{
		{bucketJobsByTeamState, a.key(farm, st, jid), nil},
		{bucketJobsByTeamTag, a.tagged(farm, placed, jid), st},
		{bucketJobsByTeamTag, a.tagged(team, placed, jid), st},
	}
	if j.Name != "" {
		name := nameKey(j.Name)
		entries = append(entries, jobIndexEntry{bucketJobsByName, a.key(team, name, jid), st},
			jobIndexEntry{bucketJobsByName, a.key(farm, name, jid), st})
	}
	return entries
}

// addFarmCounts moves a job's counters in the farm's scope and under its placement tag.
func (t *txn) addFarmCounts(j *Job, s JobState, delta int) error {
	farm := id(FarmScope)
	placed := tagKey(placementTag(j.Engine, j.Pool))
	if err := t.addCount(bucketJobCounts, key(farm, stateKey(s)), delta); err != nil {
		return err
	}
	for _, scope := range [][]byte{farm, id(j.TeamID)} {
		if err := t.addCount(bucketTagCounts, key(scope, placed, stateKey(s)), delta); err != nil {
			return err
		}
	}
	t.addScopeTimeCounts(teamTimeCounter, farm, j.ID, s, delta)
	t.addScopeTimeCounts(tagTimeCounter, key(farm, placed), j.ID, s, delta)
	t.addScopeTimeCounts(tagTimeCounter, key(id(j.TeamID), placed), j.ID, s, delta)
	return nil
}

// PlacementTags are the placement tags of a scope's jobs (a team's, or FarmScope's) whose engine
// and pool match ("" matches any; pool "-" matches jobs naming none): what the listings' tags
// filter reads for an engine or a pool.
func (t *txn) PlacementTags(scope ulid.ULID, engine, pool string) []string {
	var tags []string
	prefix := id(scope)
	t.scanPrefix(bucketTagCounts, prefix, func(k, _ []byte) bool {
		rest := k[len(prefix):]
		if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
			return true
		}
		tag := string(rest[1 : 1+int(rest[0])])
		e, p, ok := readPlacementTag(tag)
		if ok && (engine == "" || e == engine) && (pool == "" || p == pool || pool == "-" && p == "") &&
			(len(tags) == 0 || tags[len(tags)-1] != tag) {
			tags = append(tags, tag)
		}
		return true
	})
	return tags
}

// nameList walks the names' index of q's scope from q.Name's start (ids in [lo, hi) only), in
// name order, then creation (backwards for newest first), counting the jobs in q's states and
// keeping the page's: it costs the jobs whose name starts so.
func (t *txn) nameList(q JobQuery, lo, hi []byte) (ids []ulid.ULID, total int) {
	return t.indexPage(bucketJobsByName, key(id(q.TeamID), bytes.TrimSuffix(nameKey(q.Name), []byte{0})), q, lo, hi)
}

// PlacementTags is txn.PlacementTags in a read of its own.
func (s *Store) PlacementTags(scope ulid.ULID, engine, pool string) (tags []string) {
	s.view(func(t *txn) error { tags = t.PlacementTags(scope, engine, pool); return nil })
	return tags
}
