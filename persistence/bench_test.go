package persistence

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/framefarm/framefarm/renderer"
)

// BenchmarkApplyCreateJobs: the committer's share of intake, a batch of 1,000 queued jobs (one
// template, one tag, a text asset) in one command, fsync included; reported per job.
func BenchmarkApplyCreateJobs(b *testing.B) {
	s := openTestStore(&testing.T{}, b.TempDir()+"/framefarm.db")
	defer s.Close()
	ids := NewIDs()
	team, tpl := ids.New(time.Now()), ids.New(time.Now())
	if err := s.Apply(&PutTemplate{Template: &Template{ID: tpl, TeamID: team, Status: TemplateUploaded}}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		now := time.Now()
		batch := ids.New(now)
		jobs := make([]*Job, 1000)
		entries := make([]BatchEntry, len(jobs))
		for i := range jobs {
			jobs[i] = &Job{ID: ids.New(now), TeamID: team, Kind: KindRender, TemplateID: tpl, State: JobQueued,
				Tags: []string{"campaign"}, Engine: "lottie", BatchID: batch, BatchIndex: i, CreatedAt: now, OutputName: "out.mp4",
				Spec: JobSpec{Composition: "main", Assets: []renderer.Asset{{Type: "text", LayerName: "Title", Value: json.RawMessage(`"Hello"`)}}}}
			entries[i] = BatchEntry{Index: i, JobID: jobs[i].ID}
		}
		if err := s.Apply(&CreateJobs{At: now, Batch: &Batch{ID: batch, TeamID: team, Total: len(jobs), Jobs: entries}, Jobs: jobs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*1000), "us/job")
}

// BenchmarkGroupCommitOfSingleJobs: 27 POST /jobs-like creations submitted at once (about what
// one group commit carries under 64 concurrent clients), on a store already holding 100,000
// jobs, fsync included; reports the pages written per round.
func BenchmarkGroupCommitOfSingleJobs(b *testing.B) {
	s := openTestStore(&testing.T{}, b.TempDir()+"/framefarm.db")
	defer s.Close()
	ids := NewIDs()
	team, tpl := ids.New(time.Now()), ids.New(time.Now())
	if err := s.Apply(&PutTemplate{Template: &Template{ID: tpl, TeamID: team, Status: TemplateUploaded}}); err != nil {
		b.Fatal(err)
	}
	newJob := func(now time.Time) *Job {
		return &Job{ID: ids.New(now), TeamID: team, Kind: KindRender, TemplateID: tpl, State: JobQueued,
			Tags: []string{"campaign"}, Engine: "lottie", CreatedAt: now, OutputName: "out.mp4",
			Spec: JobSpec{Composition: "main", Assets: []renderer.Asset{{Type: "text", LayerName: "Title", Value: json.RawMessage(`"Hello"`)}}}}
	}
	for range 100 {
		now := time.Now()
		jobs := make([]*Job, 1000)
		for i := range jobs {
			jobs[i] = newJob(now)
		}
		if err := s.Apply(&CreateJobs{At: now, Jobs: jobs}); err != nil {
			b.Fatal(err)
		}
	}
	before := s.db.Stats()
	for b.Loop() {
		now := time.Now()
		var wg sync.WaitGroup
		for range 27 {
			wg.Add(1)
			s.ApplyAsync(&CreateJobs{At: now, Jobs: []*Job{newJob(now)}}, func(error) { wg.Done() })
		}
		wg.Wait()
	}
	after := s.db.Stats()
	written := after.Sub(&before)
	b.ReportMetric(float64(written.TxStats.GetWrite())/float64(b.N), "pages/op")
}
