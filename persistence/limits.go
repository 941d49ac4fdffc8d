package persistence

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Limit is a scarce thing renders hold while they run (a software licence): at most Count renders
// naming it run at once, farm-wide.
type Limit struct {
	Name      string    `json:"name"`
	Count     int       `json:"count"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// putLimit is PutLimit.
func (t *txn) putLimit(c *PutLimit) error {
	return t.putJSON(bucketLimits, []byte(c.Name), Limit{Name: c.Name, Count: c.Count, UpdatedAt: c.At})
}

// deleteLimit is DeleteLimit.
func (t *txn) deleteLimit(c *DeleteLimit) error {
	l, err := t.Limit(c.Name)
	if err != nil {
		return err
	}
	c.Deleted = &l
	return t.bucket(bucketLimits).Delete([]byte(c.Name))
}

// Limit reads a limit; ErrNotFound when there is none.
func (t *txn) Limit(name string) (Limit, error) {
	var l Limit
	found, err := t.getJSON(bucketLimits, []byte(name), &l)
	if err == nil && !found {
		err = ErrNotFound
	}
	return l, err
}

// Limits lists every limit, by name.
func (t *txn) Limits() ([]Limit, error) {
	var out []Limit
	var err error
	t.scanPrefix(bucketLimits, nil, func(_, v []byte) bool {
		var l Limit
		if err = json.Unmarshal(v, &l); err != nil {
			err = fmt.Errorf("decode limit: %w", err)
			return false
		}
		out = append(out, l)
		return true
	})
	return out, err
}

// Limits lists every limit, by name.
func (s *Store) Limits() (all []Limit, err error) {
	err = s.view(func(t *txn) error { all, err = t.Limits(); return err })
	return all, err
}

// Wait subjects of pools and limits (a team's: TeamWaitSubject).
const (
	poolSubjectPrefix  = "pool:"
	limitSubjectPrefix = "limit:"
)

// PoolWaitSubject is the wait subject of the jobs of an engine that must render in a pool.
func PoolWaitSubject(pool, engine string) string { return poolSubjectPrefix + pool + ":" + engine }

// LimitWaitSubject is the wait subject of the jobs that hold a limit while they render.
func LimitWaitSubject(name string) string { return limitSubjectPrefix + name }

// WaitSubjectPool reads the pool and engine of a pool's wait subject.
func WaitSubjectPool(subject string) (pool, engine string, ok bool) {
	rest, ok := strings.CutPrefix(subject, poolSubjectPrefix)
	if !ok {
		return "", "", false
	}
	pool, engine, ok = strings.Cut(rest, ":")
	return pool, engine, ok
}

// WaitSubjectLimit reads the limit of a limit's wait subject.
func WaitSubjectLimit(subject string) (string, bool) {
	return strings.CutPrefix(subject, limitSubjectPrefix)
}

// MergeLimits is the sorted union of limit lists, without repeats.
func MergeLimits(lists ...[]string) []string {
	var all []string
	for _, l := range lists {
		all = append(all, l...)
	}
	if len(all) == 0 {
		return nil
	}
	return slices.Compact(slices.Sorted(slices.Values(all)))
}
