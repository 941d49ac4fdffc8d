package actors

import (
	"container/heap"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// recount is the capacity walked from scratch, as publish once computed it after every event.
func (s *scheduler) recount() map[string]Capacity {
	capacity := make(map[string]Capacity)
	for _, n := range s.nodes {
		if n.paused != "" {
			continue
		}
		for _, e := range n.engines {
			c := capacity[e]
			c.Nodes++
			c.Slots += n.total
			c.Free += n.free()
			capacity[e] = c
		}
	}
	for _, q := range s.queues {
		c := capacity[q.engine]
		c.Queued += q.size
		capacity[q.engine] = c
	}
	return capacity
}

// recountPools is what the ready nodes of each pool offer, walked from scratch.
func (s *scheduler) recountPools() map[poolEngine]Capacity {
	pools := make(map[poolEngine]Capacity)
	for _, n := range s.nodes {
		if n.paused != "" {
			continue
		}
		for _, p := range n.pools {
			for _, e := range n.engines {
				pools[poolEngine{p, e}] = n.counted(pools[poolEngine{p, e}], 1)
			}
		}
	}
	for _, q := range s.queues {
		if q.pool != "" {
			c := pools[poolEngine{q.pool, q.engine}]
			c.Queued += q.size
			pools[poolEngine{q.pool, q.engine}] = c
		}
	}
	return pools
}

// newTestScheduler is a scheduler with nothing but a fake clock, an actor system and jobs whose
// actors load makes: what the scheduler's own rules need.
func newTestScheduler(load func(ulid.ULID) (func(*registryEntry) actor.Actor, error)) (*scheduler, *actor.ActorSystem) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	log := slog.New(slog.DiscardHandler)
	jobs := &jobDirectory{registry: newRegistry(system, load), log: log}
	return newScheduler(schedulerDeps{clock: clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), jobs: jobs, log: log,
		published: &capacitySnapshot{}, store: &writtenCommands{}, events: &Events{}}), system
}

// writtenCommands keeps what the scheduler writes.
type writtenCommands struct{ commands []persistence.Command }

func (w *writtenCommands) ApplyAsync(c persistence.Command, done func(error)) {
	w.commands = append(w.commands, c)
	done(nil)
}

// TestWaitReasonsAreRecordedOncePerChange: why an engine's jobs cannot start is written when it
// changes, once, however many jobs wait and however often the scheduler runs; nothing before
// the nodes had their time to come back after a start.
func TestWaitReasonsAreRecordedOncePerChange(t *testing.T) {
	s, _ := newTestScheduler(noJobActors)
	written := s.store.(*writtenCommands)
	s.waits = newWaitBook(map[string]string{"ae2026": "", "ffmpeg": `no render node offers the "ffmpeg" engine`}, nil)
	step := func(what string, want ...persistence.WaitChange) {
		t.Helper()
		s.dispatch()
		s.recordWaits()
		var got []persistence.WaitChange
		for _, c := range written.commands {
			got = append(got, c.(*persistence.RecordWaits).Changes...)
		}
		written.commands = nil
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: recorded %q, want %q", what, got, want)
		}
	}
	queue := func(n int) {
		for range n {
			s.enqueue(&persistence.QueueEntry{JobID: ulid.Make(), TeamID: ulid.ULID{1}, Engine: "lottie"})
		}
	}
	noLottie := persistence.WaitChange{Subject: "lottie", Reason: `no render node offers the "lottie" engine`}
	queue(3)
	step("before judging")
	s.waits.startJudging(slices.Collect(maps.Keys(s.capacity)))
	// ae2026 was ready before the start and has no node now; ffmpeg's reason stands.
	step("judging starts", persistence.WaitChange{Subject: "ae2026", Reason: `no render node offers the "ae2026" engine`}, noLottie)
	queue(100)
	step("more jobs wait")
	s.addNode(&nodeReady{nodeID: "n1", engines: []string{"lottie"}, slots: 1})
	step("a node offers lottie", persistence.WaitChange{Subject: "lottie"})
	step("it renders")
	s.pauseNode("n1", NodeDraining)
	step("it is drained", persistence.WaitChange{Subject: "lottie", Reason: `the only render node offering the "lottie" engine is draining`})
	s.addNode(&nodeReady{nodeID: "n2", engines: []string{"lottie", "ffmpeg"}, slots: 2})
	step("another comes", persistence.WaitChange{Subject: "ffmpeg"}, persistence.WaitChange{Subject: "lottie"})
	s.pauseNode("n2", NodeQuarantined)
	step("it is quarantined", persistence.WaitChange{Subject: "ffmpeg", Reason: `the only render node offering the "ffmpeg" engine is quarantined`},
		persistence.WaitChange{Subject: "lottie", Reason: `every render node offering the "lottie" engine is draining (1) or quarantined (1)`})
	s.addNode(&nodeReady{nodeID: "n2", engines: []string{"lottie", "ffmpeg"}, slots: 2})
	step("it is cleared", persistence.WaitChange{Subject: "ffmpeg"}, persistence.WaitChange{Subject: "lottie"})
	s.dropNode("n2")
	s.dropNode("n1")
	step("both leave", persistence.WaitChange{Subject: "ffmpeg", Reason: `no render node offers the "ffmpeg" engine`}, noLottie)
}

