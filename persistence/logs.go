package persistence

import (
	"encoding/binary"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
)

// Log caps: a job keeps at most this many lines, each at most this long.
const (
	MaxLogLines    = 10000
	MaxLogLineSize = 4096
)

const logTruncated = "[log truncated: further lines dropped]"

// appendLog adds lines to a job's log, stamping each with at.
func (t *Tx) appendLog(jobID ulid.ULID, at time.Time, lines ...string) error {
	return t.appendLogAt(jobID, at, lines, nil)
}

// appendLogAt adds lines to a job's log, stamping each with its time in times, or at past them
// (or where a time is zero).
func (t *Tx) appendLogAt(jobID ulid.ULID, at time.Time, lines []string, times []time.Time) error {
	if len(lines) == 0 {
		return nil
	}
	prefix := id(jobID)
	next := 0
	c := t.bucket(bucketLogs).Cursor()
	k, _ := c.Seek(prefixEnd(prefix))
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k != nil && hasPrefix(k, prefix) {
		next = int(binary.BigEndian.Uint32(k[16:])) + 1
	}
	return t.writeLog(jobID, next, at, lines, times)
}

// writeLog puts lines into a job's log from sequence number next on: a new job's log starts at
// 0 without looking for earlier lines.
func (t *Tx) writeLog(jobID ulid.ULID, next int, at time.Time, lines []string, times []time.Time) error {
	b := t.bucket(bucketLogs)
	for i, line := range lines {
		when := at
		if i < len(times) && !times[i].IsZero() {
			when = times[i]
		}
		stamp := when.UTC().Format("2006-01-02T15:04:05.000Z07:00") + " "
		switch {
		case next > MaxLogLines:
			return nil
		case next == MaxLogLines:
			line = logTruncated
		case len(line) > MaxLogLineSize:
			line = line[:MaxLogLineSize] + "..."
		}
		if err := b.Put(key(id(jobID), u32(next)), []byte(stamp+strings.TrimRight(line, "\r\n"))); err != nil {
			return err
		}
		next++
	}
	return nil
}

// Log returns a job's log as text, one line per entry.
func (t *Tx) Log(jobID ulid.ULID) string {
	var sb strings.Builder
	t.scanPrefix(bucketLogs, id(jobID), func(_, v []byte) bool {
		sb.Write(v)
		sb.WriteByte('\n')
		return true
	})
	return sb.String()
}
