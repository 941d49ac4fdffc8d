package persistence

import "time"

// update runs fn in a group-committed write: tests build their stores record by record.
func (s *Store) update(fn func(*txn) error) error {
	result := make(chan error, 1)
	s.submit(&write{fn: fn, done: func(err error) { result <- err }})
	return <-result
}

// testNow stamps the records tests write.
var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