// noJobActors loads no job: these tests dispatch nothing.
func noJobActors(ulid.ULID) (func(*registryEntry) actor.Actor, error) {
	return nil, errors.New("no such job")
}

// capacities is what the scheduler published last.
func (s *scheduler) capacities() map[string]Capacity {
	if m := s.published.Load(); m != nil {
		return *m
	}
	return nil
}

// TestSchedulerKeepsItsCapacity: through a random run of every event the scheduler takes, the
// capacity it keeps as it goes equals the capacity walked from scratch.
func TestSchedulerKeepsItsCapacity(t *testing.T) {
	// No job actor exists here, so the slot of every offer comes back at once.
	s, _ := newTestScheduler(noJobActors)
	rng := rand.New(rand.NewPCG(1, 2))
	engines := []string{"lottie", "ae2026", "ffmpeg"}
	var jobs []ulid.ULID
	for step := range 5000 {
		node := fmt.Sprintf("n%d", rng.IntN(8))
		switch rng.IntN(7) {
		case 0, 1:
			id := ulid.Make()
			jobs = append(jobs, id)
			s.enqueue(&persistence.QueueEntry{JobID: id, TeamID: ulid.ULID{byte(rng.IntN(3))}, Engine: engines[rng.IntN(3)], Priority: rng.IntN(2),
				Pool: []string{"", "gpu", "4k"}[rng.IntN(3)]})
		case 2:
			if len(jobs) > 0 {
				s.remove(jobs[rng.IntN(len(jobs))])
			}
		case 3:
			busy := map[ulid.ULID]ulid.ULID{}
			if len(jobs) > 0 && rng.IntN(2) == 0 {
				busy[jobs[rng.IntN(len(jobs))]] = ulid.ULID{1}
			}
			s.addNode(&nodeReady{nodeID: node, engines: engines[:1+rng.IntN(3)], slots: 1 + rng.IntN(4), busy: busy,
				pools: [][]string{nil, {"gpu"}, {"gpu", "4k"}}[rng.IntN(3)]})
		case 4:
			s.pauseNode(node, []NodeState{NodeSuspect, NodeTesting, NodeDraining, NodeQuarantined}[rng.IntN(4)])
		case 5:
			if n := s.nodes[node]; n != nil {
				for id := range n.busy {
					s.release(n, id)
					break
				}
			}
		case 6:
			s.dropNode(node)
		}
		s.dispatch()
		for id, n := range s.nodes {
			if _, filed := s.free[id]; filed != (n.free() > 0) {
				t.Fatalf("step %d: node %s with %d free slots filed as free: %v", step, id, n.free(), filed)
			}
		}
		kept := s.capacities()
		want := s.recount()
		if len(kept) != len(want) {
			t.Fatalf("step %d: kept %v, walked %v", step, kept, want)
		}
		for e, c := range want {
			if kept[e] != c {
				t.Fatalf("step %d, %s: kept %+v, walked %+v", step, e, kept[e], c)
			}
		}
		if wantPools := s.recountPools(); !maps.Equal(s.pools, wantPools) {
			t.Fatalf("step %d: pools kept %v, walked %v", step, s.pools, wantPools)
		}
	}
}

