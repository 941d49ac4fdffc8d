package actors

import (
	"container/heap"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// scheduler matches queued jobs to free node slots. It pushes: every event that can make a match
// possible (a job queued, a slot freed, a node ready) runs a dispatch round at once.
//
// Pickup order, for a free slot (the table in STATE_MACHINE.md, "Pickup order"): among the teams
// with a job the slot's node can render (its engine, every tag the node requires, its pool when
// it names one) whose limits each have a render free, that are below their maxRunning, a team below its guaranteedSlots first (the one holding the smallest
// share of its guarantee); otherwise the team holding the fewest slots for its weight (weighted
// fair share); ties go to the team whose job is oldest. The team's job is its best: the highest
// priority, then the oldest. Priority ranks a team's own jobs and never another team's. A job is
// not given to a node it already failed on while another ready node could take it.
//
// Queues are per engine, tag set, pool and limits, each holding one heap per team; a pick looks
// at the heads only. So a team's head job that avoids a node holds that team's later jobs back from that
// node for the round (they go to other nodes).
type scheduler struct {
	clock clock.Clock
	// jobs receive the offers of slots.
	jobs interface {
		deliver(jobID ulid.ULID, msg any, sender *actor.PID) error
	}
	log *slog.Logger
	// published is where the capacity is made readable outside the actor, loads where each
	// team's share is (publishing it only when it changed: loadsChanged).
	published    *capacitySnapshot
	loads        *teamLoadSnapshot
	loadsChanged bool
	poolsOut     *poolSnapshot
	queues       map[string]*engineQueue
	// queued finds a queued job's slot in slab. Neither holds a pointer, so the collector
	// skips them whatever the backlog: a million queued jobs cost it no marking.
	queued map[ulid.ULID]int32
	slab   jobSlab
	// teamQueues holds every team queue by the index its jobs carry; free lists unused ones.
	teamQueues []*teamQueue
	freeTeams  []int32
	// avoid holds, for the queued jobs that failed somewhere, the nodes they failed on.
	avoid   map[ulid.ULID][]string
	nodes   map[string]*schedNode
	offered map[ulid.ULID]*schedNode
	// holding counts, per team, the slots its jobs hold (offered or rendering); queuedBy its
	// queued jobs.
	holding  map[ulid.ULID]int
	queuedBy map[ulid.ULID]int
	// rules are the teams' policies as far as picking goes (teams without one have the default);
	// teamBest is pick's scratch: each team's best job for the node.
	rules    map[ulid.ULID]teamRules
	teamBest map[ulid.ULID]queuedJob
	// capacity is kept as nodes and queues change, so publishing it costs a copy, not a walk
	// over every node after every event; free holds the nodes with a free slot, so a dispatch
	// looks at those only.
	capacity map[string]Capacity
	free     map[string]*schedNode
	// restoring is set while a start hands over the queue it restores: nothing is dispatched.
	restoring bool
	// limits are the farm's limits and the renders holding each (scheduler_limits.go); pools
	// what ready nodes of each pool offer.
	limits limitBook
	pools  map[poolEngine]Capacity
	// waits says why each engine's jobs cannot start; its changes are written to store.
	waits  *waitBook
	store  commandWriter
	events *Events
}

// commandWriter takes the scheduler's writes without waiting for them.
type commandWriter interface {
	ApplyAsync(c persistence.Command, done func(error))
}

// queuedJob is a queued job as the scheduler holds it: no record, no actor (the job's actor is
// activated from the store when it is offered a slot). Kept small and free of pointers, since a
// campaign queues hundreds of thousands: the team, engine and tags live in the queue it sits in
// (team is that queue's index in scheduler.teamQueues), and the rare nodes to avoid in
// scheduler.avoid.
type queuedJob struct {
	id ulid.ULID
	// queuedAt is when it was queued, in Unix nanoseconds of the coordinator's clock.
	queuedAt int64
	priority int32
	index    int32 // in its team queue's heap
	team     int32
}

// jobSlab stores queued jobs by slot; freed slots are used again.
type jobSlab struct {
	jobs []queuedJob
	free []int32
}

func (s *jobSlab) add(j queuedJob) int32 {
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		s.jobs[slot] = j
		return slot
	}
	s.jobs = append(s.jobs, j)
	return int32(len(s.jobs) - 1)
}

