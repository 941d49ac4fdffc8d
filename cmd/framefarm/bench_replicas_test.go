package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// replicaBench is three replicas, their leader, and a team with a template on them; and one
// coordinator alone, configured as they are but for [ha] (the bucket, keys, certificates), with
// a team and template of its own: what the replicas are measured against.
type replicaBench struct {
	rs       *replicaSet
	leader   *coordinator
	follower *coordinator
	team     *client
	tplID    string
	body     []byte
	one      *benchFarm
}

// newReplicaBench starts the replicas; jobSignals has them print jobs' transitions, which
// benchmarks of throughput leave out. withOne starts the coordinator alone as well.
func newReplicaBench(b *testing.B, jobSignals, withOne bool) *replicaBench {
	rs := newReplicaSet(b, 3, "") // the production timings
	for _, c := range rs.members {
		c.opts.noJobSignals = !jobSignals
	}
	profiled(b, rs.members...)
	rs.start()
	leader := rs.leader()
	team := leader.team("bench")
	tplID := team.uploadTemplate(inspection())
	rb := &replicaBench{rs: rs, leader: leader, team: team, tplID: tplID, body: benchJobBody(tplID)}
	for _, c := range rs.members {
		if c != leader {
			rb.follower = c
		}
	}
	if withOne {
		one := newCoordinator(b, options{cluster: true, pki: rs.pki, logLevel: "warn", noJobSignals: true, config: rs.shared})
		profiled(b, one)
		one.launch("127.0.0.1:0")
		cl := one.team("bench")
		tpl := cl.uploadTemplate(inspection())
		rb.one = &benchFarm{c: one, client: cl, tplID: tpl, body: benchJobBody(tpl)}
	}
	return rb
}

// benchJobBody is the benchmarks' job: a text layer of template tplID replaced, one tag.
func benchJobBody(tplID string) []byte {
	body, _ := json.Marshal(map[string]any{
		"template": map[string]any{"id": tplID, "composition": "main"},
		"assets":   []any{map[string]any{"type": "text", "layerName": "Title", "value": "Hello"}},
		"tags":     []string{"bench"},
	})
	return body
}

// cpuSeconds is the processor time the coordinators used so far, together: a figure this
// machine's drifting speed moves less than a rate.
func cpuSeconds(cs ...*coordinator) float64 {
	total := 0.0
	for _, c := range cs {
		total += c.metrics()["process_cpu_seconds_total"]
	}
	return total
}

// benchSide is one way of sending a benchmark's requests (to the coordinator alone, to the
// leader of the replicas, spread over them), and what its rounds measured.
type benchSide struct {
	name string
	// send sends request i; on are the processes whose processor time counts.
	send    func(i int) (time.Duration, error)
	on      []*coordinator
	elapsed time.Duration
	cpu     float64
	// busy is the whole machine's processor time over the side's rounds: the replicas, the load
	// generator, the bucket and anything else running.
	busy time.Duration
	lat  []time.Duration
	// sent counts the requests sent, those of profiles included.
	sent atomic.Int64
}

// sendCounted sends request i and counts it.
func (side *benchSide) sendCounted(i int) (time.Duration, error) {
	side.sent.Add(1)
	return side.send(i)
}

// takeTurns runs rounds of perRound requests at concurrency on each side in turn, in the order
// A B C, C B A, A B C..., so that this machine's drifting speed during a run falls on all
// alike. Asked for profiles (profiled), it first profiles each side's processes under its load,
// each named by its place among them (the replicas c1, c2 and c3 are 0, 1 and 2).
func takeTurns(b *testing.B, sides []*benchSide, rounds, perRound, concurrency int) {
	for _, side := range sides {
		byID := map[string]*coordinator{}
		for i, c := range side.on {
			byID[fmt.Sprint(i)] = c
		}
		underProfile(b, b.Name()+"-"+side.name, byID, func() { drive(b, concurrency, perRound, side.sendCounted) })
	}
	for round := range rounds {
		for turn := range sides {
			at := turn
			if round%2 == 1 {
				at = len(sides) - 1 - turn
			}
			side := sides[at]
			cpu, busy := cpuSeconds(side.on...), machineBusy(b)
			lat, elapsed := drive(b, concurrency, perRound, side.sendCounted)
			side.cpu += cpuSeconds(side.on...) - cpu
			side.busy += machineBusy(b) - busy
			side.elapsed += elapsed
			side.lat = append(side.lat, lat.all...)
		}
	}
}