// TestRestoredQueueWaitsForItsLastChunk: a node ready while a start hands over the queue it
// restores is offered nothing before the last chunk, and then first the job to pick first,
// though it came in that last chunk.
func TestRestoredQueueWaitsForItsLastChunk(t *testing.T) {
	offered := make(chan ulid.ULID, 16)
	// No job actor exists here: each offer's job is recorded, and its slot comes back at once.
	s, system := newTestScheduler(func(id ulid.ULID) (func(*registryEntry) actor.Actor, error) {
		offered <- id
		return nil, errors.New("no job actor here")
	})
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return s }))
	take := func(m *jobsQueued) {
		t.Helper()
		if _, err := system.Root.RequestFuture(pid, m, 10*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
	}
	team, older, urgent := ulid.Make(), ulid.Make(), ulid.Make()
	take(&jobsQueued{entries: []persistence.QueueEntry{{JobID: older, TeamID: team, Engine: "lottie"}}, restoring: true})
	system.Root.Send(pid, &nodeReady{nodeID: "n1", engines: []string{"lottie"}, slots: 1})
	take(&jobsQueued{restoring: true}) // answered after the node's readiness was handled
	select {
	case id := <-offered:
		t.Fatalf("job %s offered before the restored queue was whole", id)
	default:
	}
	take(&jobsQueued{entries: []persistence.QueueEntry{{JobID: urgent, TeamID: team, Engine: "lottie", Priority: 5}}})
	for _, want := range []ulid.ULID{urgent, older} {
		select {
		case id := <-offered:
			if id != want {
				t.Fatalf("offered %s, want %s", id, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never offered", want)
		}
	}
}

// BenchmarkQueuedJobMemory: the heap one queued job costs the coordinator (the scheduler's entry,
// its index and its heap slot; a queued job has no actor), measured over 100,000 jobs of 10 teams,
// and the time of a full collection with them queued.
func BenchmarkQueuedJobMemory(b *testing.B) {
	const jobs = 100_000
	tags := []string{"campaign"}
	var perJob float64
	var collection time.Duration
	for b.Loop() {
		s, _ := newTestScheduler(noJobActors)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range jobs {
			s.enqueue(&persistence.QueueEntry{JobID: ulid.Make(), TeamID: ulid.ULID{byte(i % 10)}, Engine: "lottie", Tags: tags, Priority: i % 3})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perJob = float64(after.HeapAlloc-before.HeapAlloc) / jobs
		started := time.Now()
		runtime.GC()
		collection = time.Since(started)
		runtime.KeepAlive(s)
	}
	b.ReportMetric(perJob, "bytes/queued-job")
	// What the queue costs each garbage collection: nothing to mark when it holds no pointers.
	b.ReportMetric(float64(collection.Microseconds()), "gc-us")
}

// TestQueuesGroupTagSetsWhateverTheirOrder: jobs whose tags differ only in order or repeats wait
// in one queue.
func TestQueuesGroupTagSetsWhateverTheirOrder(t *testing.T) {
	s, _ := newTestScheduler(noJobActors)
	for _, tags := range [][]string{{"b", "a", "a"}, {"a", "b"}, {"b", "a"}} {
		s.enqueue(&persistence.QueueEntry{JobID: ulid.Make(), Engine: "lottie", Tags: tags})
	}
	if len(s.queues) != 1 {
		t.Fatalf("%d queues for one tag set", len(s.queues))
	}
	for _, q := range s.queues {
		if q.size != 3 || strings.Join(q.tags, ",") != "a,b" {
			t.Fatalf("queue %q holds %d jobs, tags %v", q.key, q.size, q.tags)
		}
	}
}

// TestQueueStatsFindTheOldestQueuedJob: the oldest is read from the slab, whose freed slots do
// not count.
func TestQueueStatsFindTheOldestQueuedJob(t *testing.T) {
	s, _ := newTestScheduler(noJobActors)
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var ids []ulid.ULID
	for i := range 3 {
		id := ulid.MustNew(ulid.Timestamp(start.Add(time.Duration(i)*time.Minute)), nil)
		ids = append(ids, id)
		s.enqueue(&persistence.QueueEntry{JobID: id, TeamID: ulid.ULID{1}, Engine: "lottie", Priority: 2 - i})
	}
	if st := s.stats(); !st.OldestQueued.Equal(start) || st.Depth["lottie"] != 3 {
		t.Fatalf("stats %+v", st)
	}
	s.remove(ids[0])
	s.enqueue(&persistence.QueueEntry{JobID: ulid.MustNew(ulid.Timestamp(start.Add(time.Hour)), nil), TeamID: ulid.ULID{2}, Engine: "lottie"})
	if st := s.stats(); !st.OldestQueued.Equal(start.Add(time.Minute)) || st.Depth["lottie"] != 3 {
		t.Fatalf("stats after the oldest left %+v", st)
	}
}

// TestDrainedBacklogGivesItsSlotsBack: once most of a backlog has left, the slab shrinks to the
// jobs still queued, and they keep their order.
func TestDrainedBacklogGivesItsSlotsBack(t *testing.T) {
	s, _ := newTestScheduler(noJobActors)
	rng := rand.New(rand.NewPCG(3, 4))
	teams := []ulid.ULID{{1}, {2}}
	var ids []ulid.ULID
	for i := range 20_000 {
		id := ulid.Make()
		ids = append(ids, id)
		s.enqueue(&persistence.QueueEntry{JobID: id, TeamID: teams[i%2], Engine: "lottie", Priority: rng.IntN(3)})
	}
	kept := map[ulid.ULID]bool{}
	for _, id := range ids {
		if rng.IntN(10) == 0 {
			kept[id] = true
			continue
		}
		s.remove(id)
	}
	if len(s.slab.jobs) > 2*len(kept)+minCompaction || len(s.queued) != len(kept) {
		t.Fatalf("slab of %d slots (%d free) for %d queued jobs", len(s.slab.jobs), len(s.slab.free), len(s.queued))
	}
	for id := range kept {
		if slot, ok := s.queued[id]; !ok || s.slab.jobs[slot].id != id {
			t.Fatalf("job %s lost in the compaction", id)
		}
	}
	// Each team's queue still gives its best job first: priority, then age.
	for _, q := range s.queues {
		for _, tq := range q.teams {
			var prev *queuedJob
			for tq.Len() > 0 {
				j := s.slab.jobs[heap.Pop(tq).(int32)]
				if prev != nil && (j.priority > prev.priority || j.priority == prev.priority && j.id.Compare(prev.id) < 0) {
					t.Fatalf("out of order after the compaction: %+v after %+v", j, *prev)
				}
				prev = &j
			}
		}
	}
}

// TestANodeAJobFailedOnTakesTheTeamsNextJob: a job that failed on node a heads its team's queue
// while node b, which could take it, is busy: a takes the team's next job rather than idle, b is
// still offered the failed job first, and a takes the failed job once no other node could.
func TestANodeAJobFailedOnTakesTheTeamsNextJob(t *testing.T) {
	s, _ := newTestScheduler(noJobActors)
	team := ulid.Make()
	failed, next, last := ulid.Make(), ulid.Make(), ulid.Make()
	s.enqueue(&persistence.QueueEntry{JobID: failed, TeamID: team, Engine: "lottie", Avoid: []string{"a"}})
	s.enqueue(&persistence.QueueEntry{JobID: next, TeamID: team, Engine: "lottie"})
	s.enqueue(&persistence.QueueEntry{JobID: last, TeamID: team, Engine: "lottie", Avoid: []string{"a"}})
	a := &schedNode{id: "a", engines: []string{"lottie"}, total: 1, busy: map[ulid.ULID]ulid.ULID{}}
	b := &schedNode{id: "b", engines: []string{"lottie"}, total: 1, busy: map[ulid.ULID]ulid.ULID{}}
	s.nodes = map[string]*schedNode{"a": a, "b": b}
	if j, ok := s.pick(a); !ok || j.id != next {
		t.Fatalf("node a picked %v (%v), not the job after the one that failed on it", j.id, ok)
	}
	if j, ok := s.pick(b); !ok || j.id != failed {
		t.Fatalf("node b picked %v (%v), not the failed job", j.id, ok)
	}
	s.remove(next)
	if j, ok := s.pick(a); ok {
		t.Fatalf("node a picked %v though every job left failed on it and b could take them", j.id)
	}
	delete(s.nodes, "b")
	if j, ok := s.pick(a); !ok || j.id != failed {
		t.Fatalf("with no other node, a picked %v (%v), not the failed job", j.id, ok)
	}
}

// TestPickupOrder is the pickup order's table (STATE_MACHINE.md, "Pickup order"): which queued
// job a free slot goes to, given each team's policy, the slots its renders hold and its jobs.
func TestPickupOrder(t *testing.T) {
	a, b := ulid.ULID{0xa}, ulid.ULID{0xb}
	type job struct {
		name     string
		team     ulid.ULID
		age      int // minutes after the first job
		priority int
	}
	cases := []struct {
		name    string
		rules   map[ulid.ULID]teamRules
		holding map[ulid.ULID]int
		jobs    []job
		want    string // "" when no job may start
	}{
		{name: "a team's priority ranks its own jobs only; between teams holding alike, the older best job",
			jobs: []job{{"a-old", a, 0, 0}, {"a-urgent", a, 3, 100}, {"b-top", b, 2, 1_000_000}},
			want: "b-top"},
		{name: "within a team, priority before age",
			jobs: []job{{"a-old", a, 0, 0}, {"a-urgent", a, 3, 100}},
			want: "a-urgent"},
		{name: "the team holding fewer slots first, whatever the priorities",
			holding: map[ulid.ULID]int{a: 2},
			jobs:    []job{{"a-top", a, 0, 1_000_000}, {"b-low", b, 5, -5}},
			want:    "b-low"},
		{name: "slots weighed: 2 of weight 3 before 1 of weight 1",
			rules:   map[ulid.ULID]teamRules{a: {weight: 3, maxRunning: -1}},
			holding: map[ulid.ULID]int{a: 2, b: 1},
			jobs:    []job{{"a", a, 5, 0}, {"b", b, 0, 0}},
			want:    "a"},
		{name: "equal shares of the weights: the older job",
			rules:   map[ulid.ULID]teamRules{a: {weight: 3, maxRunning: -1}},
			holding: map[ulid.ULID]int{a: 3, b: 1},
			jobs:    []job{{"a", a, 5, 0}, {"b", b, 0, 0}},
			want:    "b"},
		{name: "a team below its guaranteed slots before any share",
			rules:   map[ulid.ULID]teamRules{a: {weight: 1, guaranteed: 4, maxRunning: -1}, b: {weight: 10, maxRunning: -1}},
			holding: map[ulid.ULID]int{a: 3},
			jobs:    []job{{"a", a, 5, 0}, {"b", b, 0, 0}},
			want:    "a"},
		{name: "a team at its guaranteed slots shares like the others",
			rules:   map[ulid.ULID]teamRules{a: {weight: 1, guaranteed: 3, maxRunning: -1}},
			holding: map[ulid.ULID]int{a: 3, b: 1},
			jobs:    []job{{"a", a, 0, 0}, {"b", b, 5, 0}},
			want:    "b"},
		{name: "two teams below their guarantees: the smaller share of its guarantee",
			rules:   map[ulid.ULID]teamRules{a: {weight: 1, guaranteed: 4, maxRunning: -1}, b: {weight: 1, guaranteed: 2, maxRunning: -1}},
			holding: map[ulid.ULID]int{a: 1, b: 1},
			jobs:    []job{{"a", a, 5, 0}, {"b", b, 0, 0}},
			want:    "a"},
		{name: "a team at its maxRunning is passed over",
			rules:   map[ulid.ULID]teamRules{a: {weight: 1, maxRunning: 2}},
			holding: map[ulid.ULID]int{a: 2, b: 7},
			jobs:    []job{{"a", a, 0, 0}, {"b", b, 5, 0}},
			want:    "b"},
		{name: "a team at its maxRunning takes no free slot, even alone",
			rules:   map[ulid.ULID]teamRules{a: {weight: 1, maxRunning: 2}},
			holding: map[ulid.ULID]int{a: 2},
			jobs:    []job{{"a", a, 0, 0}},
			want:    ""},
		{name: "a maxRunning of 0 holds every job",
			rules: map[ulid.ULID]teamRules{a: {weight: 1, maxRunning: 0}},
			jobs:  []job{{"a", a, 0, 0}},
			want:  ""},
	}
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestScheduler(noJobActors)
			maps.Copy(s.rules, tc.rules)
			maps.Copy(s.holding, tc.holding)
			names := map[ulid.ULID]string{}
			for i, j := range tc.jobs {
				id := ulid.MustNew(ulid.Timestamp(start.Add(time.Duration(j.age)*time.Minute)), strings.NewReader(strings.Repeat(string(rune('a'+i)), 16)))
				names[id] = j.name
				s.enqueue(&persistence.QueueEntry{JobID: id, TeamID: j.team, Engine: "lottie", Priority: j.priority})
			}
			node := &schedNode{id: "n", engines: []string{"lottie"}, total: 1, busy: map[ulid.ULID]ulid.ULID{}}
			got, found := s.pick(node)
			if name := names[got.id]; !found && tc.want != "" || found && name != tc.want {
				t.Fatalf("picked %q (found %v), want %q", name, found, tc.want)
			}
		})
	}
}