func (s *jobSlab) release(slot int32) {
	s.jobs[slot] = queuedJob{}
	s.free = append(s.free, slot)
}

// engineQueue holds the queued jobs of one engine, tag set, pool and set of limits.
type engineQueue struct {
	key    string
	engine string
	tags   []string
	pool   string
	limits []string
	teams  map[ulid.ULID]*teamQueue
	size   int
}

// sortedUnique reports whether a tag list is sorted without repeats (a queue's key needs one;
// most lists already are, and are then used as they are).
func sortedUnique(tags []string) bool {
	for i := 1; i < len(tags); i++ {
		if tags[i-1] >= tags[i] {
			return false
		}
	}
	return true
}

// queueKey names the queue of an engine, a sorted tag set, a pool and a sorted set of limits.
func queueKey(engine string, tags []string, pool string, limits []string) string {
	return engine + "\x00" + strings.Join(tags, "\x00") + "\x01" + pool + "\x01" + strings.Join(limits, "\x00")
}

// teamQueue is one team's queued jobs for one engine and tag set, best first: a heap of slots
// of the scheduler's slab.
type teamQueue struct {
	team  ulid.ULID
	queue *engineQueue
	index int32 // in scheduler.teamQueues
	slab  *jobSlab
	jobs  []int32
}

func (q *teamQueue) job(i int) *queuedJob { return &q.slab.jobs[q.jobs[i]] }

func (q *teamQueue) Len() int           { return len(q.jobs) }
func (q *teamQueue) Less(i, k int) bool { return ranksBefore(q.job(i), q.job(k)) }
func (q *teamQueue) Swap(i, k int) {
	q.jobs[i], q.jobs[k] = q.jobs[k], q.jobs[i]
	q.job(i).index, q.job(k).index = int32(i), int32(k)
}
func (q *teamQueue) Push(x any) {
	slot := x.(int32)
	q.slab.jobs[slot].index = int32(len(q.jobs))
	q.jobs = append(q.jobs, slot)
}
func (q *teamQueue) Pop() any {
	slot := q.jobs[len(q.jobs)-1]
	q.jobs = q.jobs[:len(q.jobs)-1]
	return slot
}

type schedNode struct {
	id          string
	pid         *actor.PID
	engines     []string
	requireTags []string
	total       int
	// pools are the pools the node belongs to, sorted.
	pools []string
	// paused is the state of a node that keeps its busy slots but takes no work (draining,
	// quarantined, suspect, testing); "" for a ready node.
	paused NodeState
	// busy maps the jobs holding this node's slots to their teams.
	busy map[ulid.ULID]ulid.ULID
}

func (n *schedNode) free() int {
	if n.paused != "" {
		return 0
	}
	return max(n.total-len(n.busy), 0)
}

// takes reports whether the node may render a queue's jobs.
func (n *schedNode) takes(q *engineQueue) bool {
	if !slices.Contains(n.engines, q.engine) {
		return false
	}
	if q.pool != "" && !slices.Contains(n.pools, q.pool) {
		return false
	}
	for _, t := range n.requireTags {
		if _, ok := slices.BinarySearch(q.tags, t); !ok {
			return false
		}
	}
	return true
}

// schedulerDeps are what the scheduler works with: store records why jobs wait (events hears
// of it), starting from waits, the reasons last recorded.
type schedulerDeps struct {
	clock     clock.Clock
	jobs      *jobDirectory
	log       *slog.Logger
	published *capacitySnapshot
	loads     *teamLoadSnapshot
	store     commandWriter
	events    *Events
	waits     map[string]string
	// teams are the teams' policies at the start; limits the farm's limits.
	teams  map[ulid.ULID]persistence.TeamPolicy
	limits []persistence.Limit
	// published pools' capacity and limits' use (nil in tests that read neither).
	poolsPublished  *poolSnapshot
	limitsPublished *limitSnapshot
	waitsPublished  *waitSnapshot
}

