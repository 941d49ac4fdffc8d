package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// Event is one change a viewer of the event stream learns about: a job's status and progress, or
// (type "refresh") that more of its team's jobs changed at once than are sent one by one, so the
// viewer reads its listing again.
type Event struct {
	Type     string   `json:"type"`
	ID       string   `json:"id,omitempty"`
	Status   string   `json:"status,omitempty"`
	Progress *float64 `json:"progress,omitempty"`
	BatchID  string   `json:"batchId,omitempty"`
	ParentID string   `json:"parentId,omitempty"`
	// Jobs is how many jobs changed, in a refresh.
	Jobs int `json:"jobs,omitempty"`
}

// Hub streams what happens to jobs to the viewers of each team (the dashboard). It observes the
// actors by marking what changed, which never blocks them; every Interval it reads each changed
// job once and sends each viewer of its team one event, so a job's bursts of progress are
// coalesced. A viewer whose buffer is full is dropped (its stream ends; it reconnects and reads
// the listing again) rather than slow anything down.
type Hub struct {
	Store interface {
		Jobs([]ulid.ULID) ([]*persistence.Job, error)
	}
	Clock    clock.Clock
	Interval time.Duration
	// Buffer is how many events a viewer may have unsent [4096]; MaxPerFlush how many jobs of a
	// team are sent one by one per interval before a refresh replaces them [256]; MaxPerToken how
	// many streams one token may hold open at once [8].
	Buffer, MaxPerFlush, MaxPerToken int

	mu      sync.Mutex
	changed map[ulid.ULID]struct{}
	viewers map[*Viewer]struct{}
	// perToken counts each token's open streams.
	perToken map[[32]byte]int
	closed   bool
}

// Holder is the token a stream is opened with: its streams end the moment it is revoked
// (Revoke) or expires, and it holds at most MaxPerToken at once.
type Holder struct {
	// Token is the token's hash.
	Token [32]byte
	// Expires is when the token stops working; zero for never.
	Expires time.Time
}

// ErrTooManyStreams refuses a stream past a token's MaxPerToken.
var ErrTooManyStreams = errors.New("this token holds as many event streams as it may")

// Viewer is one open event stream: a team's, or the farm's (admin: render nodes).
type Viewer struct {
	team  ulid.ULID
	admin bool
	by    Holder
	// expiry ends the stream when its token expires.
	expiry clock.Timer
	// C carries the viewer's events, encoded; it is closed when the viewer is dropped or the hub
	// stops.
	C    chan []byte
	done bool
}

// Watch subscribes the hub to the changes its viewers see: jobs' states and progress (marked, sent
// at the next flush), templates' statuses (sent at once to their team's viewers: templates
// change seldom) and render nodes' states (to the farm's viewers; "" when forgotten); a revoked
// token's streams end.
func (h *Hub) Watch(ev *actors.Events) {
	ev.TokenRevoked.Subscribe(func(e actors.TokenRevoked) { h.Revoke(e.Hash) })
	ev.JobStateChanged.Subscribe(func(e actors.JobStateChanged) { h.mark(e.Job) })
	ev.JobProgressSaved.Subscribe(func(e actors.JobProgressSaved) { h.mark(e.Job) })
	ev.TemplateStatusChanged.Subscribe(func(e actors.TemplateStatusChanged) {
		h.broadcast(func(v *Viewer) bool { return !v.admin && v.team == e.Team }, Event{Type: "template", ID: e.Template.String(), Status: string(e.Status)})
	})
	ev.NodeStateChanged.Subscribe(func(e actors.NodeStateChanged) {
		h.broadcast(func(v *Viewer) bool { return v.admin }, Event{Type: "node", ID: e.Node, Status: string(e.To)})
	})
}

// broadcast sends one event to the viewers to, dropping any that is full.
func (h *Hub) broadcast(to func(*Viewer) bool, ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.viewers) == 0 {
		return
	}
	frame := sseFrame(ev)
	for v := range h.viewers {
		if to(v) {
			h.sendLocked(v, frame)
		}
	}
}

// sendLocked hands a viewer one frame, or drops the viewer when its buffer is full: too slow,
// it reconnects and reads the listing again. It reports whether the viewer is still there.
func (h *Hub) sendLocked(v *Viewer, frame []byte) bool {
	select {
	case v.C <- frame:
		return true
	default:
		h.dropLocked(v)
		return false
	}
}

func (h *Hub) mark(id ulid.ULID) {
	h.mu.Lock()
	if len(h.viewers) > 0 {
		if h.changed == nil {
			h.changed = map[ulid.ULID]struct{}{}
		}
		h.changed[id] = struct{}{}
	}
	h.mu.Unlock()
}

// Subscribe opens a stream of a team's events for the token by.
func (h *Hub) Subscribe(team ulid.ULID, by Holder) (*Viewer, error) {
	return h.subscribe(&Viewer{team: team, by: by})
}

// SubscribeFarm opens a stream of the farm's events (render nodes) for the token by.
func (h *Hub) SubscribeFarm(by Holder) (*Viewer, error) {
	return h.subscribe(&Viewer{admin: true, by: by})
}

func (h *Hub) subscribe(v *Viewer) (*Viewer, error) {
	buffer := h.Buffer
	if buffer <= 0 {
		buffer = 4096
	}
	most := h.MaxPerToken
	if most <= 0 {
		most = 8
	}
	v.C = make(chan []byte, buffer)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		close(v.C)
		v.done = true
		return v, nil
	}
	if h.perToken[v.by.Token] >= most {
		return nil, fmt.Errorf("%w (%d); close one first", ErrTooManyStreams, most)
	}
	if h.viewers == nil {
		h.viewers, h.perToken = map[*Viewer]struct{}{}, map[[32]byte]int{}
	}
	h.viewers[v] = struct{}{}
	h.perToken[v.by.Token]++
	if !v.by.Expires.IsZero() {
		v.expiry = h.Clock.AfterFunc(v.by.Expires.Sub(h.Clock.Now()), func() { h.Unsubscribe(v) })
	}
	return v, nil
}