// TestWeightsShareTheSlots: two teams each with more work than the farm's 8 slots, weights 3
// and 1: as slots free one at a time, the running slots settle at 6 and 2 and stay there.
func TestWeightsShareTheSlots(t *testing.T) {
	s, _ := newTestScheduler(noJobActors)
	a, b := ulid.ULID{0xa}, ulid.ULID{0xb}
	s.rules[a] = teamRules{weight: 3, maxRunning: -1}
	for range 200 {
		s.enqueue(&persistence.QueueEntry{JobID: ulid.Make(), TeamID: b, Engine: "lottie"})
		s.enqueue(&persistence.QueueEntry{JobID: ulid.Make(), TeamID: a, Engine: "lottie"})
	}
	node := &schedNode{id: "n", engines: []string{"lottie"}, total: 8, busy: map[ulid.ULID]ulid.ULID{}}
	var running []ulid.ULID // the team of each render
	take := func() {
		j, ok := s.pick(node)
		if !ok {
			t.Fatal("nothing picked")
		}
		team := s.teamQueues[j.team].team
		s.remove(j.id)
		s.hold(team, 1)
		running = append(running, team)
	}
	for range 8 {
		take()
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for step := range 100 {
		if got := []int{s.holding[a], s.holding[b]}; !slices.Equal(got, []int{6, 2}) {
			t.Fatalf("step %d: slots held %v, want [6 2]", step, got)
		}
		// A render ends, whichever: its slot goes to the team below its share.
		i := rng.IntN(len(running))
		s.hold(running[i], -1)
		running = slices.Delete(running, i, i+1)
		take()
	}
}

// TestAPoolKeepsItsJobs: a job naming a pool goes only to a node of that pool, whose slots take
// jobs naming no pool too; with no node of the pool ready, the job waits, saying so.
func TestAPoolKeepsItsJobs(t *testing.T) {
	s, _ := newTestScheduler(noJobActors)
	team := ulid.Make()
	gpuJob, anyJob := ulid.Make(), ulid.Make()
	s.enqueue(&persistence.QueueEntry{JobID: gpuJob, TeamID: team, Engine: "lottie", Pool: "gpu"})
	cpu := &schedNode{id: "cpu", engines: []string{"lottie"}, total: 1, busy: map[ulid.ULID]ulid.ULID{}}
	gpu := &schedNode{id: "gpu", engines: []string{"lottie"}, pools: []string{"4k", "gpu"}, total: 1, busy: map[ulid.ULID]ulid.ULID{}}
	if j, ok := s.pick(cpu); ok {
		t.Fatalf("a node of no pool picked %v, a job of pool gpu", j.id)
	}
	if reason := s.waitReason(persistence.PoolWaitSubject("gpu", "lottie")); reason != `no ready render node of pool "gpu" offers the "lottie" engine` {
		t.Fatalf("reason %q", reason)
	}
	s.addNode(&nodeReady{nodeID: "gpu", engines: []string{"lottie"}, pools: []string{"gpu"}, slots: 1})
	if reason := s.waitReason(persistence.PoolWaitSubject("gpu", "lottie")); reason != "" {
		t.Fatalf("with a node of the pool: reason %q", reason)
	}
	if j, ok := s.pick(gpu); !ok || j.id != gpuJob {
		t.Fatalf("a node of pool gpu picked %v (%v)", j.id, ok)
	}
	s.remove(gpuJob)
	s.enqueue(&persistence.QueueEntry{JobID: anyJob, TeamID: team, Engine: "lottie"})
	if j, ok := s.pick(gpu); !ok || j.id != anyJob {
		t.Fatalf("a node of pool gpu did not take a job of no pool: %v (%v)", j.id, ok)
	}
}

// TestLimitsAreNeverExceeded: through a random run of dispatches, renders ending, nodes lost,
// jobs queued again and limits changed, no dispatch ever takes a limit past its count, and the
// renders counted as holding each limit are those that hold it.
func TestLimitsAreNeverExceeded(t *testing.T) {
	s, _ := newTestScheduler(noJobActors) // every offer's slot comes back at once: held here by hand
	rng := rand.New(rand.NewPCG(9, 10))
	names := []string{"ae", "plugin"}
	counts := map[string]int{"ae": 2, "plugin": 1}
	s.limits.set("ae", 2, true)
	s.limits.set("plugin", 1, true)
	var queued, running []persistence.QueueEntry
	for step := range 4000 {
		switch rng.IntN(6) {
		case 0, 1:
			e := persistence.QueueEntry{JobID: ulid.Make(), TeamID: ulid.ULID{byte(rng.IntN(3))}, Engine: "lottie"}
			if k := rng.IntN(4); k < 3 {
				e.Limits = persistence.MergeLimits(names[:k])
			}
			s.enqueue(&e)
			queued = append(queued, e)
		case 2: // a free slot: what would the scheduler start?
			node := &schedNode{id: "n", engines: []string{"lottie"}, total: 1, busy: map[ulid.ULID]ulid.ULID{}}
			j, ok := s.pick(node)
			if !ok {
				continue
			}
			limits := s.teamQueues[j.team].queue.limits
			for _, l := range limits {
				if s.limits.limits[l].held >= counts[l] {
					t.Fatalf("step %d: a job holding %v picked with %s at %d of %d", step, limits, l, s.limits.limits[l].held, counts[l])
				}
			}
			s.limits.hold(j.id, limits)
			s.remove(j.id)
			i := slices.IndexFunc(queued, func(e persistence.QueueEntry) bool { return e.JobID == j.id })
			running, queued = append(running, queued[i]), slices.Delete(queued, i, i+1)
		case 3: // a render ends, or its node is lost
			if len(running) > 0 {
				i := rng.IntN(len(running))
				s.releaseLimits(running[i].JobID)
				running = slices.Delete(running, i, i+1)
			}
		case 4: // a render's node is lost and the job queued again
			if len(running) > 0 {
				i := rng.IntN(len(running))
				e := running[i]
				s.enqueue(&e)
				queued, running = append(queued, e), slices.Delete(running, i, i+1)
			}
		case 5: // the admin changes a count
			l := names[rng.IntN(2)]
			counts[l] = rng.IntN(4)
			s.limits.set(l, counts[l], true)
		}
		held := map[string]int{}
		for _, e := range running {
			for _, l := range e.Limits {
				held[l]++
			}
		}
		for _, l := range names {
			if got := s.limits.limits[l].held; got != held[l] {
				t.Fatalf("step %d: %s counted as held by %d renders, held by %d", step, l, got, held[l])
			}
		}
	}
}

// TestALimitsWaitIsRecorded: jobs needing a limit whose every render is in use wait saying so;
// once one is free the wait is over; a limit the farm no longer has says how to make it.
func TestALimitsWaitIsRecorded(t *testing.T) {
	s, _ := newTestScheduler(noJobActors)
	s.waits.startJudging(nil)
	s.limits.set("ae", 1, true)
	first, second := ulid.Make(), ulid.Make()
	subject := persistence.LimitWaitSubject("ae")
	s.enqueue(&persistence.QueueEntry{JobID: first, TeamID: ulid.Make(), Engine: "lottie", Limits: []string{"ae"}})
	s.enqueue(&persistence.QueueEntry{JobID: second, TeamID: ulid.Make(), Engine: "lottie", Limits: []string{"ae"}})
	if r := s.waitReason(subject); r != "" {
		t.Fatalf("a free limit: %q", r)
	}
	s.limits.hold(first, []string{"ae"})
	s.remove(first)
	if r := s.waitReason(subject); r != `the one render of limit "ae" is in use` {
		t.Fatalf("a limit in use: %q", r)
	}
	s.limits.set("ae", 0, false)
	s.releaseLimits(first)
	if r := s.waitReason(subject); !strings.Contains(r, `the farm has no limit "ae"`) {
		t.Fatalf("a deleted limit: %q", r)
	}
	s.remove(second)
	if r := s.waitReason(subject); r != "" {
		t.Fatalf("no job waiting for it: %q", r)
	}
}

// acceptingJobs makes job actors that take every offer and say nothing: the slots and limits
// offered stay held.
func acceptingJobs(ulid.ULID) (func(*registryEntry) actor.Actor, error) {
	return func(*registryEntry) actor.Actor { return actor.ReceiveFunc(func(actor.Context) {}) }, nil
}

// TestALimitGoesInThePickupOrder: two free nodes, each able to render a job needing the farm's
// one licence. The licence goes to the job the pickup order puts first (the team holding fewer
// slots; within a team, the higher priority), whichever node sorts first.
func TestALimitGoesInThePickupOrder(t *testing.T) {
	busyTeam, idleTeam := ulid.ULID{0xa}, ulid.ULID{0xb}
	cases := []struct {
		name string
		// first and second name the nodes: the one of no pool, the one of pool p.
		first, second string
		// jobs: the team, priority and pool of each job, oldest first; want is the one offered.
		jobs []persistence.QueueEntry
		want int
	}{
		{name: "the team holding no slot, on the node sorting second", first: "a", second: "b",
			jobs: []persistence.QueueEntry{{TeamID: busyTeam}, {TeamID: idleTeam, Pool: "p"}}, want: 1},
		{name: "the team holding no slot, on the node sorting first", first: "b", second: "a",
			jobs: []persistence.QueueEntry{{TeamID: busyTeam}, {TeamID: idleTeam, Pool: "p"}}, want: 1},
		{name: "one team's higher priority, on the node sorting second", first: "a", second: "b",
			jobs: []persistence.QueueEntry{{TeamID: idleTeam}, {TeamID: idleTeam, Pool: "p", Priority: 5}}, want: 1},
		{name: "one team's higher priority, on the node sorting first", first: "b", second: "a",
			jobs: []persistence.QueueEntry{{TeamID: idleTeam, Pool: "p", Priority: 5}, {TeamID: idleTeam}}, want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newTestScheduler(acceptingJobs)
			s.limits.set("licence", 1, true)
			s.hold(busyTeam, 1) // a render of the busy team's elsewhere
			var ids []ulid.ULID
			for _, e := range tc.jobs {
				e.JobID, e.Engine, e.Limits = ulid.Make(), "ae2026", []string{"licence"}
				ids = append(ids, e.JobID)
				s.enqueue(&e)
			}
			// The node of pool p takes jobs of no pool too; the other only those.
			s.addNode(&nodeReady{nodeID: tc.first, engines: []string{"ae2026"}, slots: 1})
			s.addNode(&nodeReady{nodeID: tc.second, engines: []string{"ae2026"}, slots: 1, pools: []string{"p"}})
			s.dispatch()
			if len(s.offered) != 1 {
				t.Fatalf("%d offers, want one (the licence's)", len(s.offered))
			}
			if _, ok := s.offered[ids[tc.want]]; !ok {
				t.Fatalf("the licence went to job %d, want job %d", slices.Index(ids, slices.Collect(maps.Keys(s.offered))[0]), tc.want)
			}
		})
	}
}

