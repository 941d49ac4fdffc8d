package aerender

import (
	"regexp"
	"strconv"
	"strings"
)

// progressParser reads aerender's verbose output:
//
//	PROGRESS:  Duration: 0:00:10:00
//	PROGRESS:  Frame Rate: 30.00 (comp)
//	PROGRESS:  0:00:00:05 (6): 0 Seconds
//	aerender ERROR: No comp was found with the given name.
//
// Timecodes are hours:minutes:seconds:frames (';' before the frames when drop-frame). The number
// in parentheses counts the frames rendered so far.
type progressParser struct {
	seconds, frames float64 // the duration, split as its timecode is
	fps             float64
	percent         float64
	errors          []string
}

var (
	durationLine = regexp.MustCompile(`PROGRESS:\s+Duration:\s+(\d+):(\d+):(\d+)[:;](\d+)`)
	rateLine     = regexp.MustCompile(`PROGRESS:\s+Frame Rate:\s+([\d.]+)`)
	frameLine    = regexp.MustCompile(`PROGRESS:\s+\d+:\d+:\d+[:;]\d+\s+\((\d+)\)`)
)

// line reads one line and returns the progress so far, 0..99: the render is done only once its
// output is encoded.
func (p *progressParser) line(s string) float64 {
	if i := strings.Index(s, "ERROR:"); i >= 0 && strings.Contains(s[:i], "aerender") {
		p.errors = append(p.errors, strings.TrimSpace(s[i+len("ERROR:"):]))
		return p.percent
	}
	if m := durationLine.FindStringSubmatch(s); m != nil {
		n := make([]float64, 4)
		for i := range n {
			n[i], _ = strconv.ParseFloat(m[i+1], 64)
		}
		p.seconds, p.frames = n[0]*3600+n[1]*60+n[2], n[3]
	}
	if m := rateLine.FindStringSubmatch(s); m != nil {
		p.fps, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := frameLine.FindStringSubmatch(s); m != nil {
		done, _ := strconv.ParseFloat(m[1], 64)
		if total := p.seconds*p.fps + p.frames; total > 0 {
			p.percent = min(99, done/total*100)
		}
	}
	return p.percent
}
