package actors

import (
	"container/heap"

	"github.com/oklog/ulid/v2"
)

// passOrder orders one dispatch pass's grants: each free node's choice, granted in the pickup
// order of their teams and jobs (the team served first, then its best job), whichever node's
// they are. A choice is checked again when its turn comes, since the grants before it may have
// changed it: its job given to another node, its limit filled, its team at its cap, or its team
// holding more now and another team served first on that node. A choice that no longer stands
// is made again for its node. One that stands but needs a limit, while its team holds more than
// when it was ranked, is ranked again under its team's new share: limits go strictly in the
// pickup order. A choice that needs no limit competes with no other node's, and is granted.
type passOrder struct {
	s    *scheduler
	heap candidates
	// ties holds each team's best chosen job of the pass, which breaks ties between teams'
	// shares (the older first), as servedBefore does.
	ties map[ulid.ULID]queuedJob
	// started: the nodes' first choices are all in, and the pass grants.
	started bool
}

// candidate is a node's choice in a pass, with what ranks it.
type candidate struct {
	choice
	node *schedNode
	// place is the node's in the pass (most free slots first); held is what the team held when
	// the choice was ranked.
	place int
	held  int
}

func newPassOrder(s *scheduler) *passOrder {
	p := &passOrder{s: s, ties: map[ulid.ULID]queuedJob{}}
	p.heap.order = p
	return p
}

// offer adds a free node's choice, if it has one, to the pass.
func (p *passOrder) offer(place int, n *schedNode) {
	c, ok := p.s.choose(n)
	if !ok {
		return
	}
	next := &candidate{choice: c, node: n, place: place, held: p.s.holding[c.team]}
	tie, seen := p.ties[c.team]
	if !p.started {
		if !seen || ranksBefore(&c.job, &tie) {
			p.ties[c.team] = c.job
		}
		p.heap.items = append(p.heap.items, next)
		return
	}
	if !seen { // a tie, once ranked by, stays for the pass
		p.ties[c.team] = c.job
	}
	heap.Push(&p.heap, next)
}

// next returns the next grant of the pass, false when there is none.
func (p *passOrder) next() (*candidate, bool) {
	s := p.s
	if !p.started {
		p.started = true
		heap.Init(&p.heap)
	}
	for p.heap.Len() > 0 {
		c := heap.Pop(&p.heap).(*candidate)
		_, queued := s.queued[c.job.id]
		stands := queued && !s.atCap(c.team) && s.limits.free(s.teamQueues[c.job.team].queue.limits)
		held := s.holding[c.team]
		if stands && held != c.held && c.hasRunnerUp {
			stands = s.servedBefore(c.team, &c.job, c.runnerUp, &c.runnerUpJob)
		}
		switch {
		case !stands:
			p.offer(c.place, c.node)
		case held != c.held && len(s.teamQueues[c.job.team].queue.limits) > 0:
			c.held = held
			heap.Push(&p.heap, c)
		default:
			return c, true
		}
	}
	return nil, false
}

// before ranks two candidates: a team below its guaranteed slots first (the smaller share of
// them), then the team holding the fewer slots for its weight, then the team whose best job is
// older; within a team, its jobs' ranks; the node first in the pass last.
func (p *passOrder) before(a, b *candidate) bool {
	ra, rb := p.s.rulesFor(a.team), p.s.rulesFor(b.team)
	underA, underB := a.held < ra.guaranteed, b.held < rb.guaranteed
	if underA != underB {
		return underA
	}
	shareA, shareB := ra.weight, rb.weight
	if underA {
		shareA, shareB = ra.guaranteed, rb.guaranteed
	}
	// Compared as products: heldA/shareA < heldB/shareB.
	if x, y := a.held*shareB, b.held*shareA; x != y {
		return x < y
	}
	if a.team != b.team {
		ta, tb := p.ties[a.team], p.ties[b.team]
		if c := ta.id.Compare(tb.id); c != 0 {
			return c < 0
		}
		return a.team.Compare(b.team) < 0
	}
	if a.job.id != b.job.id {
		return ranksBefore(&a.job, &b.job)
	}
	return a.place < b.place
}

// candidates is the pass's heap, in passOrder.before's order.
type candidates struct {
	order *passOrder
	items []*candidate
}

func (h *candidates) Len() int           { return len(h.items) }
func (h *candidates) Less(i, k int) bool { return h.order.before(h.items[i], h.items[k]) }
func (h *candidates) Swap(i, k int)      { h.items[i], h.items[k] = h.items[k], h.items[i] }
func (h *candidates) Push(x any)         { h.items = append(h.items, x.(*candidate)) }
func (h *candidates) Pop() any {
	last := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return last
}
