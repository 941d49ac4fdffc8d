package persistence

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	bolt "go.etcd.io/bbolt"

	"github.com/framefarm/framefarm/renderer"
)

// benchTeam is a store with one team and one uploaded template, making jobs as intake does.
type benchTeam struct {
	s         *Store
	ids       *IDs
	team, tpl ulid.ULID
}

func newBenchTeam(b *testing.B) *benchTeam {
	s := openTestStore(&testing.T{}, b.TempDir()+"/framefarm.db")
	b.Cleanup(func() { s.Close() })
	return newBenchTeamOn(b, s)
}

// newBenchTeamOn is newBenchTeam on the store s.
func newBenchTeamOn(b *testing.B, s *Store) *benchTeam {
	ids := NewIDs()
	bt := &benchTeam{s: s, ids: ids, team: ids.New(time.Now()), tpl: ids.New(time.Now())}
	if err := s.Apply(&PutTemplate{Template: &Template{ID: bt.tpl, TeamID: bt.team, Status: TemplateUploaded}}); err != nil {
		b.Fatal(err)
	}
	return bt
}

// job is a queued job with one tag and a text asset.
func (bt *benchTeam) job(now time.Time) *Job {
	return &Job{ID: bt.ids.New(now), TeamID: bt.team, Kind: KindRender, TemplateID: bt.tpl, State: JobQueued,
		Tags: []string{"campaign"}, Engine: "lottie", CreatedAt: now, OutputName: "out.mp4",
		Spec: JobSpec{Composition: "main", Assets: []renderer.Asset{{Type: "text", LayerName: "Title", Value: json.RawMessage(`"Hello"`)}}}}
}

