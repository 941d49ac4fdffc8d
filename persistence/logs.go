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
func (t *txn) appendLog(jobID ulid.ULID, at time.Time, lines ...string) error {
	return t.appendLogAt(jobID, at, lines, nil)
}

// appendLogAt adds lines to a job's log, stamping each with its time in times, or at past them
// (or where a time is zero).
func (t *txn) appendLogAt(jobID ulid.ULID, at time.Time, lines []string, times []time.Time) error {
	if len(lines) == 0 {
		return nil
	}
	prefix := id(jobID)
	next := 0
	b := t.bucket(bucketLogs)
	c := b.Cursor()
	k, _ := c.Seek(prefixEnd(prefix))
	if k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k != nil && hasPrefix(k, prefix) {
		next = int(binary.BigEndian.Uint32(k[16:])) + 1
	}
	for i, line := range lines {
		when := at
		if i < len(times) && !times[i].IsZero() {
			when = times[i]
		}
		switch {
		case next > MaxLogLines:
			return nil
		case next == MaxLogLines:
			line = logTruncated
		case len(line) > MaxLogLineSize:
			line = line[:MaxLogLineSize] + "..."
		}
		if err := b.Put(key(prefix, u32(next)), logEntry(when, line)); err != nil {
			return err
		}
		next++
	}
	return nil
}

// logEntry is a stored log line: its time in UTC to the millisecond, a space, the line.
func logEntry(when time.Time, line string) []byte {
	line = strings.TrimRight(line, "\r\n")
	return append(appendLogTime(make([]byte, 0, 25+len(line)), when), " "+line...)
}

// appendLogTime appends when as 2006-01-02T15:04:05.000Z, faster than time.Format writes it; a
// year outside 0-9999 takes time.Format's way.
func appendLogTime(b []byte, when time.Time) []byte {
	when = when.UTC()
	year, month, day := when.Date()
	if year < 0 || year > 9999 {
		return when.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	}
	hour, minute, second := when.Clock()
	stamp := []byte("0000-00-00T00:00:00.000Z")
	for _, f := range [...]struct{ at, n, width int }{
		{0, year, 4}, {5, int(month), 2}, {8, day, 2}, {11, hour, 2}, {14, minute, 2}, {17, second, 2}, {20, when.Nanosecond() / 1e6, 3},
	} {
		for i, n := f.at+f.width-1, f.n; i >= f.at; i, n = i-1, n/10 {
			stamp[i] = byte('0' + n%10)
		}
	}
	return append(b, stamp...)
}
