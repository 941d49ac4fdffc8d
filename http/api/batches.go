package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
)

type batchError struct {
	Index     int                   `json:"index"`
	Error     string                `json:"error"`
	ErrorCode string                `json:"errorCode"`
	Details   []validate.FieldError `json:"details,omitempty"`
}

type batchCreated struct {
	BatchID      string        `json:"batchId"`
	Status       string        `json:"status"`
	TotalJobs    int           `json:"totalJobs"`
	SuccessCount int           `json:"successCount"`
	Jobs         []*createdJob `json:"jobs"`
	Errors       []batchError  `json:"errors,omitempty"`
}

// batchRefused is the answer to a batch whose every item was refused: the batch response's
// shape, which clients of the official interface parse, with the error body's fields beside it.
type batchRefused struct {
	batchCreated
	Errors  []batchError          `json:"errors"`
	Error   string                `json:"error"`
	Code    string                `json:"code"`
	Details []validate.FieldError `json:"details,omitempty"`
}

// noBatch is the answer to a body that is no batch: a batch response with nothing in it and no
// batchId, and the error body's fields.
type noBatch struct {
	Status       string                `json:"status"`
	TotalJobs    int                   `json:"totalJobs"`
	SuccessCount int                   `json:"successCount"`
	Jobs         []*createdJob         `json:"jobs"`
	Errors       []batchError          `json:"errors"`
	Error        string                `json:"error"`
	Code         string                `json:"code"`
	Details      []validate.FieldError `json:"details,omitempty"`
}

// createBatch validates each item on its own: the valid ones are created together in one
// durable write, the others are reported by index.
func (s *Server) createBatch(r *request) {
	body, e := r.body(s.cfg.MaxBodyBytes)
	if e != nil {
		r.fail(e)
		return
	}
	// A body that is no batch at all (none, not JSON, no jobs, too many) is refused in the
	// batch response's shape, which clients parse, but naming no batch: none was made.
	name, items, verr := validate.ParseBatch(body)
	if verr != nil {
		r.json(http.StatusBadRequest, noBatch{Status: "error", Jobs: []*createdJob{}, Errors: []batchError{},
			Error: verr.Message, Code: verr.Code, Details: verr.Details})
		return
	}
	batch := &persistence.Batch{ID: s.IDs.New(s.Clock.Now()), TeamID: r.team, CreatedAt: s.Clock.Now()}
	batch.Total, batch.Name = len(items), name
	answer := &batchCreated{BatchID: batch.ID.String(), TotalJobs: len(items), Jobs: []*createdJob{}}
	valid := make([]*validate.Job, len(items))
	chunks := 0
	err := r.validateWith(func(cat *catalog) {
		for i, item := range items {
			job, verr := validate.ParseJob(item, cat, s.cfg.Limits)
			if verr == nil && chunks+len(job.Chunks) > validate.MaxBatchChunks {
				verr = validate.TooManyChunks(len(job.Chunks))
			}
			if verr != nil {
				answer.Errors = append(answer.Errors, batchError{Index: i, Error: verr.Message, ErrorCode: verr.Code, Details: verr.Details})
				continue
			}
			chunks += len(job.Chunks)
			valid[i] = job
		}
	})
	if err != nil {
		r.failErr(err, nil)
		return
	}
	var records []*persistence.Job
	var tops [][]*persistence.Job
	s.IDs.Run(s.Clock.Now(), func(next func() ulid.ULID) {
		for i, job := range valid {
			if job != nil {
				recs := job.Records(r.team, batch.ID, i, next)
				batch.Jobs = append(batch.Jobs, persistence.BatchEntry{Index: i, JobID: recs[0].ID})
				records = append(records, recs...)
				tops = append(tops, recs)
			}
		}
	})
	if len(tops) == 0 {
		// Clients that print one message (the official CLI prints `error`) show the first problem.
		first := answer.Errors[0]
		r.json(http.StatusBadRequest, batchRefused{
			batchCreated: batchCreated{BatchID: answer.BatchID, Status: "error", TotalJobs: answer.TotalJobs, Jobs: answer.Jobs},
			Errors:       answer.Errors,
			Error:        fmt.Sprintf("no job of the batch is valid; jobs[%d]: %s", first.Index, first.Error),
			Code:         first.ErrorCode, Details: first.Details,
		})
		return
	}
	for k, recs := range tops {
		v := s.created(recs)
		index := batch.Jobs[k].Index
		v.Index = &index
		answer.Jobs = append(answer.Jobs, v)
	}
	answer.SuccessCount = len(tops)
	answer.Status = "created"
	if len(answer.Errors) > 0 {
		answer.Status = "partial"
	}
	r.createOnce(body, http.StatusCreated, answer, func(remember *persistence.Answer) error {
		return s.Coordinator.CreateBatch(batch, records, remember)
	})
}

type batchStatus struct {
	BatchID string           `json:"batchId"`
	Status  string           `json:"status"`
	Stats   batchStats       `json:"stats"`
	Jobs    []batchJobStatus `json:"jobs"`
	Name    string           `json:"name,omitempty"`
}

// batchStats count a batch's jobs as the interface does: total, finished, error and pending add
// up, a cancelled job counted in error as the public service (which stores a cancel as an error)
// counts it, so a client that knows only those four (the official CLI's batch show) accounts for
// every job. Cancelled (an extension) says how many of the errors are cancels.
type batchStats struct {
	Total     int `json:"total"`
	Finished  int `json:"finished"`
	Error     int `json:"error"`
	Cancelled int `json:"cancelled"`
	Pending   int `json:"pending"`
}

type batchJobStatus struct {
	Index     int       `json:"index"`
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	OutputURL string    `json:"outputUrl"`
	Stats     *jobStats `json:"stats"`
	// Name and TemplateID are the job's (extensions).
	Name       string  `json:"name,omitempty"`
	TemplateID *string `json:"templateId,omitempty"`
}

