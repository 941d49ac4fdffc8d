package persistence

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// Why a queued job cannot start (no render node offers its engine, every one that does is
// draining or quarantined; its team holds as many slots as its maxRunning) is the same for every
// queued job of its engine, or of its team. So the scheduler records each change of a subject's
// reason once (RecordWaits), and a job's log shows the reasons that held while it waited, read
// beside its own lines (Store.JobLog): a change costs one record whether one job waits or a
// million.

// WaitChange is a change of why a subject's queued jobs cannot start; Reason is "" once they
// can. A subject is an engine (the jobs that need it), or a team (TeamWaitSubject).
type WaitChange struct {
	Subject string `json:"engine"`
	Reason  string `json:"reason,omitempty"`
}

// teamSubjectPrefix starts the wait subject of a team; engine names have no colon.
const teamSubjectPrefix = "team:"

// TeamWaitSubject is the wait subject of a team's jobs.
func TeamWaitSubject(team ulid.ULID) string { return teamSubjectPrefix + team.String() }

// WaitSubjectTeam reads the team of a team's wait subject.
func WaitSubjectTeam(subject string) (ulid.ULID, bool) {
	rest, ok := strings.CutPrefix(subject, teamSubjectPrefix)
	if !ok {
		return ulid.ULID{}, false
	}
	team, err := ulid.ParseStrict(rest)
	return team, err == nil
}

// waitSubjects are the subjects whose reasons a job's log shows: its engine's, its team's, its
// pool's and its limits'.
func waitSubjects(j *Job) []string {
	subjects := []string{j.Engine, TeamWaitSubject(j.TeamID)}
	if j.Pool != "" {
		subjects = append(subjects, PoolWaitSubject(j.Pool, j.Engine))
	}
	for _, l := range j.Limits {
		subjects = append(subjects, LimitWaitSubject(l))
	}
	return subjects
}

// logStampSize is the length of a log line's time stamp (logEntry).
const logStampSize = len("2006-01-02T15:04:05.000Z")

// maxSubject bounds the subjects kept here (render nodes name the engines they offer).
const maxSubject = 160

func waitPrefix(subject string) []byte { return append([]byte(subject), 0) }

func waitKey(subject string, at time.Time) []byte {
	return binary.BigEndian.AppendUint64(waitPrefix(subject), uint64(at.UnixNano()))
}

// waitOver is the line saying a subject's wait is over.
func waitOver(subject string) string {
	if _, ok := WaitSubjectTeam(subject); ok {
		return "waiting over: the team's renders hold fewer render slots than its maxRunning"
	}
	if pool, engine, ok := WaitSubjectPool(subject); ok {
		return fmt.Sprintf("waiting over: a ready render node of pool %q offers the %q engine", pool, engine)
	}
	if limit, ok := WaitSubjectLimit(subject); ok {
		return fmt.Sprintf("waiting over: limit %q has a render free", limit)
	}
	return fmt.Sprintf("waiting over: a ready render node offers the %q engine", subject)
}

// recordWaits stores changes at a time. A name no subject can have is skipped, never an error:
// a replica must apply every command it is given.
func (t *txn) recordWaits(at time.Time, changes []WaitChange) error {
	b := t.bucket(bucketWaits)
	for _, c := range changes {
		if c.Subject == "" || len(c.Subject) > maxSubject || strings.IndexByte(c.Subject, 0) >= 0 {
			continue
		}
		if err := b.Put(waitKey(c.Subject, at), []byte(c.Reason)); err != nil {
			return err
		}
	}
	return nil
}

// LatestWaits reads the reason last recorded for every subject ("" when its jobs can start).
func (s *Store) LatestWaits() map[string]string {
	latest := map[string]string{}
	s.view(func(t *txn) error {
		c := t.bucket(bucketWaits).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) > 9 {
				latest[string(k[:len(k)-9])] = string(v)
			}
		}
		return nil
	})
	return latest
}

// waitLines are the log lines of a subject's reasons from from to until: the reason in force at
// from (stamped from), then every change up to until. A change to "" says the wait is over
// when a reason was shown before it.
func (t *txn) waitLines(subject string, from, until time.Time) (lines [][]byte) {
	prefix := waitPrefix(subject)
	c := t.bucket(bucketWaits).Cursor()
	start := waitKey(subject, from)
	k, v := c.Seek(start)
	showing := false
	if !bytes.Equal(k, start) {
		var pk, pv []byte
		if k == nil {
			pk, pv = c.Last()
		} else {
			pk, pv = c.Prev()
		}
		if pk != nil && hasPrefix(pk, prefix) && len(pv) > 0 {
			lines = append(lines, logEntry(from, "waiting: "+string(pv)))
			showing = true
		}
		k, v = c.Seek(start)
	}
	for ; k != nil && hasPrefix(k, prefix) && len(k) == len(prefix)+8; k, v = c.Next() {
		at := time.Unix(0, int64(binary.BigEndian.Uint64(k[len(prefix):])))
		if at.After(until) {
			break
		}
		switch {
		case len(v) > 0:
			lines = append(lines, logEntry(at, "waiting: "+string(v)))
			showing = true
		case showing:
			lines = append(lines, logEntry(at, waitOver(subject)))
			showing = false
		}
	}
	return lines
}

// JobLog reads a job's log as text, one line per entry, with the lines saying why it waited
// placed among them by time: its subjects' reasons from its creation to its first start (its
// end, or now, if it never started).
func (s *Store) JobLog(j *Job, now time.Time) string {
	until := now
	switch {
	case !j.StartedAt.IsZero():
		until = j.StartedAt
	case j.State.Terminal():
		until = j.UpdatedAt
	}
	var sb strings.Builder
	s.view(func(t *txn) error {
		var waits [][]byte
		for _, subject := range waitSubjects(j) {
			waits = append(waits, t.waitLines(subject, j.CreatedAt, until)...)
		}
		// Each subject's lines are in time order; together they are sorted by their stamps,
		// the order of each subject's own kept.
		slices.SortStableFunc(waits, func(a, b []byte) int { return bytes.Compare(a[:logStampSize], b[:logStampSize]) })
		t.scanPrefix(bucketLogs, id(j.ID), func(_, v []byte) bool {
			// A wait goes before the first line stamped after it (stamps sort as text).
			for len(waits) > 0 && bytes.Compare(waits[0][:logStampSize], v[:min(logStampSize, len(v))]) < 0 {
				sb.Write(waits[0])
				sb.WriteByte('\n')
				waits = waits[1:]
			}
			sb.Write(v)
			sb.WriteByte('\n')
			return true
		})
		for _, w := range waits {
			sb.Write(w)
			sb.WriteByte('\n')
		}
		return nil
	})
	return sb.String()
}

// pruneWaits removes the changes recorded before cutoff, except each engine's last one (still
// in force).
func (t *txn) pruneWaits(cutoff time.Time) error {
	b := t.bucket(bucketWaits)
	var old [][]byte
	var prev []byte // the key before, while it is old enough to go
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) < 9 {
			continue
		}
		// A change with a later one of its engine after it is no longer in force.
		if prev != nil && bytes.Equal(prev[:len(prev)-8], k[:len(k)-8]) {
			old = append(old, prev)
		}
		prev = nil
		if int64(binary.BigEndian.Uint64(k[len(k)-8:])) < cutoff.UnixNano() {
			prev = bytes.Clone(k)
		}
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
