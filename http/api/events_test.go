package api

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// TestHubSendsEachTeamItsOwnJobsCoalescedAndDropsSlowViewers: one event per changed job per
// flush, to viewers of its team only; a refresh past MaxPerFlush; a full buffer drops its viewer.
func TestHubSendsEachTeamItsOwnJobsCoalescedAndDropsSlowViewers(t *testing.T) {
	store, err := persistence.Open(filepath.Join(t.TempDir(), "framefarm.db"), persistence.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ids := persistence.NewIDs()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	teamA, teamB := ids.New(now), ids.New(now)
	var jobs []*persistence.Job
	for i := range 4 {
		team := teamA
		if i == 3 {
			team = teamB
		}
		jobs = append(jobs, &persistence.Job{ID: ids.New(now), TeamID: team, Kind: persistence.KindRender, State: persistence.JobQueued,
			Engine: "lottie", CreatedAt: now, OutputName: "o.mp4"})
	}
	if err := store.Apply(&persistence.CreateJobs{At: now, Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
	hub := &Hub{Store: store, Clock: clock.NewFake(now), Buffer: 8, MaxPerFlush: 2}
	ev := &actors.Events{}
	hub.Watch(ev)
	a, b := subscribe(t, hub, teamA, Holder{Token: [32]byte{1}}), subscribe(t, hub, teamB, Holder{Token: [32]byte{2}})
	read := func(v *Viewer) []string {
		var got []string
		for {
			select {
			case frame, open := <-v.C:
				if !open {
					return append(got, "closed")
				}
				got = append(got, string(frame))
			default:
				return got
			}
		}
	}

	// Progress saved twice between flushes: one event.
	ev.JobProgressSaved.Publish(actors.JobProgressSaved{Job: jobs[0].ID, Percent: 10})
	ev.JobProgressSaved.Publish(actors.JobProgressSaved{Job: jobs[0].ID, Percent: 20})
	ev.JobStateChanged.Publish(actors.JobStateChanged{Job: jobs[3].ID, To: persistence.JobQueued})
	hub.Flush()
	gotA, gotB := read(a), read(b)
	if len(gotA) != 1 || !strings.Contains(gotA[0], "event: job\ndata: ") || !strings.Contains(gotA[0], jobs[0].ID.String()) ||
		!strings.Contains(gotA[0], `"status":"queued"`) {
		t.Fatalf("team a got %q", gotA)
	}
	if len(gotB) != 1 || !strings.Contains(gotB[0], jobs[3].ID.String()) {
		t.Fatalf("team b got %q", gotB)
	}

	// Three of team a's jobs at once, past MaxPerFlush 2: one refresh.
	for _, j := range jobs[:3] {
		ev.JobStateChanged.Publish(actors.JobStateChanged{Job: j.ID, From: persistence.JobQueued, To: persistence.JobRendering})
	}
	hub.Flush()
	if got := read(a); len(got) != 1 || !strings.Contains(got[0], `"type":"refresh","jobs":3`) {
		t.Fatalf("team a got %q", got)
	}

	// A viewer that does not read its 8 buffered events is dropped at the next one.
	for range 9 {
		ev.JobStateChanged.Publish(actors.JobStateChanged{Job: jobs[3].ID, From: persistence.JobQueued, To: persistence.JobRendering})
		hub.Flush()
	}
	if got := read(b); len(got) != 9 || got[8] != "closed" {
		t.Fatalf("a slow viewer got %d frames, ending %q", len(got), got[len(got)-1])
	}
	// Templates reach their team's viewers, nodes the farm's.
	farm, _ := hub.SubscribeFarm(Holder{Token: [32]byte{3}})
	ev.TemplateStatusChanged.Publish(actors.TemplateStatusChanged{Team: teamA, Template: jobs[0].ID, Status: persistence.TemplateUploaded})
	ev.NodeStateChanged.Publish(actors.NodeStateChanged{Node: "render-02", From: actors.NodeReady, To: actors.NodeDraining})
	if got := read(a); len(got) != 1 || !strings.Contains(got[0], `"type":"template"`) || !strings.Contains(got[0], `"status":"uploaded"`) {
		t.Fatalf("team a got %q", got)
	}
	if got := read(farm); len(got) != 1 || !strings.Contains(got[0], `{"type":"node","id":"render-02","status":"draining"}`) {
		t.Fatalf("the farm got %q", got)
	}
	hub.Close()
	if got := read(a); len(got) != 1 || got[0] != "closed" {
		t.Fatalf("after Close: %q", got)
	}
	if got := read(subscribe(t, hub, teamA, Holder{Token: [32]byte{1}})); len(got) != 1 || got[0] != "closed" {
		t.Fatalf("a viewer after Close: %q", got)
	}
}

func subscribe(t *testing.T, hub *Hub, team ulid.ULID, by Holder) *Viewer {
	t.Helper()
	v, err := hub.Subscribe(team, by)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStreamsEndWithTheirToken: a revoked token's streams end at once, an expiring token's when
// it expires, other tokens' go on; one token holds at most MaxPerToken streams, and a stream that
// ends gives its place back.
func TestStreamsEndWithTheirToken(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(now)
	hub := &Hub{Clock: clk, MaxPerToken: 2}
	ev := &actors.Events{}
	hub.Watch(ev)
	team := ulid.Make()
	revoked, expiring, other := Holder{Token: [32]byte{1}}, Holder{Token: [32]byte{2}, Expires: now.Add(time.Hour)}, Holder{Token: [32]byte{3}}
	r1, r2 := subscribe(t, hub, team, revoked), subscribe(t, hub, team, revoked)
	if _, err := hub.Subscribe(team, revoked); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("a third stream of one token: %v", err)
	}
	if _, err := hub.SubscribeFarm(revoked); !errors.Is(err, ErrTooManyStreams) {
		t.Fatalf("a third stream of one token, to the farm's events: %v", err)
	}
	e, o := subscribe(t, hub, team, expiring), subscribe(t, hub, team, other)
	ended := func(v *Viewer) bool {
		select {
		case _, open := <-v.C:
			return !open
		case <-time.After(5 * time.Second):
			return false
		}
	}
	hub.Revoke(revoked.Token)
	if !ended(r1) || !ended(r2) {
		t.Fatal("a revoked token's streams go on")
	}
	subscribe(t, hub, team, revoked) // its places are free again (the token itself is refused before the hub)
	clk.Advance(time.Hour - time.Millisecond)
	select {
	case <-e.C:
		t.Fatal("a stream ended before its token expired")
	default:
	}
	clk.Advance(time.Millisecond)
	if !ended(e) {
		t.Fatal("an expired token's stream goes on")
	}
	ev.TemplateStatusChanged.Publish(actors.TemplateStatusChanged{Team: team, Template: team, Status: persistence.TemplateUploaded})
	if frame, open := <-o.C; !open || !strings.Contains(string(frame), "template") {
		t.Fatal("another token's stream ended with them")
	}
}
