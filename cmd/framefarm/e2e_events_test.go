package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// eventStream reads a team's server-sent events.
type eventStream struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

// openEvents asks for the team's event stream; the caller closes the answer's body.
func (cl *client) openEvents() *http.Response {
	cl.c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, cl.c.url+"/api/v2/events", nil)
	req.Header.Set("Authorization", "Bearer "+cl.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cl.c.t.Fatal(err)
	}
	return resp
}

func (cl *client) events() *eventStream {
	cl.c.t.Helper()
	resp := cl.openEvents()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cl.c.t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t := cl.c.t.(*testing.T)
	t.Cleanup(func() { resp.Body.Close() })
	return &eventStream{t: t, resp: resp, sc: bufio.NewScanner(resp.Body)}
}

type streamedEvent struct {
	Type, ID, Status string
	Progress         float64
}

// next reads events until one matches, or fails after waitLimit (the stream is read in a
// goroutine so the deadline holds).
func (s *eventStream) next(match func(streamedEvent) bool) streamedEvent {
	s.t.Helper()
	found := make(chan streamedEvent, 1)
	go func() {
		for s.sc.Scan() {
			data, ok := strings.CutPrefix(s.sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev streamedEvent
			if json.Unmarshal([]byte(data), &ev) == nil && match(ev) {
				found <- ev
				return
			}
		}
		close(found)
	}()
	select {
	case ev, ok := <-found:
		if !ok {
			s.t.Fatal("the event stream ended")
		}
		return ev
	case <-time.After(waitLimit):
		s.resp.Body.Close()
		s.t.Fatalf("no matching event within %s", waitLimit)
	}
	return streamedEvent{}
}

// TestEventStreamShowsATeamItsJobsAsTheyChange: a viewer sees its job queued, rendering and
// finished without polling, and nothing of another team's jobs.
func TestEventStreamShowsATeamItsJobsAsTheyChange(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	acme, other := c.team("acme"), c.team("other")
	tplID := acme.uploadTemplate(inspection())
	otherTpl := other.uploadTemplate(inspection())
	acmeEvents, otherEvents := acme.events(), other.events()

	// Mine takes the only slot and holds it; theirs waits in the queue.
	var mine, theirs created
	acme.must(http.MethodPost, "/api/v2/jobs", renderJob(tplID), http.StatusCreated, &mine)
	call := c.control.next(t)
	other.must(http.MethodPost, "/api/v2/jobs", renderJob(otherTpl), http.StatusCreated, &theirs)
	ofMine := func(status string) func(streamedEvent) bool {
		return func(ev streamedEvent) bool {
			if ev.ID == theirs.ID {
				t.Fatalf("acme's stream carried another team's job: %+v", ev)
			}
			return ev.Type == "job" && ev.ID == mine.ID && ev.Status == status
		}
	}
	// Changes are coalesced (queued may be folded into rendering); the render holds.
	acmeEvents.next(ofMine("render:dorender"))
	c.control.answerAll(finishAll)
	call.answer(renderReply{Result: "finish"})
	if ev := acmeEvents.next(ofMine("finished")); ev.Progress != 100 {
		t.Fatalf("finished with progress %v", ev.Progress)
	}
	if ev := otherEvents.next(func(ev streamedEvent) bool { return ev.ID == theirs.ID || ev.ID == mine.ID }); ev.ID != theirs.ID {
		t.Fatalf("the other team's stream carried acme's job: %+v", ev)
	}
	// Without a token there is no stream.
	(&client{c: c}).fails(http.MethodGet, "/api/v2/events", nil, http.StatusUnauthorized, "unauthorized")

	// A shutdown ends open streams instead of waiting for them.
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, acmeEvents.resp.Body); ended <- err }()
	c.stop()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the stream broke instead of ending: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the stream outlived the server")
	}
}