func newScheduler(d schedulerDeps) *scheduler {
	return &scheduler{
		store:     d.store,
		events:    d.events,
		waits:     newWaitBook(d.waits, d.waitsPublished),
		clock:     d.clock,
		jobs:      d.jobs,
		log:       d.log,
		published: d.published,
		loads:     d.loads,
		queues:    make(map[string]*engineQueue),
		queued:    make(map[ulid.ULID]int32),
		avoid:     make(map[ulid.ULID][]string),
		nodes:     make(map[string]*schedNode),
		offered:   make(map[ulid.ULID]*schedNode),
		holding:   make(map[ulid.ULID]int),
		queuedBy:  make(map[ulid.ULID]int),
		rules:     rulesOf(d.teams),
		teamBest:  make(map[ulid.ULID]queuedJob),
		capacity:  make(map[string]Capacity),
		free:      make(map[string]*schedNode),
		limits:    newLimitBook(d.limits, d.limitsPublished),
		pools:     make(map[poolEngine]Capacity),
		poolsOut:  d.poolsPublished,
	}
}

// teamRules are what a team's policy says of picking: its weight, its guaranteed slots, and the
// most it may hold (-1: no cap).
type teamRules struct {
	weight, guaranteed, maxRunning int
	// pools, when set, are the only pools the team's jobs render in, whatever pool they name
	// (none included).
	pools *[]string
}

// mayRenderOn reports whether the team's jobs may render on a node: any node, unless the team's
// admin-set pools hold it to nodes of one of them.
func (r teamRules) mayRenderOn(n *schedNode) bool {
	if r.pools == nil {
		return true
	}
	for _, p := range *r.pools {
		if _, ok := slices.BinarySearch(n.pools, p); ok {
			return true
		}
	}
	return false
}

var defaultRules = teamRules{weight: 1, maxRunning: -1}

func rulesFrom(p persistence.TeamPolicy) teamRules {
	r := teamRules{weight: p.WeightOrDefault(), guaranteed: p.Guaranteed(), maxRunning: -1, pools: p.Pools}
	if p.MaxRunning != nil {
		r.maxRunning = *p.MaxRunning
	}
	return r
}

func rulesOf(policies map[ulid.ULID]persistence.TeamPolicy) map[ulid.ULID]teamRules {
	rules := make(map[ulid.ULID]teamRules, len(policies))
	for team, p := range policies {
		if r := rulesFrom(p); r != defaultRules {
			rules[team] = r
		}
	}
	return rules
}

func (s *scheduler) rulesFor(team ulid.ULID) teamRules {
	if r, ok := s.rules[team]; ok {
		return r
	}
	return defaultRules
}

// atCap reports whether a team holds as many slots as its maxRunning.
func (s *scheduler) atCap(team ulid.ULID) bool {
	r := s.rulesFor(team)
	return r.maxRunning >= 0 && s.holding[team] >= r.maxRunning
}

// teamPolicySet: a team's policy changed (durably).
type teamPolicySet struct {
	team   ulid.ULID
	policy persistence.TeamPolicy
}

// statsRequest asks for the queue statistics metrics scrape.
type statsRequest struct{}

// judgeWaits starts the judging of why jobs wait, once render nodes had time to come back
// after a start.
type judgeWaits struct{}

// QueueStats describes the queue at one moment.
type QueueStats struct {
	Depth map[string]int
	// OldestQueued is the creation time of the oldest queued job (zero when none).
	OldestQueued time.Time
}

