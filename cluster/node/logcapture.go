package node

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// logCapture collects a render's log lines with the time each was written, keeping the first
// and the last ones when there are more than it may hold.
type logCapture struct {
	mu      sync.Mutex
	max     int
	now     func() time.Time
	head    []logLine
	tail    []logLine
	dropped int
	partial string
}

type logLine struct {
	text string
	at   time.Time
}

func newLogCapture(max int, now func() time.Time) *logCapture { return &logCapture{max: max, now: now} }

// Write takes text from an engine; lines may arrive in pieces.
func (l *logCapture) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	text := l.partial + string(p)
	lines := strings.Split(text, "\n")
	l.partial = lines[len(lines)-1]
	for _, line := range lines[:len(lines)-1] {
		l.add(strings.TrimRight(line, "\r"))
	}
	return len(p), nil
}

// maxLineBytes cuts a line an engine wrote too long: a report carries up to max lines, and each
// must stay a line (the coordinator keeps less of one anyway).
const maxLineBytes = 8 << 10

func (l *logCapture) add(text string) {
	if text == "" {
		return
	}
	if len(text) > maxLineBytes {
		text = strings.ToValidUTF8(text[:maxLineBytes], "") + " ..."
	}
	line := logLine{text: text, at: l.now()}
	if len(l.head) < l.max/2 {
		l.head = append(l.head, line)
		return
	}
	l.tail = append(l.tail, line)
	if len(l.tail) > l.max-l.max/2 {
		l.tail = l.tail[1:]
		l.dropped++
	}
}

// Printf adds one line of the node's own.
func (l *logCapture) Printf(format string, args ...any) {
	l.Write([]byte(fmt.Sprintf(format, args...) + "\n"))
}

// Lines returns what was kept since the last call, an unfinished last line included (the
// render is over), noting how many lines were left out, and when each was written (Unix
// milliseconds).
func (l *logCapture) Lines() ([]string, []int64) { return l.take(true) }

// Finished is Lines without an unfinished last line, which waits for its end: what a progress
// report carries while the render runs.
func (l *logCapture) Finished() ([]string, []int64) { return l.take(false) }

func (l *logCapture) take(unfinished bool) ([]string, []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if unfinished && l.partial != "" {
		l.add(l.partial)
		l.partial = ""
	}
	var texts []string
	var at []int64
	keep := func(line logLine) {
		texts, at = append(texts, line.text), append(at, line.at.UnixMilli())
	}
	for _, line := range l.head {
		keep(line)
	}
	if l.dropped > 0 && len(l.tail) > 0 {
		keep(logLine{text: fmt.Sprintf("... %d lines left out ...", l.dropped), at: l.tail[0].at})
	}
	for _, line := range l.tail {
		keep(line)
	}
	l.head, l.tail, l.dropped = nil, nil, 0
	return texts, at
}