// posting sends body to path with load, each request expecting 201.
func posting(load *loadClient, path string, body []byte) func(int) (time.Duration, error) {
	return func(int) (time.Duration, error) {
		_, d, err := load.do(http.MethodPost, path, body, http.StatusCreated)
		return d, err
	}
}

// machineBusy is the processor time this machine has spent out of idle since it started, over
// all its processors (Linux /proc/stat).
func machineBusy(b *testing.B) time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal guest...
	if len(fields) < 9 {
		b.Fatalf("/proc/stat begins %q: no steal time", line)
	}
	var ticks int64
	for _, at := range []int{1, 2, 3, 6, 7, 8} { // guest time is counted in user time already
		n, _ := strconv.ParseInt(fields[at], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// report reports a side's rate of requests (of size items each), its p99, its processor time
// per item and how many of the machine's processors were busy meanwhile; and returns the rate.
func (side *benchSide) report(b *testing.B, requests, size int, unit string) float64 {
	rate := float64(requests*size) / side.elapsed.Seconds()
	b.ReportMetric(rate, side.name+"-"+unit+"/s")
	b.ReportMetric(side.cpu/float64(requests*size)*1e6, side.name+"-cpu-us/"+strings.TrimSuffix(unit, "s"))
	b.ReportMetric(side.busy.Seconds()/side.elapsed.Seconds(), side.name+"-busy-cpus")
	slices.Sort(side.lat)
	b.ReportMetric(float64(side.lat[len(side.lat)*99/100].Microseconds())/1000, side.name+"-p99-ms")
	return rate
}

// BenchmarkReplicasCreateJob: POST /jobs at 64 concurrent against the coordinator alone and
// three replicas on this machine (every write committed by two of them before it is answered):
// all to the leader, and spread over the three (the followers hand theirs to the leader);
// rounds of 10,000 in turns, three each. Reported for each: jobs a second, p99 and processor
// time per job; and the replicas' rates against the coordinator alone.
func BenchmarkReplicasCreateJob(b *testing.B) {
	rb := newReplicaBench(b, false, true)
	create := func(load *loadClient, body []byte) func(int) (time.Duration, error) {
		return posting(load, "/api/v2/jobs", body)
	}
	var spread []*loadClient
	for _, c := range rb.rs.members {
		spread = append(spread, newLoadClient(c, rb.team.token, 64))
	}
	sides := []*benchSide{
		{name: "one", on: []*coordinator{rb.one.c}, send: create(newLoadClient(rb.one.c, rb.one.client.token, 64), rb.one.body)},
		{name: "leader", on: rb.rs.members, send: create(newLoadClient(rb.leader, rb.team.token, 64), rb.body)},
		{name: "spread", on: rb.rs.members, send: func(i int) (time.Duration, error) { return create(spread[i%len(spread)], rb.body)(i) }},
	}
	const rounds, perRound = 3, 10000
	commits, applies := histogramOf(b, rb.leader, "framefarm_replica_commit_seconds", ""), histogramOf(b, rb.leader, "framefarm_replica_apply_seconds", "")
	before := map[*coordinator]map[string]float64{rb.leader: rb.leader.metrics(), rb.follower: rb.follower.metrics()}
	takeTurns(b, sides, rounds, perRound, 64)
	// How many jobs each entry of the replicated log carried, and each transaction of a store.
	jobs := float64(sides[1].sent.Load() + sides[2].sent.Load())
	for c, was := range before {
		now, name := c.metrics(), "leader"
		if c != rb.leader {
			name = "follower"
		}
		b.ReportMetric(jobs/(now["framefarm_replica_entries_applied_total"]-was["framefarm_replica_entries_applied_total"]), name+"-jobs/entry")
		b.ReportMetric(jobs/(now["framefarm_replica_apply_seconds_count"]-was["framefarm_replica_apply_seconds_count"]), name+"-jobs/apply")
	}
	one := sides[0].report(b, rounds*perRound, 1, "jobs")
	b.ReportMetric(sides[1].report(b, rounds*perRound, 1, "jobs")/one, "leader/one")
	b.ReportMetric(sides[2].report(b, rounds*perRound, 1, "jobs")/one, "spread/one")
	// On the leader: proposed to committed and applied, and applying alone.
	b.ReportMetric(histogramOf(b, rb.leader, "framefarm_replica_commit_seconds", "").since(commits).quantile(0.5)*1000, "commit-p50-ms")
	b.ReportMetric(histogramOf(b, rb.leader, "framefarm_replica_apply_seconds", "").since(applies).quantile(0.5)*1000, "apply-p50-ms")
}

// BenchmarkReplicasCreateBatch1000: POST /batches of 1,000 jobs, 4 concurrent, to the
// coordinator alone and to the leader of three replicas, in turns of 25 batches, six each.
func BenchmarkReplicasCreateBatch1000(b *testing.B) {
	rb := newReplicaBench(b, false, true)
	batch := func(load *loadClient, body []byte) func(int) (time.Duration, error) {
		return posting(load, "/api/v2/batches", body)
	}
	sides := []*benchSide{
		{name: "one", on: []*coordinator{rb.one.c}, send: batch(newLoadClient(rb.one.c, rb.one.client.token, 4), rb.one.batchBody(1000))},
		{name: "leader", on: rb.rs.members, send: batch(newLoadClient(rb.leader, rb.team.token, 4), (&benchFarm{body: rb.body}).batchBody(1000))},
	}
	const rounds, perRound = 6, 25
	takeTurns(b, sides, rounds, perRound, 4)
	one := sides[0].report(b, rounds*perRound, 1000, "jobs")
	b.ReportMetric(sides[1].report(b, rounds*perRound, 1000, "jobs")/one, "leader/one")
}

// BenchmarkReplicasGetJob: GET /jobs/{id} at 16 and 64 concurrent on the leader and on a
// follower of three replicas: by default (the follower first makes sure it holds every write
// acknowledged before the read) and with ?stale (it answers from its records as they are). The
// sides take turns of 10,000 reads, four each; reported for each: reads per second, p99, and
// the replicas' processor time per read; and each follower's rate against the leader's.
func BenchmarkReplicasGetJob(b *testing.B) {
	rb := newReplicaBench(b, false, false)
	ids := rb.team.createJobs(rb.tplID, 1000)
	for _, conc := range []int{16, 64} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			get := func(c *coordinator, query string) func(int) (time.Duration, error) {
				load := newLoadClient(c, rb.team.token, conc)
				return func(i int) (time.Duration, error) {
					_, d, err := load.do(http.MethodGet, "/api/v2/jobs/"+ids[i%len(ids)]+query, nil, http.StatusOK)
					return d, err
				}
			}
			sides := []*benchSide{
				{name: "leader", on: rb.rs.members, send: get(rb.leader, "")},
				{name: "follower", on: rb.rs.members, send: get(rb.follower, "")},
				{name: "stale", on: rb.rs.members, send: get(rb.follower, "?stale")},
			}
			const rounds, perRound = 4, 10000
			takeTurns(b, sides, rounds, perRound, conc)
			leader := sides[0].report(b, rounds*perRound, 1, "gets")
			b.ReportMetric(sides[1].report(b, rounds*perRound, 1, "gets")/leader, "follower/leader")
			b.ReportMetric(sides[2].report(b, rounds*perRound, 1, "gets")/leader, "stale/leader")
		})
	}
}