func (s *scheduler) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *jobsQueued:
		for i := range m.entries {
			s.enqueue(&m.entries[i])
		}
		s.restoring = m.restoring
		if ctx.Sender() != nil {
			ctx.Respond(true)
		}
	case *jobWithdrawn:
		s.remove(m.jobID)
	case *chunksWithdrawn:
		for _, id := range m.ids {
			s.remove(id)
		}
	case *offerClaimed:
		delete(s.offered, m.jobID)
		return
	case *offerDeclined:
		if n := s.offered[m.jobID]; n != nil {
			delete(s.offered, m.jobID)
			s.release(n, m.jobID)
		}
	case *slotFreed:
		if n := s.nodes[m.nodeID]; n != nil {
			s.release(n, m.jobID)
		}
	case *nodeReady:
		s.addNode(m)
	case *nodePaused:
		s.pauseNode(m.nodeID, m.state)
	case *nodeGone:
		s.dropNode(m.nodeID)
	case *statsRequest:
		ctx.Respond(s.stats())
		return
	case *judgeWaits:
		s.waits.startJudging(slices.Collect(maps.Keys(s.capacity)))
	case *limitSet:
		s.limits.set(m.name, m.count, m.exists)
		s.waits.touch(persistence.LimitWaitSubject(m.name))
	case *limitsHeld:
		for job, limits := range m.jobs {
			s.limits.hold(job, limits)
		}
	case *limitsReleased:
		s.releaseLimits(m.job)
	case *teamPolicySet:
		s.loadsChanged = true
		if r := rulesFrom(m.policy); r != defaultRules {
			s.rules[m.team] = r
		} else {
			delete(s.rules, m.team)
		}
		s.waits.touch(teamSubject(m.team))
	default:
		return
	}
	// Reasons first: a job that starts in this dispatch started after its wait was over.
	s.recordWaits()
	s.dispatch()
}

func (s *scheduler) enqueue(e *persistence.QueueEntry) {
	if _, queued := s.queued[e.JobID]; queued {
		return
	}
	tags := e.Tags
	if !sortedUnique(tags) {
		tags = slices.Compact(slices.Sorted(slices.Values(tags)))
	}
	// A job queued again holds nothing of what its last attempt held.
	s.releaseLimits(e.JobID)
	key := queueKey(e.Engine, tags, e.Pool, e.Limits)
	q := s.queues[key]
	if q == nil {
		q = &engineQueue{key: key, engine: e.Engine, tags: slices.Clone(tags), pool: e.Pool, limits: slices.Clone(e.Limits),
			teams: make(map[ulid.ULID]*teamQueue)}
		s.queues[key] = q
	}
	s.countQueuedPlacement(q, 1)
	tq := q.teams[e.TeamID]
	if tq == nil {
		tq = s.newTeamQueue(e.TeamID, q)
		q.teams[e.TeamID] = tq
	}
	slot := s.slab.add(queuedJob{id: e.JobID, team: tq.index, priority: int32(e.Priority), queuedAt: s.clock.Now().UnixNano()})
	heap.Push(tq, slot)
	q.size++
	s.queued[e.JobID] = slot
	s.loadsChanged = true
	if s.queuedBy[e.TeamID]++; s.queuedBy[e.TeamID] == 1 {
		s.waits.touch(teamSubject(e.TeamID))
	}
	if len(e.Avoid) > 0 {
		s.avoid[e.JobID] = e.Avoid
	}
	s.countQueued(e.Engine, 1)
}

// minCompaction is how many free slots the slab keeps before it may be compacted.
const minCompaction = 4096

// compact moves the queued jobs into a slab of their number, and their ids into a new map (Go
// maps never shrink), so the memory a drained backlog held is given back. It runs when more
// than half the slots are free: its cost is paid for by the removals that freed them.
func (s *scheduler) compact() {
	jobs := make([]queuedJob, 0, len(s.queued))
	queued := make(map[ulid.ULID]int32, len(s.queued))
	moved := make([]int32, len(s.slab.jobs)) // old slot -> new slot
	for old, j := range s.slab.jobs {
		if j.id != (ulid.ULID{}) {
			moved[old] = int32(len(jobs))
			queued[j.id] = int32(len(jobs))
			jobs = append(jobs, j)
		}
	}
	for _, tq := range s.teamQueues {
		if tq != nil {
			for i, slot := range tq.jobs {
				tq.jobs[i] = moved[slot]
			}
		}
	}
	s.slab = jobSlab{jobs: jobs}
	s.queued = queued
}

// newTeamQueue makes a team's queue in q, at a free index of teamQueues.
func (s *scheduler) newTeamQueue(team ulid.ULID, q *engineQueue) *teamQueue {
	tq := &teamQueue{team: team, queue: q, slab: &s.slab}
	if n := len(s.freeTeams); n > 0 {
		tq.index, s.freeTeams = s.freeTeams[n-1], s.freeTeams[:n-1]
		s.teamQueues[tq.index] = tq
	} else {
		tq.index = int32(len(s.teamQueues))
		s.teamQueues = append(s.teamQueues, tq)
	}
	return tq
}