func (s *Server) loadBatch(r *request) (*persistence.Batch, bool) {
	return teamRecord(r, func(id string) *apiError { return notFound("batch", id) }, s.Store.TeamBatch)
}

// getBatch reports a batch's progress.
func (s *Server) getBatch(r *request) {
	b, ok := s.loadBatch(r)
	if !ok {
		return
	}
	members, err := s.Store.BatchMembers(b.ID)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	out := batchStatus{BatchID: b.ID.String(), Jobs: make([]batchJobStatus, 0, len(members)), Name: b.Name}
	for _, m := range members {
		j := m.Job
		out.Stats.Total++
		switch j.State {
		case persistence.JobFinished:
			out.Stats.Finished++
		case persistence.JobFailed:
			out.Stats.Error++
		case persistence.JobCancelled:
			out.Stats.Error++
			out.Stats.Cancelled++
		default:
			out.Stats.Pending++
		}
		out.Jobs = append(out.Jobs, batchJobStatus{Index: m.Index, ID: j.ID.String(), Status: j.Status(),
			OutputURL: s.views.outputURL(j), Stats: s.views.jobStats(j), Name: j.Name, TemplateID: optionalID(j.TemplateID)})
	}
	// Done when no job waits; error only when every job failed (a batch its owner cancelled
	// did not fail).
	out.Status = out.Stats.status()
	r.json(http.StatusOK, out)
}

// status is a batch's: done when no job waits; error only when every job failed (a batch its
// owner cancelled did not fail).
func (st batchStats) status() string {
	switch {
	case st.Pending > 0:
		return "processing"
	case st.Error-st.Cancelled == st.Total:
		return "error"
	}
	return "finished"
}

// batchListed is a batch in the team's list of batches (an extension).
type batchListed struct {
	BatchID   string     `json:"batchId"`
	Status    string     `json:"status"`
	CreatedAt time.Time  `json:"createdAt"`
	Stats     batchStats `json:"stats"`
	Name      string     `json:"name,omitempty"`
}

// listBatches lists the team's batches, newest first: ?from (offset) and ?limit (1 to 100, 20).
func (s *Server) listBatches(r *request) {
	from, limit, e := pageParams(r, 20, 100)
	if e != nil {
		r.fail(e)
		return
	}
	page, err := s.Store.TeamBatches(r.team, from, limit)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	out := make([]batchListed, len(page))
	for i, b := range page {
		cancelled := b.States[persistence.JobCancelled]
		st := batchStats{Total: b.Jobs, Finished: b.States[persistence.JobFinished], Error: b.States[persistence.JobFailed] + cancelled,
			Cancelled: cancelled}
		st.Pending = st.Total - st.Finished - st.Error
		out[i] = batchListed{BatchID: b.ID.String(), CreatedAt: b.CreatedAt, Stats: st, Status: st.status(), Name: b.Name}
	}
	r.json(http.StatusOK, out)
}

type batchCancelled struct {
	BatchID        string           `json:"batchId"`
	Status         string           `json:"status"`
	TotalJobs      int              `json:"totalJobs"`
	CancelledCount int              `json:"cancelledCount"`
	SkippedCount   int              `json:"skippedCount"`
	Jobs           []batchJobCancel `json:"jobs"`
	CancelledJobs  []*jobView       `json:"cancelledJobs"`
}

type batchJobCancel struct {
	Index  int    `json:"index"`
	ID     string `json:"id"`
	Result string `json:"result"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

func (s *Server) cancelBatch(r *request) {
	b, ok := s.loadBatch(r)
	if !ok {
		return
	}
	outcome, err := s.Coordinator.CancelBatch(b.ID, s.actingTeam(r))
	if err != nil {
		r.failErr(err, notFound("batch", b.ID.String()))
		return
	}
	out := batchCancelled{BatchID: b.ID.String(), TotalJobs: len(outcome.Jobs), Jobs: []batchJobCancel{}, CancelledJobs: s.views.jobViews(outcome.Cancelled)}
	for _, jc := range outcome.Jobs {
		// Cancelled items carry a reason as skipped ones do (the official interface's shape).
		entry := batchJobCancel{Index: jc.Index, ID: jc.JobID.String(), Result: "cancelled", Reason: "cancelled"}
		if jc.Job != nil {
			entry.Status = jc.Job.Status()
		}
		if jc.Cancelled {
			out.CancelledCount++
		} else {
			entry.Result, entry.Reason = "skipped", jc.Reason
			out.SkippedCount++
		}
		out.Jobs = append(out.Jobs, entry)
	}
	switch {
	case out.CancelledCount == 0:
		out.Status = "unchanged"
	case out.SkippedCount == 0:
		out.Status = "cancelled"
	default:
		out.Status = "partial"
	}
	r.json(http.StatusOK, out)
}

// pageParams reads ?from (an offset, 0 on) and ?limit (1 to most, def when absent); any other
// parameter is refused, so a misspelt one is not silently ignored.
func pageParams(r *request, def, most int) (from, limit int, e *apiError) {
	limit = def
	for k, v := range r.ctx.QueryArgs().All() {
		n, err := strconv.Atoi(string(v))
		switch string(k) {
		case "from":
			if err != nil || n < 0 {
				return 0, 0, badField("from", "must be an integer of at least 0")
			}
			from = n
		case "limit":
			if err != nil || n < 1 || n > most {
				return 0, 0, badField("limit", fmt.Sprintf("must be an integer from 1 to %d", most))
			}
			limit = n
		default:
			return 0, 0, badField(string(k), "unknown query parameter")
		}
	}
	return from, limit, nil
}
