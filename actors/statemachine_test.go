package actors

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/framefarm/framefarm/persistence"
)

// docTable reads the rows of a table between <!-- name --> and <!-- /name --> in
// STATE_MACHINE.md: event -> "from1, from2 -> to".
func docTable(t *testing.T, name string) map[string]string {
	raw, err := os.ReadFile("STATE_MACHINE.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)<!-- ` + name + ` -->(.*?)<!-- /` + name + ` -->`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no %s in STATE_MACHINE.md", name)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(m[1]), "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 3 || strings.Contains(line, "---") || strings.TrimSpace(cells[0]) == "Event" || strings.TrimSpace(cells[0]) == "From" {
			continue
		}
		rows[strings.TrimSpace(cells[0])] = strings.TrimSpace(cells[1]) + " -> " + strings.TrimSpace(cells[2])
	}
	return rows
}

func TestStateMachineDocumentMatchesCode(t *testing.T) {
	jobs := map[string]string{}
	for _, tr := range jobTransitions {
		from := make([]string, len(tr.from))
		for i, s := range tr.from {
			from[i] = s.String()
		}
		jobs[string(tr.event)] = strings.Join(from, ", ") + " -> " + tr.to.String()
	}
	templates := map[string]string{}
	for _, tr := range templateTransitions {
		from := make([]string, len(tr.from))
		for i, s := range tr.from {
			from[i] = string(s)
		}
		templates[string(tr.event)] = strings.Join(from, ", ") + " -> " + string(tr.to)
	}
	nodes := map[string]string{}
	for _, tr := range nodeTransitions {
		to := make([]string, len(tr.to))
		for i, s := range tr.to {
			to[i] = string(s)
		}
		nodes[string(tr.from)] = strings.Join(to, ", ")
	}
	nodeDoc := map[string]string{}
	for from, to := range docTable(t, "node-table") {
		nodeDoc[from], _, _ = strings.Cut(to, " -> ") // the third column says when
	}
	for from, to := range nodes {
		if nodeDoc[from] != to {
			t.Errorf("node-table %s: document says %q, code says %q", from, nodeDoc[from], to)
		}
	}
	if len(nodeDoc) != len(nodes) {
		t.Errorf("node-table lists %d states, the code %d", len(nodeDoc), len(nodes))
	}
	for name, code := range map[string]map[string]string{"job-table": jobs, "template-table": templates} {
		doc := docTable(t, name)
		for ev, want := range code {
			if doc[ev] != want {
				t.Errorf("%s %s: document says %q, code says %q", name, ev, doc[ev], want)
			}
		}
		for ev := range doc {
			if _, ok := code[ev]; !ok {
				t.Errorf("%s: the document lists %s, the code does not", name, ev)
			}
		}
	}
}

func TestIllegalTransitionsChangeNothing(t *testing.T) {
	for _, s := range persistence.AllJobStates {
		for _, tr := range jobTransitions {
			j := &persistence.Job{State: s}
			err := applyJobEvent(j, tr.event)
			legal := false
			for _, from := range tr.from {
				legal = legal || from == s
			}
			switch {
			case legal && (err != nil || j.State != tr.to):
				t.Errorf("%s from %s: %v, state %s", tr.event, s, err, j.State)
			case !legal && (err == nil || j.State != s):
				t.Errorf("%s from %s was allowed (now %s)", tr.event, s, j.State)
			}
		}
		if s.Terminal() {
			for _, tr := range jobTransitions {
				if applyJobEvent(&persistence.Job{State: s}, tr.event) == nil {
					t.Errorf("%s left terminal state %s", tr.event, s)
				}
			}
		}
	}
}

// TestFileEventTakesAFileOnlyWhenOneIsAwaited: a first file, a download, or a replacement its
// owner opened, through the URL of the window open now; nothing else.
func TestFileEventTakesAFileOnlyWhenOneIsAwaited(t *testing.T) {
	for _, tc := range []struct {
		status persistence.TemplateStatus
		open   bool
		want   TemplateEvent
	}{
		{persistence.TemplateAwaitingUpload, false, EventFileArrived},
		{persistence.TemplateDownloading, false, EventFileArrived},
		{persistence.TemplateUploaded, true, EventReplacementArrived},
		{persistence.TemplateError, true, EventReplacementArrived},
		{persistence.TemplateProcessing, true, EventReplacementArrived},
		{persistence.TemplateUploaded, false, ""},
		{persistence.TemplateError, false, ""},
		{persistence.TemplateProcessing, false, ""},
	} {
		tpl := &persistence.Template{Status: tc.status, ReplacementOpen: tc.open, UploadWindow: 2}
		ev, err := FileEvent(tpl, 2)
		if ev != tc.want || (tc.want == "") != errors.Is(err, ErrUploadNotAwaited) {
			t.Errorf("%s open=%v: %q %v, want %q", tc.status, tc.open, ev, err, tc.want)
		}
		// A URL of another window is refused whatever the template awaits.
		for _, window := range []int{0, 1, 3} {
			if ev, err := FileEvent(tpl, window); ev != "" || !errors.Is(err, ErrUploadNotAwaited) {
				t.Errorf("%s open=%v, window %d of 2: %q %v", tc.status, tc.open, window, ev, err)
			}
		}
		if ev != "" && applyTemplateEvent(tpl, ev) != nil {
			t.Errorf("%s open=%v: %s is not a legal transition", tc.status, tc.open, ev)
		}
	}
}

// TestStorageWaitsGrowAndStop: a job the store keeps failing asks less often, up to a limit.
func TestStorageWaitsGrowAndStop(t *testing.T) {
	base := 15 * time.Second
	for uncounted, want := range map[int]time.Duration{0: base, 1: base, 2: 2 * base, 3: 4 * base, 6: 32 * base, 100: 32 * base} {
		if got := storageWait(base, uncounted); got != want {
			t.Errorf("after %d uncounted attempts: %s, want %s", uncounted, got, want)
		}
	}
}