func (s *scheduler) remove(jobID ulid.ULID) {
	slot, queued := s.queued[jobID]
	if !queued {
		return
	}
	delete(s.queued, jobID)
	delete(s.avoid, jobID)
	tq := s.teamQueues[s.slab.jobs[slot].team]
	q := tq.queue
	s.countQueued(q.engine, -1)
	s.countQueuedPlacement(q, -1)
	s.loadsChanged = true
	if s.queuedBy[tq.team]--; s.queuedBy[tq.team] <= 0 {
		delete(s.queuedBy, tq.team)
		s.waits.touch(teamSubject(tq.team))
	}
	heap.Remove(tq, int(s.slab.jobs[slot].index))
	s.slab.release(slot)
	if free := len(s.slab.free); free > minCompaction && 2*free > len(s.slab.jobs) {
		s.compact()
	}
	if tq.Len() == 0 {
		delete(q.teams, tq.team)
		s.teamQueues[tq.index] = nil
		s.freeTeams = append(s.freeTeams, tq.index)
	}
	if q.size--; q.size == 0 {
		delete(s.queues, q.key)
	}
}

func (s *scheduler) release(n *schedNode, jobID ulid.ULID) {
	s.releaseLimits(jobID)
	team, ok := n.busy[jobID]
	if !ok {
		return
	}
	s.changeNode(n, func() { delete(n.busy, jobID) })
	s.hold(team, -1)
}

// hold counts a slot a team's job takes (1) or gives back (-1); a team with a cap on its
// running renders may have crossed it, which changes why its jobs wait.
func (s *scheduler) hold(team ulid.ULID, delta int) {
	s.loadsChanged = true
	if s.holding[team] += delta; s.holding[team] <= 0 {
		delete(s.holding, team)
	}
	if s.rulesFor(team).maxRunning >= 0 {
		s.waits.touch(teamSubject(team))
	}
}

// pauseNode keeps what the node holds and gives it nothing new.
func (s *scheduler) pauseNode(nodeID string, state NodeState) {
	if n := s.nodes[nodeID]; n != nil {
		s.changeNode(n, func() { n.paused = state })
		s.touchNode(n)
	}
}

// dropNode forgets a node; its slots come back.
func (s *scheduler) dropNode(nodeID string) {
	n := s.nodes[nodeID]
	if n == nil {
		return
	}
	for jobID := range n.busy {
		s.release(n, jobID)
	}
	s.countNode(n, -1)
	delete(s.nodes, nodeID)
	delete(s.free, nodeID)
	s.touchNode(n)
}

func (s *scheduler) addNode(m *nodeReady) {
	n := s.nodes[m.nodeID]
	if n == nil {
		n = &schedNode{id: m.nodeID, busy: make(map[ulid.ULID]ulid.ULID)}
		s.nodes[m.nodeID] = n
	}
	s.touchNode(n) // what it offered, if it offers other things now
	s.changeNode(n, func() { s.takeNode(n, m) })
	s.touchNode(n)
}

// takeNode sets what a ready node offers and holds.
func (s *scheduler) takeNode(n *schedNode, m *nodeReady) {
	n.pid, n.engines, n.total, n.paused = m.pid, slices.Clone(m.engines), m.slots, ""
	n.requireTags = slices.Clone(m.requireTags)
	slices.Sort(n.requireTags)
	n.pools = slices.Clone(m.pools)
	slices.Sort(n.pools)
	// What the node holds that we did not give it (attempts adopted after a restart) takes a
	// slot. Nothing is released for being absent from its account: an offer still on its way
	// to the node is not in it, and every slot we took comes back by slotFreed or
	// offerDeclined.
	for jobID, team := range m.busy {
		if _, ok := n.busy[jobID]; !ok {
			n.busy[jobID] = team
			s.hold(team, 1)
		}
	}
}

