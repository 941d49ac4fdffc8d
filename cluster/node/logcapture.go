package node

import (
	"fmt"
	"strings"
	"sync"
)

// logCapture collects a render's log lines, keeping the first and the last ones when there are
// more than it may hold.
type logCapture struct {
	mu      sync.Mutex
	max     int
	head    []string
	tail    []string
	dropped int
	partial string
}

func newLogCapture(max int) *logCapture { return &logCapture{max: max} }

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

func (l *logCapture) add(line string) {
	if line == "" {
		return
	}
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

// Lines returns what was kept, noting how many lines were left out.
func (l *logCapture) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.partial != "" {
		l.add(l.partial)
		l.partial = ""
	}
	out := append([]string(nil), l.head...)
	if l.dropped > 0 {
		out = append(out, fmt.Sprintf("... %d lines left out ...", l.dropped))
	}
	return append(out, l.tail...)
}