// TestATeamHeldToPoolsRendersOnlyThere: a team the admin holds to pool cpu has its jobs that
// name no pool rendered on a node of pool cpu only; its jobs wait, saying why, while none is
// ready.
func TestATeamHeldToPoolsRendersOnlyThere(t *testing.T) {
	s, _ := newTestScheduler(acceptingJobs)
	s.waits.startJudging(nil)
	team := ulid.Make()
	cpu := []string{"cpu"}
	s.rules[team] = rulesFrom(persistence.TeamPolicy{Pools: &cpu})
	job := ulid.Make()
	s.enqueue(&persistence.QueueEntry{JobID: job, TeamID: team, Engine: "lottie"})
	s.addNode(&nodeReady{nodeID: "gpu", engines: []string{"lottie"}, slots: 1, pools: []string{"gpu"}})
	s.addNode(&nodeReady{nodeID: "plain", engines: []string{"lottie"}, slots: 1})
	s.dispatch()
	if len(s.offered) != 0 {
		t.Fatalf("a job of a team held to pool cpu was offered a node of no pool cpu: %v", s.offered)
	}
	if r := s.waitReason(teamSubject(team)); r != `the team renders only in pools ["cpu"] (set by the farm's admin), and no ready render node is in one` {
		t.Fatalf("reason %q", r)
	}
	s.addNode(&nodeReady{nodeID: "cpu", engines: []string{"lottie"}, slots: 1, pools: []string{"cpu"}})
	s.dispatch()
	if n := s.offered[job]; n == nil || n.id != "cpu" {
		t.Fatalf("offered to %v, want node cpu", n)
	}
	if r := s.waitReason(teamSubject(team)); r != "" {
		t.Fatalf("with a node of pool cpu: reason %q", r)
	}
}