// store creates batches of 1,000 jobs, each changed by edit (given its batch and place in it).
func (bt *benchTeam) store(b *testing.B, batches int, edit func(batch, i int, j *Job)) {
	for batch := range batches {
		now := time.Now()
		jobs := make([]*Job, 1000)
		for i := range jobs {
			jobs[i] = bt.job(now)
			edit(batch, i, jobs[i])
		}
		if err := bt.s.Apply(&CreateJobs{At: now, Jobs: jobs}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyCreateJobs: the committer's share of intake, a batch of 1,000 queued jobs (one
// template, one tag, a text asset) in one command, fsync included; reported per job.
func BenchmarkApplyCreateJobs(b *testing.B) { benchmarkApplyCreateJobs(b, func(*Job) {}) }

// BenchmarkApplyCreateJobsWithEveryTag: the same, each job with the 20 tags a job may carry and a
// priority of its own, the most counters a job moves.
func BenchmarkApplyCreateJobsWithEveryTag(b *testing.B) {
	tags := make([]string, 20)
	for i := range tags {
		tags[i] = fmt.Sprintf("tag-%d", i)
	}
	benchmarkApplyCreateJobs(b, func(j *Job) { j.Tags, j.Priority = tags, 3 })
}

func benchmarkApplyCreateJobs(b *testing.B, edit func(*Job)) {
	bt := newBenchTeam(b)
	for b.Loop() {
		now := time.Now()
		batch := bt.ids.New(now)
		jobs := make([]*Job, 1000)
		entries := make([]BatchEntry, len(jobs))
		for i := range jobs {
			jobs[i] = bt.job(now)
			edit(jobs[i])
			jobs[i].BatchID, jobs[i].BatchIndex = batch, i
			entries[i] = BatchEntry{Index: i, JobID: jobs[i].ID}
		}
		if err := bt.s.Apply(&CreateJobs{At: now, Batch: &Batch{ID: batch, TeamID: bt.team, Total: len(jobs), Jobs: entries}, Jobs: jobs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*1000), "us/job")
}

// BenchmarkGroupCommitOfSingleJobs: 27 POST /jobs-like creations submitted at once (about what
// one group commit carries under 64 concurrent clients), on a store already holding 100,000
// jobs, fsync included; reports the pages written per round.
func BenchmarkGroupCommitOfSingleJobs(b *testing.B) {
	bt := newBenchTeam(b)
	bt.store(b, 100, func(int, int, *Job) {})
	before := bt.s.db.Load().Stats()
	for b.Loop() {
		now := time.Now()
		var wg sync.WaitGroup
		for range 27 {
			wg.Add(1)
			bt.s.ApplyAsync(&CreateJobs{At: now, Jobs: []*Job{bt.job(now)}}, func(error) { wg.Done() })
		}
		wg.Wait()
	}
	after := bt.s.db.Load().Stats()
	written := after.Sub(&before)
	b.ReportMetric(float64(written.TxStats.GetWrite())/float64(b.N), "pages/op")
}

// BenchmarkListJobs: a page of 100 of a store of 200,000 jobs (a tenth at a higher priority with
// a second tag), records loaded, in each order and with several tags.
func BenchmarkListJobs(b *testing.B) {
	bt := newBenchTeam(b)
	bt.store(b, 200, func(batch, _ int, j *Job) {
		if batch%10 == 3 {
			j.Priority, j.Tags = 5, []string{"campaign", "hot"}
		}
	})
	for _, q := range []struct {
		name string
		q    JobQuery
	}{
		{"oldest from 100000", JobQuery{Offset: 100000}},
		{"random", JobQuery{Sort: SortRandom}},
		{"priority from 100000", JobQuery{Sort: SortPriority, Offset: 100000}},
		{"two tags from 100000", JobQuery{Tags: []string{"campaign", "hot"}, Offset: 100000}},
		{"two tags in priority order from 100000", JobQuery{Tags: []string{"campaign", "hot"}, Sort: SortPriority, Offset: 100000}},
	} {
		q.q.TeamID, q.q.Limit = bt.team, 100
		b.Run(q.name, func(b *testing.B) { benchListing(b, bt.s, q.q) })
	}
}

// BenchmarkListJobsAcrossSegments: a page of 100 in priority order that starts 50 jobs before
// the end of the default priority's jobs, in a store of 100,000 of them followed by 100,000 at a
// lower priority; alone and with the tag all of them carry.
func BenchmarkListJobsAcrossSegments(b *testing.B) {
	bt := newBenchTeam(b)
	bt.store(b, 200, func(batch, _ int, j *Job) {
		if batch >= 100 {
			j.Priority = -1
		}
	})
	for _, tags := range [][]string{nil, {"campaign"}} {
		b.Run(fmt.Sprintf("tags=%v", tags), func(b *testing.B) {
			benchListing(b, bt.s, JobQuery{TeamID: bt.team, Tags: tags, Sort: SortPriority, Offset: 100000 - 50, Limit: 100})
		})
	}
}

// BenchmarkListJobsManyPriorities: a page of 100 in priority order of a store of 100,000 jobs
// each with a priority of its own, from the start and from 50,000.
func BenchmarkListJobsManyPriorities(b *testing.B) {
	bt := newBenchTeam(b)
	bt.store(b, 100, func(batch, i int, j *Job) { j.Priority = (batch*1000+i)*7%200000 - 100000 })
	for _, offset := range []int{0, 50000} {
		q := JobQuery{TeamID: bt.team, Limit: 100, Sort: SortPriority, Offset: offset}
		b.Run(fmt.Sprintf("from %d", offset), func(b *testing.B) { benchListing(b, bt.s, q) })
	}
}

// benchListing lists a page per round.
func benchListing(b *testing.B, s *Store, q JobQuery) {
	for b.Loop() {
		if err := s.view(func(tx *txn) error {
			_, _, err := tx.ListJobs(q)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpgradeMillionJobs: the one-time upgrade of a store of schema 4, the previous
// release's, holding 1,000,000 jobs (one template) in 1,000 batches: every batch filed in its
// team's list and every job under its template, in chunks; reported as the whole Open.
func BenchmarkUpgradeMillionJobs(b *testing.B) {
	bt := newBenchTeam(b)
	bt.store(b, 1000, func(batch, i int, j *Job) {})
	for range 1000 {
		now := time.Now()
		id := bt.ids.New(now)
		j := bt.job(now)
		j.BatchID = id
		if err := bt.s.Apply(&CreateJobs{At: now, Batch: &Batch{ID: id, TeamID: bt.team, Total: 1, Jobs: []BatchEntry{{0, j.ID}}, CreatedAt: now}, Jobs: []*Job{j}}); err != nil {
			b.Fatal(err)
		}
	}
	path := bt.s.path
	bt.s.Close()
	for range b.N {
		rawUpdate(&testing.T{}, path, func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bucketBatchesByTeam, bucketJobsByTeamTemplate} {
				if err := tx.DeleteBucket(name); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketMeta).Put([]byte(metaSchemaVersion), []byte("4"))
		})
		started := time.Now()
		s, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(started).Seconds(), "upgrade-s")
		s.Close()
	}
}

// BenchmarkApplyEntriesOfSingleJobs: a follower's share of intake under POST /jobs, on a
// replica's store already holding 100,000 jobs: entries of the replicated log each carrying 31
// single-job creations, decoded from their bytes, applied one entry to a transaction and ten
// (as a follower holding them does); reported per job.
func BenchmarkApplyEntriesOfSingleJobs(b *testing.B) {
	for _, perTransaction := range []int{1, 10} {
		b.Run(fmt.Sprintf("entries=%d", perTransaction), func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "framefarm.db"), Options{Replica: true})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			bt := newBenchTeamOn(b, s)
			bt.store(b, 100, func(int, int, *Job) {})
			index := s.AppliedIndex()
			var applying time.Duration
			for b.Loop() {
				entries := make([]ReplicatedEntry, perTransaction)
				for e := range entries {
					now := time.Now()
					commands := make([]Command, 31)
					for i := range commands {
						commands[i] = &CreateJobs{At: now, Jobs: []*Job{bt.job(now)}}
					}
					data, err := EncodeEntry(commands...)
					if err != nil {
						b.Fatal(err)
					}
					index++
					entries[e] = ReplicatedEntry{Index: index, Data: data}
				}
				started := time.Now()
				if _, err := s.ApplyEntries(entries); err != nil {
					b.Fatal(err)
				}
				applying += time.Since(started)
			}
			b.ReportMetric(float64(applying.Nanoseconds())/float64(b.N*31*perTransaction)/1000, "us/job")
		})
	}
}