// dispatch fills free slots until no free slot can take any queued job. Each pass gives every
// free node at most one job, so work spreads over nodes (most free slots first); within a pass
// the nodes' picks are granted in the pickup order (dispatch.go), so a limit freed goes to the
// job the pickup order puts first, whichever node would render it.
func (s *scheduler) dispatch() {
	if s.restoring {
		return
	}
	defer s.publish()
	if len(s.queued) == 0 {
		return
	}
	nodes := make([]*schedNode, 0, len(s.free))
	for _, n := range s.free {
		nodes = append(nodes, n)
	}
	// Most free slots first, so a farm spreads work instead of stacking one node.
	sort.Slice(nodes, func(i, k int) bool {
		if nodes[i].free() != nodes[k].free() {
			return nodes[i].free() > nodes[k].free()
		}
		return nodes[i].id < nodes[k].id
	})
	for progress := true; progress && len(s.queued) > 0; {
		progress = false
		pass := newPassOrder(s)
		for i, n := range nodes {
			if n.free() > 0 {
				pass.offer(i, n)
			}
		}
		for {
			c, ok := pass.next()
			if !ok {
				break
			}
			s.grant(c.node, c.job)
			progress = true
		}
	}
}

// grant gives a node's free slot to a queued job: the job leaves the queue holding its limits
// and the slot, and is offered the slot.
func (s *scheduler) grant(n *schedNode, j queuedJob) {
	tq := s.teamQueues[j.team]
	team := tq.team
	s.limits.hold(j.id, tq.queue.limits)
	s.remove(j.id)
	s.changeNode(n, func() { n.busy[j.id] = team })
	s.hold(team, 1)
	s.offered[j.id] = n
	if err := s.jobs.deliver(j.id, &offer{node: n.pid, nodeID: n.id, queuedAt: time.Unix(0, j.queuedAt)}, nil); err != nil {
		// No job actor will answer the offer: the slot comes back now.
		s.log.Warn("cannot offer a slot to a job", "job", j.id.String(), "err", err)
		delete(s.offered, j.id)
		s.release(n, j.id)
	}
}

// pick returns (a copy of) the queued job a node's free slot goes to: the best job of the team
// served first (pickup order, above); found is false when there is none.
func (s *scheduler) pick(n *schedNode) (best queuedJob, found bool) {
	c, found := s.choose(n)
	return c.job, found
}

// choice is what a node's free slot goes to: the job, its team, and the team served next
// (runnerUp, when another team had a job for the node) with that team's best job.
type choice struct {
	job, runnerUpJob queuedJob
	team, runnerUp   ulid.ULID
	hasRunnerUp      bool
}

// choose is pick, telling the runner-up as well.
func (s *scheduler) choose(n *schedNode) (c choice, found bool) {
	clear(s.teamBest)
	for _, q := range s.queues {
		if !n.takes(q) || !s.limits.free(q.limits) {
			continue
		}
		for team, tq := range q.teams {
			if s.atCap(team) || !s.rulesFor(team).mayRenderOn(n) {
				continue
			}
			head := s.bestFor(n, tq)
			if head == nil {
				continue
			}
			if held, ok := s.teamBest[team]; !ok || ranksBefore(head, &held) {
				s.teamBest[team] = *head
			}
		}
	}
	for team, j := range s.teamBest {
		switch {
		case !found || s.servedBefore(team, &j, c.team, &c.job):
			if found {
				c.runnerUp, c.runnerUpJob, c.hasRunnerUp = c.team, c.job, true
			}
			c.job, c.team, found = j, team, true
		case !c.hasRunnerUp || s.servedBefore(team, &j, c.runnerUp, &c.runnerUpJob):
			c.runnerUp, c.runnerUpJob, c.hasRunnerUp = team, j, true
		}
	}
	return c, found
}

// ranksBefore orders one team's jobs: the highest priority, then the oldest.
func ranksBefore(a, b *queuedJob) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return a.id.Compare(b.id) < 0
}

