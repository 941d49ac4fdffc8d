package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// replicaBench is three replicas, their leader, and a team with a template on them.
type replicaBench struct {
	rs       *replicaSet
	leader   *coordinator
	follower *coordinator
	team     *client
	tplID    string
	body     []byte
}

// newReplicaBench starts the replicas; jobSignals has them print jobs' transitions, which
// benchmarks of throughput leave out.
func newReplicaBench(b *testing.B, jobSignals bool) *replicaBench {
	rs := newReplicaSet(b, 3, "") // the production timings
	for _, c := range rs.members {
		c.opts.noJobSignals = !jobSignals
	}
	rs.start()
	leader := rs.leader()
	team := leader.team("bench")
	tplID := team.uploadTemplate(inspection())
	body, _ := json.Marshal(map[string]any{
		"template": map[string]any{"id": tplID, "composition": "main"},
		"assets":   []any{map[string]any{"type": "text", "layerName": "Title", "value": "Hello"}},
		"tags":     []string{"bench"},
	})
	rb := &replicaBench{rs: rs, leader: leader, team: team, tplID: tplID, body: body}
	for _, c := range rs.members {
		if c != leader {
			rb.follower = c
		}
	}
	return rb
}

// cpuSeconds is the processor time the replicas used so far, together: a figure this machine's
// drifting speed moves less than a rate.
func (rs *replicaSet) cpuSeconds() float64 {
	total := 0.0
	for _, c := range rs.members {
		total += c.metrics()["process_cpu_seconds_total"]
	}
	return total
}

// BenchmarkReplicasCreateJob: POST /jobs at 64 concurrent against three replicas on this machine
// (every write committed by two of them before it is answered): all to the leader, and spread
// over the three (the followers hand theirs to the leader).
func BenchmarkReplicasCreateJob(b *testing.B) {
	rb := newReplicaBench(b, false)
	for _, spread := range []bool{false, true} {
		b.Run(fmt.Sprintf("spread=%v", spread), func(b *testing.B) {
			targets := []*coordinator{rb.leader}
			if spread {
				targets = rb.rs.members
			}
			var loads []*loadClient
			for _, c := range targets {
				loads = append(loads, newLoadClient(c, rb.team.token, 64))
			}
			const total = 20000
			cpu := rb.rs.cpuSeconds()
			commits, applies := histogramOf(b, rb.leader, "framefarm_replica_commit_seconds", ""), histogramOf(b, rb.leader, "framefarm_replica_apply_seconds", "")
			lat, elapsed := drive(b, 64, total, func(i int) (time.Duration, error) {
				_, d, err := loads[i%len(loads)].do(http.MethodPost, "/api/v2/jobs", rb.body, http.StatusCreated)
				return d, err
			})
			b.ReportMetric(total/elapsed.Seconds(), "jobs/s")
			b.ReportMetric((rb.rs.cpuSeconds()-cpu)/total*1e6, "cpu-us/job")
			lat.report(b)
			// On the leader: proposed to committed and applied, and applying alone.
			b.ReportMetric(histogramOf(b, rb.leader, "framefarm_replica_commit_seconds", "").since(commits).quantile(0.5)*1000, "commit-p50-ms")
			b.ReportMetric(histogramOf(b, rb.leader, "framefarm_replica_apply_seconds", "").since(applies).quantile(0.5)*1000, "apply-p50-ms")
		})
	}
}

// BenchmarkReplicasCreateBatch1000: POST /batches of 1,000 jobs, 4 concurrent, to the leader of
// three replicas.
func BenchmarkReplicasCreateBatch1000(b *testing.B) {
	rb := newReplicaBench(b, false)
	load := newLoadClient(rb.leader, rb.team.token, 4)
	jobs := make([]json.RawMessage, 1000)
	for i := range jobs {
		jobs[i] = rb.body
	}
	body, _ := json.Marshal(map[string]any{"jobs": jobs})
	const batches = 40
	cpu := rb.rs.cpuSeconds()
	lat, elapsed := drive(b, 4, batches, func(int) (time.Duration, error) {
		_, d, err := load.do(http.MethodPost, "/api/v2/batches", body, http.StatusCreated)
		return d, err
	})
	b.ReportMetric(batches*1000/elapsed.Seconds(), "jobs/s")
	b.ReportMetric((rb.rs.cpuSeconds()-cpu)/(batches*1000)*1e6, "cpu-us/job")
	lat.report(b)
}