// BenchmarkReplicasFailover: the leader of three replicas SIGKILLed 40 times while a client
// creates jobs with Idempotency-Keys, each sent again until acknowledged; reported: the time from
// the kill to the first creation the next leader acknowledges (p50, p99, max), and the
// acknowledged jobs missing afterwards (must be 0).
func BenchmarkReplicasFailover(b *testing.B) {
	rb := newReplicaBench(b, false, false)
	var urls []string
	for _, c := range rb.rs.members {
		urls = append(urls, c.url)
	}
	acknowledged := map[string]string{}
	next := 0
	// A client that sends the creation again, to the next replica, 10 ms after each refusal.
	create := func() (time.Time, bool) {
		key := fmt.Sprint("failover-", next)
		deadline := time.Now().Add(waitLimit)
		for try := 0; time.Now().Before(deadline); try++ {
			status, answer := postWithKey(urls[(next+try)%len(urls)]+"/api/v2/jobs", rb.team.token, key, rb.body)
			if status == http.StatusCreated || status == http.StatusOK {
				var cr created
				json.Unmarshal(answer, &cr)
				acknowledged[key] = cr.ID
				next++
				return time.Now(), true
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Time{}, false
	}
	var gaps []time.Duration
	for range 40 {
		for range 20 {
			if _, ok := create(); !ok {
				b.Fatal("a creation was never acknowledged")
			}
		}
		victim := rb.rs.leader()
		killed := time.Now()
		victim.kill()
		at, ok := create()
		if !ok {
			b.Fatal("no creation acknowledged after the kill")
		}
		gaps = append(gaps, at.Sub(killed))
		victim.restart()
	}
	leader := rb.rs.leader()
	missing := 0
	for _, id := range acknowledged {
		if status, _, _ := (&client{c: leader, token: rb.team.token}).call(http.MethodGet, "/api/v2/jobs/"+id, nil); status != http.StatusOK {
			missing++
		}
	}
	slices.Sort(gaps)
	b.Logf("kill to write, each kill: %v", gaps)
	b.ReportMetric(gaps[len(gaps)/2].Seconds(), "kill-to-write-p50-s")
	b.ReportMetric(gaps[len(gaps)*99/100].Seconds(), "kill-to-write-p99-s")
	b.ReportMetric(gaps[len(gaps)-1].Seconds(), "kill-to-write-max-s")
	b.ReportMetric(float64(len(acknowledged)), "acknowledged")
	b.ReportMetric(float64(missing), "lost")
}

// BenchmarkReplicasWithoutQuorum: two of three replicas stopped; reported: how long the one left
// takes to answer a read and a write 503 (the documented wait for a leader is 5 s), and the
// status of the set (0.5 s at most).
func BenchmarkReplicasWithoutQuorum(b *testing.B) {
	rb := newReplicaBench(b, false, false)
	_, read, write, status := withoutQuorum(b, rb.rs, rb.team.token)
	b.ReportMetric(read.Seconds(), "read-503-s")
	b.ReportMetric(write.Seconds(), "write-503-s")
	b.ReportMetric(status.Seconds(), "status-s")
}

// BenchmarkNodesFollowTheNewLeader: two render nodes render while the leader of three replicas
// is SIGKILLed, five times; the renders end at the kill, so their outputs go up, and their
// results out, while the replicas choose the next leader. Reported: from the kill to the next
// leader taking up its duties, to both nodes ready on it, and to those renders finished there;
// and from the duties taken up to the renders finished (medians and worst).
func BenchmarkNodesFollowTheNewLeader(b *testing.B) {
	rb := newReplicaBench(b, true, false)
	control := rb.rs.members[0].control
	rb.rs.startNode("n1")
	rb.rs.startNode("n2")
	var duties, ready, finished, afterDuties []time.Duration
	for round := range 5 {
		leader := rb.rs.leader()
		team := &client{c: leader, token: rb.team.token}
		ids := team.createJobs(rb.tplID, 2)
		inFlight := []*renderCall{control.next(b), control.next(b)}
		killed := time.Now()
		leader.kill()
		for _, call := range inFlight {
			call.answer(renderReply{Result: "finish"})
		}
		next := rb.rs.leader()
		duties = append(duties, time.Since(killed))
		finishedAt := make(chan time.Time, 1)
		go func() {
			for _, id := range ids {
				next.waitJob(id, "finished")
			}
			finishedAt <- time.Now()
		}()
		for _, n := range []string{"n1", "n2"} {
			next.waitFor("node", n, "ready")
		}
		ready = append(ready, time.Since(killed))
		at := <-finishedAt
		finished = append(finished, at.Sub(killed))
		afterDuties = append(afterDuties, at.Sub(killed)-duties[round])
		b.Logf("round %d: duties %s, nodes ready %s, renders finished %s (%s after the duties)", round, duties[round], ready[round],
			finished[round], afterDuties[round])
		leader.restart()
	}
	for name, d := range map[string][]time.Duration{"duties": duties, "nodes-ready": ready, "renders-finished": finished,
		"duties-to-renders-finished": afterDuties} {
		slices.Sort(d)
		b.ReportMetric(d[len(d)/2].Seconds(), "kill-to-"+name+"-p50-s")
		b.ReportMetric(d[len(d)-1].Seconds(), "kill-to-"+name+"-max-s")
	}
}