// Revoke ends every stream of a token (its hash): it no longer works.
func (h *Hub) Revoke(token [32]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for v := range h.viewers {
		if v.by.Token == token {
			h.dropLocked(v)
		}
	}
}

// Unsubscribe ends a stream its viewer left.
func (h *Hub) Unsubscribe(v *Viewer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(v)
}

func (h *Hub) dropLocked(v *Viewer) {
	if v.done {
		return
	}
	v.done = true
	close(v.C)
	delete(h.viewers, v)
	if h.perToken[v.by.Token]--; h.perToken[v.by.Token] <= 0 {
		delete(h.perToken, v.by.Token)
	}
	if v.expiry != nil {
		v.expiry.Stop()
	}
}

// Run sends the changes of each interval until ctx ends, then ends every stream.
func (h *Hub) Run(ctx context.Context) {
	interval := h.Interval
	if interval <= 0 {
		interval = 250 * time.Millisecond
	}
	tick, stop := ticks(h.Clock, interval)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			h.Close()
			return
		case <-tick:
			h.Flush()
		}
	}
}

// ticks delivers a value every d on the injected clock (dropped while the last is unread) until
// stop is called.
func ticks(clk clock.Clock, d time.Duration) (c <-chan struct{}, stop func()) {
	out := make(chan struct{}, 1)
	var mu sync.Mutex
	var timer clock.Timer
	stopped := false
	var arm func()
	arm = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		timer = clk.AfterFunc(d, func() {
			select {
			case out <- struct{}{}:
			default:
			}
			arm()
		})
	}
	arm()
	return out, func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}

// Close ends every stream; later viewers get a closed stream.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for v := range h.viewers {
		h.dropLocked(v)
	}
}

// Flush sends what changed since the last flush.
func (h *Hub) Flush() {
	h.mu.Lock()
	changed := h.changed
	h.changed = nil
	h.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	byTeam := map[ulid.ULID][]Event{}
	counts := map[ulid.ULID]int{}
	limit := h.MaxPerFlush
	if limit <= 0 {
		limit = 256
	}
	ids := make([]ulid.ULID, 0, len(changed))
	for id := range changed {
		ids = append(ids, id)
	}
	jobs, _ := h.Store.Jobs(ids)
	for _, j := range jobs {
		if j == nil || j.Kind == persistence.KindChunk {
			continue // removed meanwhile; or a chunk, which its job's progress tells
		}
		if counts[j.TeamID]++; counts[j.TeamID] > limit {
			continue
		}
		progress := j.Progress
		ev := Event{Type: "job", ID: j.ID.String(), Status: j.Status(), Progress: &progress}
		if j.BatchID != (ulid.ULID{}) {
			ev.BatchID = j.BatchID.String()
		}
		if j.ParentID != (ulid.ULID{}) {
			ev.ParentID = j.ParentID.String()
		}
		byTeam[j.TeamID] = append(byTeam[j.TeamID], ev)
	}
	encoded := map[ulid.ULID][][]byte{}
	for team, events := range byTeam {
		if counts[team] > limit {
			events = []Event{{Type: "refresh", Jobs: counts[team]}}
		}
		for _, ev := range events {
			encoded[team] = append(encoded[team], sseFrame(ev))
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for v := range h.viewers {
		if v.admin {
			continue
		}
		for _, frame := range encoded[v.team] {
			if !h.sendLocked(v, frame) {
				break
			}
		}
	}
}

// sseFrame is one server-sent event.
func sseFrame(ev Event) []byte {
	data, _ := json.Marshal(ev)
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", ev.Type, data)
}

// streamEvents answers GET /api/v2/events: the team's job and template changes.
func (s *Server) streamEvents(r *request) {
	s.stream(r, func(h *Hub) (*Viewer, error) { return h.Subscribe(r.team, r.holder) })
}

// streamFarmEvents answers GET /api/v2/admin/events: render nodes' state changes.
func (s *Server) streamFarmEvents(r *request) {
	s.stream(r, func(h *Hub) (*Viewer, error) { return h.SubscribeFarm(r.holder) })
}

// stream writes the events of the viewer subscribe makes as server-sent events, with a comment
// line every 15 s so proxies keep the stream open. The stream ends when its token is revoked or
// expires.
func (s *Server) stream(r *request, subscribe func(*Hub) (*Viewer, error)) {
	if s.Events == nil {
		r.fail(newError(http.StatusNotFound, codeNotFound, "this server has no event stream"))
		return
	}
	v, err := subscribe(s.Events)
	if err != nil {
		r.fail(&apiError{status: http.StatusTooManyRequests, Code: codeRateLimited, Error: err.Error(), retryAfter: 5})
		return
	}
	r.ctx.SetContentType("text/event-stream")
	r.ctx.Response.Header.Set("Cache-Control", "no-store")
	r.ctx.Response.Header.Set("X-Accel-Buffering", "no")
	r.ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer s.Events.Unsubscribe(v)
		w.WriteString(": framefarm events\n\n")
		if w.Flush() != nil {
			return
		}
		keepAlive, stop := ticks(s.Clock, 15*time.Second)
		defer stop()
		for {
			select {
			case frame, open := <-v.C:
				if !open {
					return
				}
				w.Write(frame)
			case <-keepAlive:
				w.WriteString(": keep-alive\n\n")
			}
			if w.Flush() != nil {
				return // the viewer left
			}
		}
	})
}