// servedBefore orders two teams for a free slot, each with its best job: a team below its
// guaranteed slots first, the one holding the smallest share of them; then the team holding
// the fewest slots for its weight; then the team whose job is older.
func (s *scheduler) servedBefore(a ulid.ULID, aJob *queuedJob, b ulid.ULID, bJob *queuedJob) bool {
	ra, rb := s.rulesFor(a), s.rulesFor(b)
	ha, hb := s.holding[a], s.holding[b]
	underA, underB := ha < ra.guaranteed, hb < rb.guaranteed
	if underA != underB {
		return underA
	}
	// Compared as products: ha/ga < hb/gb, ha/wa < hb/wb.
	if underA && ha*rb.guaranteed != hb*ra.guaranteed {
		return ha*rb.guaranteed < hb*ra.guaranteed
	}
	if !underA && ha*rb.weight != hb*ra.weight {
		return ha*rb.weight < hb*ra.weight
	}
	if c := aJob.id.Compare(bJob.id); c != 0 {
		return c < 0
	}
	return a.Compare(b) < 0
}

// maxAvoidedLookahead bounds how many jobs that avoid a node bestFor steps over for it.
const maxAvoidedLookahead = 64

// bestFor returns the best job of a team's queue for node n: its head, unless the head failed on
// n while another node could take it; then the best job after it that does not avoid n (a
// best-first walk of the heap from its root, stepping over the jobs that avoid n), so a node a
// job failed on still takes the team's other work, such as the other chunks of a split job. nil
// when there is none within maxAvoidedLookahead.
func (s *scheduler) bestFor(n *schedNode, tq *teamQueue) *queuedJob {
	avoids := func(pos int) bool {
		avoid := s.avoid[tq.job(pos).id]
		return slices.Contains(avoid, n.id) && s.anotherNodeTakes(tq.queue, avoid)
	}
	if !avoids(0) {
		return tq.job(0) // nearly always: no walk, nothing allocated
	}
	frontier := []int{0}
	for steps := 0; len(frontier) > 0 && steps <= maxAvoidedLookahead; steps++ {
		best := 0
		for i := range frontier {
			if tq.Less(frontier[i], frontier[best]) {
				best = i
			}
		}
		pos := frontier[best]
		frontier = slices.Delete(frontier, best, best+1)
		if !avoids(pos) {
			return tq.job(pos)
		}
		for _, child := range []int{2*pos + 1, 2*pos + 2} {
			if child < tq.Len() {
				frontier = append(frontier, child)
			}
		}
	}
	return nil
}

// anotherNodeTakes reports whether a node outside avoid could render the queue's jobs now or
// once a slot frees.
func (s *scheduler) anotherNodeTakes(q *engineQueue, avoid []string) bool {
	for _, n := range s.nodes {
		if n.paused == "" && !slices.Contains(avoid, n.id) && n.takes(q) {
			return true
		}
	}
	return false
}

func (s *scheduler) stats() QueueStats {
	st := QueueStats{Depth: make(map[string]int)}
	var oldest ulid.ULID
	for _, n := range s.nodes {
		for _, e := range n.engines {
			st.Depth[e] += 0 // every engine a node offers shows, queued or not
		}
	}
	for _, q := range s.queues {
		st.Depth[q.engine] += q.size
	}
	// The slab's values in a row are read faster than the map; free slots hold the zero id.
	for i := range s.slab.jobs {
		if id := s.slab.jobs[i].id; id != (ulid.ULID{}) && (oldest == (ulid.ULID{}) || id.Compare(oldest) < 0) {
			oldest = id
		}
	}
	if oldest != (ulid.ULID{}) {
		st.OldestQueued = ulid.Time(oldest.Time())
	}
	return st
}

// Capacity is what the scheduler knows of one engine at one moment: the ready nodes offering
// it (draining, quarantined and suspect nodes take no work and are not counted), their slots,
// how many are free, and the jobs queued for it.
type Capacity struct {
	Nodes  int
	Slots  int
	Free   int
	Queued int
}

// countNode adds (sign 1) or takes away (sign -1) a node's share of the capacity: a paused
// node has none. Added back after a change, the node is also filed as free or not.
func (s *scheduler) countNode(n *schedNode, sign int) {
	if sign > 0 {
		if n.free() > 0 {
			s.free[n.id] = n
		} else {
			delete(s.free, n.id)
		}
	}
	if n.paused != "" {
		return
	}
	for _, e := range n.engines {
		s.capacity[e] = n.counted(s.capacity[e], sign)
		for _, p := range n.pools {
			if c := n.counted(s.pools[poolEngine{p, e}], sign); c == (Capacity{}) {
				delete(s.pools, poolEngine{p, e})
			} else {
				s.pools[poolEngine{p, e}] = c
			}
		}
	}
}