// BenchmarkReplicasGetJob: GET /jobs/{id} at 16 and 64 concurrent on the leader and on a
// follower of three replicas (which first makes sure it holds every write acknowledged before
// the read). The two take turns, four rounds each in the order leader, follower, follower,
// leader, and so on, so that this machine's drifting speed during a run falls on both alike;
// reported for each: reads per second over its rounds, p99, and the replicas' processor time
// per read.
func BenchmarkReplicasGetJob(b *testing.B) {
	rb := newReplicaBench(b, false)
	ids := rb.team.createJobs(rb.tplID, 1000)
	for _, conc := range []int{16, 64} {
		b.Run(fmt.Sprintf("c=%d", conc), func(b *testing.B) {
			type side struct {
				name    string
				load    *loadClient
				elapsed time.Duration
				cpu     float64
				lat     []time.Duration
			}
			sides := []*side{{name: "leader", load: newLoadClient(rb.leader, rb.team.token, conc)},
				{name: "follower", load: newLoadClient(rb.follower, rb.team.token, conc)}}
			const rounds, perRound = 4, 10000
			for round := range rounds {
				for turn := range sides {
					on := sides[(round+turn)%len(sides)]
					cpu := rb.rs.cpuSeconds()
					lat, elapsed := drive(b, conc, perRound, func(i int) (time.Duration, error) {
						_, d, err := on.load.do(http.MethodGet, "/api/v2/jobs/"+ids[i%len(ids)], nil, http.StatusOK)
						return d, err
					})
					on.cpu += rb.rs.cpuSeconds() - cpu
					on.elapsed += elapsed
					on.lat = append(on.lat, lat.all...)
				}
			}
			for _, on := range sides {
				b.ReportMetric(rounds*perRound/on.elapsed.Seconds(), on.name+"-gets/s")
				b.ReportMetric(on.cpu/(rounds*perRound)*1e6, on.name+"-cpu-us/get")
				slices.Sort(on.lat)
				b.ReportMetric(float64(on.lat[len(on.lat)*99/100].Microseconds())/1000, on.name+"-p99-ms")
			}
			// As many reads on each side: the ratio of their times is that of their rates.
			b.ReportMetric(sides[0].elapsed.Seconds()/sides[1].elapsed.Seconds(), "follower/leader")
		})
	}
}

// BenchmarkReplicasFailover: the leader of three replicas SIGKILLed 20 times while a client
// creates jobs with Idempotency-Keys, each sent again until acknowledged; reported: the time from
// the kill to the first creation the next leader acknowledges (p50, p99, max), and the
// acknowledged jobs missing afterwards (must be 0).
func BenchmarkReplicasFailover(b *testing.B) {
	rb := newReplicaBench(b, false)
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
	for range 20 {
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
	rb := newReplicaBench(b, false)
	read, write, status := withoutQuorum(b, rb.rs, rb.team.token)
	b.ReportMetric(read.Seconds(), "read-503-s")
	b.ReportMetric(write.Seconds(), "write-503-s")
	b.ReportMetric(status.Seconds(), "status-s")
}

// BenchmarkNodesFollowTheNewLeader: two render nodes render while the leader of three replicas
// is SIGKILLed, five times; reported: from the kill to the next leader taking up its duties, to
// both nodes ready on it, and to the renders in flight at the kill, answered at once, finished
// there (medians and worst).
func BenchmarkNodesFollowTheNewLeader(b *testing.B) {
	rb := newReplicaBench(b, true)
	control := rb.rs.members[0].control
	rb.rs.startNode("n1")
	rb.rs.startNode("n2")
	var duties, ready, finished []time.Duration
	for round := range 5 {
		leader := rb.rs.leader()
		team := &client{c: leader, token: rb.team.token}
		ids := team.createJobs(rb.tplID, 2)
		inFlight := []*renderCall{control.next(b), control.next(b)}
		killed := time.Now()
		leader.kill()
		next := rb.rs.leader()
		duties = append(duties, time.Since(killed))
		for _, n := range []string{"n1", "n2"} {
			next.waitFor("node", n, "ready")
		}
		ready = append(ready, time.Since(killed))
		for _, call := range inFlight {
			call.answer(renderReply{Result: "finish"})
		}
		for _, id := range ids {
			next.waitJob(id, "finished")
		}
		finished = append(finished, time.Since(killed))
		b.Logf("round %d: duties %s, nodes ready %s, renders finished %s", round, duties[round], ready[round], finished[round])
		leader.restart()
	}
	for name, d := range map[string][]time.Duration{"duties": duties, "nodes-ready": ready, "renders-finished": finished} {
		slices.Sort(d)
		b.ReportMetric(d[len(d)/2].Seconds(), "kill-to-"+name+"-p50-s")
		b.ReportMetric(d[len(d)-1].Seconds(), "kill-to-"+name+"-max-s")
	}
}