// counted is c with the node's share added (sign 1) or taken away (-1).
func (n *schedNode) counted(c Capacity, sign int) Capacity {
	c.Nodes += sign
	c.Slots += sign * n.total
	c.Free += sign * n.free()
	return c
}

// changeNode changes a node, keeping the capacity.
func (s *scheduler) changeNode(n *schedNode, change func()) {
	s.countNode(n, -1)
	change()
	s.countNode(n, 1)
}

func (s *scheduler) countQueued(engine string, delta int) {
	c := s.capacity[engine]
	if c.Queued == 0 {
		s.waits.touch(engine) // its first job: what does it wait for?
	}
	c.Queued += delta
	s.capacity[engine] = c
}

// publish makes the current capacity per engine readable without asking the actor: the engines
// some ready node offers or some job waits for.
func (s *scheduler) publish() {
	capacity := make(map[string]Capacity, len(s.capacity))
	for e, c := range s.capacity {
		if c != (Capacity{}) {
			capacity[e] = c
		}
	}
	s.published.Store(&capacity)
	s.publishPools()
	s.limits.publish()
	if s.loads != nil && s.loadsChanged {
		s.loadsChanged = false
		loads := make(map[ulid.ULID]TeamLoad, len(s.holding)+len(s.queuedBy))
		for team, n := range s.holding {
			loads[team] = TeamLoad{Running: n}
		}
		for team, n := range s.queuedBy {
			l := loads[team]
			l.Queued = n
			loads[team] = l
		}
		for team, l := range loads {
			if r := s.rulesFor(team); r.maxRunning >= 0 {
				l.Capped, l.MaxRunning = true, r.maxRunning
			}
			loads[team] = l
		}
		s.loads.Store(&loads)
	}
}

// TeamLoad is what a team holds of the farm at one moment: the render slots its jobs hold
// (offered or rendering, chunks included), its jobs queued for one, and its maxRunning when
// Capped.
type TeamLoad struct {
	Running, Queued int
	Capped          bool
	MaxRunning      int
}

// AtCap reports whether the team's renders hold as many slots as its maxRunning.
func (l TeamLoad) AtCap() bool { return l.Capped && l.Running >= l.MaxRunning }

// teamLoadSnapshot holds the latest published loads.
type teamLoadSnapshot = atomic.Pointer[map[ulid.ULID]TeamLoad]

// TeamLoads returns each team's load as last published; a team holding and queueing nothing is
// absent.
func (c *Coordinator) TeamLoads() map[ulid.ULID]TeamLoad {
	return lastPublished(c, func(t *term) *teamLoadSnapshot { return &t.loads })
}

// capacitySnapshot holds the latest published capacity.
type capacitySnapshot = atomic.Pointer[map[string]Capacity]

// Capacities returns the latest published capacity of every engine.
func (c *Coordinator) Capacities() map[string]Capacity {
	return lastPublished(c, func(t *term) *capacitySnapshot { return &t.capacity })
}

// lastPublished is what the running term last published in the snapshot of its that pick chooses
// (zero while no term runs, or before its first).
func lastPublished[T any](c *Coordinator, pick func(*term) *atomic.Pointer[T]) T {
	var none T
	t := c.now.Load()
	if t == nil {
		return none
	}
	if m := pick(t).Load(); m != nil {
		return *m
	}
	return none
}

// QueueStats asks the scheduler for queue depth per engine and the oldest queued job.
func (c *Coordinator) QueueStats() (QueueStats, error) {
	t, err := c.leading()
	if err != nil {
		return QueueStats{}, err
	}
	res, err := t.system.Root.RequestFuture(t.addr.scheduler, &statsRequest{}, c.cfg.AskTimeout).Result()
	if err != nil {
		return QueueStats{}, ErrUnavailable
	}
	return res.(QueueStats), nil
}
