package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
)

// catalog answers validation's questions about one team from one read of its records,
// decoding each template once however many jobs use it.
type catalog struct {
	reads     persistence.TeamReads
	templates map[string]*persistence.Template
	// fonts is the team's library once a template named fonts (a batch reads it once).
	fonts []*persistence.Font
	// fontsErr is why the library could not be read; the request then fails with it.
	fontsErr error
	// policy is the team's, once read.
	policy *persistence.TeamPolicy
	// installed says which fonts the farm's render nodes have installed.
	installed func(engine, name string) bool
}

var _ validate.Catalog = (*catalog)(nil)

func (c *catalog) Template(id string) (*persistence.Template, error) {
	if tpl, ok := c.templates[id]; ok {
		return tpl, nil
	}
	tid, ok := persistence.ParseID(id)
	if !ok {
		return nil, persistence.ErrNotFound
	}
	tpl, err := c.reads.Template(tid)
	if err != nil {
		return nil, err
	}
	c.templates[id] = tpl
	return tpl, nil
}

func (c *catalog) FontExists(name string) bool {
	_, err := c.reads.Font(name)
	return err == nil
}

func (c *catalog) Fonts() []*persistence.Font {
	if c.fonts == nil && c.fontsErr == nil {
		c.fonts, c.fontsErr = c.reads.Fonts()
		if c.fonts == nil {
			c.fonts = []*persistence.Font{}
		}
	}
	return c.fonts
}

func (c *catalog) SecretExists(name string) bool {
	_, err := c.reads.Secret(name)
	return err == nil
}

func (c *catalog) LimitExists(name string) bool { return c.reads.LimitExists(name) }

func (c *catalog) InstalledFont(engine, name string) bool { return c.installed(engine, name) }

// Policy is the team's policy, read once per request.
func (c *catalog) Policy() persistence.TeamPolicy {
	if c.policy == nil {
		team, _ := c.reads.Team()
		c.policy = &team.Policy
	}
	return *c.policy
}

// validateWith runs fn with a catalog of the request's team.
func (r *request) validateWith(fn func(cat *catalog)) error {
	return r.s.Store.ReadTeam(r.team, func(reads persistence.TeamReads) error {
		cat := &catalog{reads: reads, templates: map[string]*persistence.Template{}, installed: r.s.Coordinator.InstalledFont}
		fn(cat)
		return cat.fontsErr
	})
}

// createdJob is the answer to a job creation.
type createdJob struct {
	ID           string        `json:"id"`
	Status       string        `json:"status"`
	OutputURL    string        `json:"outputUrl"`
	Children     []*createdJob `json:"children,omitempty"`
	MissingFonts []string      `json:"missingFonts"`
	// Index is the job's position in a batch request.
	Index *int `json:"index,omitempty"`
}

// created describes records made from one request: the job, its children nested under it.
func (s *Server) created(records []*persistence.Job) *createdJob {
	views := make(map[ulid.ULID]*createdJob, len(records))
	var root *createdJob
	for _, j := range records {
		if j.Kind == persistence.KindChunk {
			continue // the farm's part of its job
		}
		missing := j.MissingFonts
		if missing == nil {
			missing = []string{}
		}
		v := &createdJob{ID: j.ID.String(), Status: j.Status(), OutputURL: s.views.outputURL(j), MissingFonts: missing}
		views[j.ID] = v
		if parent := views[j.ParentID]; parent != nil && j.ParentID != (ulid.ULID{}) {
			parent.Children = append(parent.Children, v)
		} else if root == nil {
			root = v
		}
	}
	return root
}

func (s *Server) createJob(r *request) {
	s.createFrom(r, validate.ParseJob)
}

func (s *Server) joinJobs(r *request) {
	s.createFrom(r, validate.ParseJoin)
}

func (s *Server) createFrom(r *request, parse func([]byte, validate.Catalog, validate.Limits) (*validate.Job, *validate.Error)) {
	body, e := r.body(s.cfg.MaxBodyBytes)
	if e != nil {
		r.fail(e)
		return
	}
	var job *validate.Job
	var verr *validate.Error
	if err := r.validateWith(func(cat *catalog) { job, verr = parse(body, cat, s.cfg.Limits) }); err != nil {
		r.failErr(err, nil)
		return
	}
	if verr != nil {
		r.fail(fromValidation(verr))
		return
	}
	var records []*persistence.Job
	s.IDs.Run(s.Clock.Now(), func(next func() ulid.ULID) { records = job.Records(r.team, ulid.ULID{}, 0, next) })
	r.createOnce(body, http.StatusCreated, s.created(records), func(remember *persistence.Answer) error {
		return s.Coordinator.CreateJobs(records, remember)
	})
}

// failCreate answers a creation that the store refused.
func (r *request) failCreate(err error) {
	var capped *persistence.QueueCapError
	switch {
	case errors.Is(err, persistence.ErrTemplateGone):
		r.fail(newError(http.StatusNotFound, validate.CodeTemplateNotFound, "%v", err))
		return
	case errors.As(err, &capped):
		// Room comes back as the team's jobs start; when is not known here.
		r.fail(&apiError{status: http.StatusTooManyRequests, Code: codeQueueCap, retryAfter: 30,
			Error: capped.Error() + "; send it again once some of them started, or ask the farm's admin"})
		return
	}
	r.failErr(err, nil)
}

func (s *Server) getJob(r *request) {
	j, ok := s.loadJob(r)
	if !ok {
		return
	}
	v, err := s.fullJobView(j)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	r.json(http.StatusOK, v)
}

// fullJobView is the job as GET /jobs/{id} shows it: a split job with its chunks.
func (s *Server) fullJobView(j *persistence.Job) (*jobView, error) {
	v := s.views.jobView(j)
	if j.Split() {
		chunks, err := s.Store.Jobs(j.Children)
		if err != nil {
			return nil, err
		}
		v.Chunks, v.ChunksRenderDuration = chunkViews(chunks)
	}
	return v, nil
}

func (s *Server) loadJob(r *request) (*persistence.Job, bool) {
	return teamRecord(r, func(id string) *apiError { return notFound("job", id) }, s.Store.TeamJob)
}

func (s *Server) jobLogs(r *request) {
	j, ok := s.loadJob(r)
	if !ok {
		return
	}
	log := s.Store.JobLog(j, s.Clock.Now())
	r.ctx.SetContentType("text/plain; charset=utf-8")
	// A log holds text nodes and users wrote: never sniffed into anything a browser would run.
	r.ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	r.ctx.Response.Header.Set("Content-Disposition", `inline; filename="`+j.ID.String()+`.log"`)
	r.ctx.SetBodyString(log)
}

func (s *Server) listJobs(r *request) { s.listJobsOf(r, false) }

// listJobsOf answers a page of a job listing and its total: the team's jobs, or every team's
// for the farm's admin (all), each then naming its team.
func (s *Server) listJobsOf(r *request, all bool) {
	q, minimal, e := s.jobQuery(r, all)
	if e != nil {
		r.fail(e)
		return
	}
	jobs, total, err := s.Store.ListJobs(q)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	r.ctx.Response.Header.Set("X-Total-Count", strconv.Itoa(total))
	if minimal {
		out := make(minimalJobPage, len(jobs))
		for i, j := range jobs {
			out[i] = s.views.minimalJobView(j)
		}
		r.json(http.StatusOK, out)
		return
	}
	views := s.views.jobViews(jobs)
	if all {
		if err := s.withTeams(views, jobs); err != nil {
			r.failErr(err, nil)
			return
		}
	}
	r.json(http.StatusOK, views)
}

// jobQuery reads GET /jobs's query parameters, and for the farm's admin (every team's jobs)
// team, engine and pool.
func (s *Server) jobQuery(r *request, admin bool) (persistence.JobQuery, bool, *apiError) {
	args := r.ctx.QueryArgs()
	q := persistence.JobQuery{TeamID: r.team, Limit: 100, Sort: persistence.SortOldestFirst}
	if admin {
		q.TeamID = persistence.FarmScope
	}
	bad := func(field, format string, a ...any) *apiError {
		msg := fmt.Sprintf(format, a...)
		return &apiError{status: http.StatusBadRequest, Code: validate.CodeValidation, Error: field + ": " + msg,
			Details: []validate.FieldError{{Field: field, Message: msg}}}
	}
	known := map[string]bool{"minimal": true, "from": true, "limit": true, "from_date": true, "to_date": true,
		"states": true, "exclude_states": true, "sort": true, "tags": true, "template": true, "name": true,
		"team": admin, "engine": admin, "pool": admin}
	var unknown string
	for k := range args.All() {
		if !known[string(k)] {
			unknown = string(k)
			break
		}
	}
	if unknown != "" {
		return q, false, bad(unknown, "unknown query parameter")
	}
	minimal := false
	switch v := string(args.Peek("minimal")); v {
	case "", "false":
	case "true":
		minimal = true
	default:
		return q, false, bad("minimal", "must be true or false")
	}
	if v := args.Peek("from"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 {
			return q, false, bad("from", "must be an integer >= 0")
		}
		q.Offset = n
	}
	if v := args.Peek("limit"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 || n > 1000 {
			return q, false, bad("limit", "must be an integer from 1 to 1000")
		}
		q.Limit = n
	}
	for field, dst := range map[string]*time.Time{"from_date": &q.CreatedFrom, "to_date": &q.CreatedTo} {
		if v := args.Peek(field); v != nil {
			t, err := time.Parse(time.RFC3339Nano, string(v))
			if err != nil {
				return q, false, bad(field, "must be a date-time such as 2026-01-31T12:00:00Z")
			}
			*dst = t
		}
	}
	include, e := parseStates(string(args.Peek("states")), "states", bad)
	if e != nil {
		return q, false, e
	}
	exclude, e := parseStates(string(args.Peek("exclude_states")), "exclude_states", bad)
	if e != nil {
		return q, false, e
	}
	if len(include) == 0 {
		include = persistence.AllJobStates
	}
	for _, st := range include {
		if !slices.Contains(exclude, st) {
			q.States = append(q.States, st)
		}
	}
	if len(q.States) == 0 {
		q.States = []persistence.JobState{0} // everything excluded: a state no job has
	}
	switch sort := persistence.JobSort(args.Peek("sort")); sort {
	case "":
	case persistence.SortOldestFirst, persistence.SortNewestFirst, persistence.SortPriority, persistence.SortRandom:
		q.Sort = sort
	default:
		return q, false, bad("sort", "must be random, newest_first, oldest_first or priority")
	}
	if v := string(args.Peek("tags")); v != "" {
		for _, tag := range strings.Split(v, ",") {
			if !validate.ValidTag(tag) {
				return q, false, bad("tags", "must match ^[a-zA-Z0-9-_]+(,[a-zA-Z0-9-_]+)*$")
			}
			q.Tags = append(q.Tags, tag)
		}
	}
	// template (an extension) lists one template's jobs, in creation order.
	if v := string(args.Peek("template")); v != "" {
		id, ok := persistence.ParseID(v)
		switch {
		case !ok:
			return q, false, bad("template", "must be a template id")
		case len(q.Tags) > 0:
			return q, false, bad("template", "cannot be combined with tags")
		case q.Sort != persistence.SortOldestFirst && q.Sort != persistence.SortNewestFirst:
			return q, false, bad("template", "lists in creation order: sort newest_first or oldest_first")
		}
		q.Template = id
	}
	if admin {
		if e := s.adminScope(args.Peek, &q, bad); e != nil {
			return q, false, e
		}
	}
	// name (an extension) lists the jobs whose name starts with it, in name order.
	if v := string(args.Peek("name")); v != "" {
		switch {
		case len(q.Tags) > 0 || q.Template != (ulid.ULID{}):
			return q, false, bad("name", "cannot be combined with tags, template, engine or pool")
		case q.Sort != persistence.SortOldestFirst && q.Sort != persistence.SortNewestFirst:
			return q, false, bad("name", "lists in name order: sort oldest_first (A to Z) or newest_first (Z to A)")
		case len(v) > 4*validate.MaxNameLength:
			return q, false, bad("name", "is longer than any job's name")
		}
		q.Name = v
	}
	return q, minimal, nil
}

// adminScope reads the admin's team, engine and pool: the jobs of one team (its id or name), and
// of an engine or a pool (their placement tags; "-" for no pool).
func (s *Server) adminScope(arg func(string) []byte, q *persistence.JobQuery, bad func(string, string, ...any) *apiError) *apiError {
	if ref := string(arg("team")); ref != "" {
		team, err := s.teamByRef(ref)
		if err != nil {
			return bad("team", "no team %q", ref)
		}
		q.TeamID = team.ID
	}
	switch {
	case len(q.Tags) > 0 && q.TeamID == persistence.FarmScope:
		return bad("tags", "needs team: a client's tags are its team's")
	case q.Template != (ulid.ULID{}) && q.TeamID == persistence.FarmScope:
		return bad("template", "needs team: a template is its team's")
	case q.Sort == persistence.SortPriority && q.TeamID == persistence.FarmScope:
		return bad("sort", "priority orders one team's jobs: give team")
	}
	engine, pool := string(arg("engine")), string(arg("pool"))
	if engine == "" && pool == "" {
		return nil
	}
	switch {
	case len(q.Tags) > 0 || q.Template != (ulid.ULID{}):
		return bad("engine", "engine and pool cannot be combined with tags or template")
	case q.Sort == persistence.SortPriority:
		return bad("sort", "priority order cannot be combined with engine or pool")
	}
	q.Tags = s.Store.PlacementTags(q.TeamID, engine, pool)
	if len(q.Tags) == 0 {
		q.Tags = []string{"engine=" + engine + ",pool=" + pool + ",none"} // no job carries it: nothing listed
	}
	return nil
}

func parseStates(v, field string, bad func(string, string, ...any) *apiError) ([]persistence.JobState, *apiError) {
	if v == "" {
		return nil, nil
	}
	var out []persistence.JobState
	for _, name := range strings.Split(v, ",") {
		st, ok := persistence.ParseJobState(strings.TrimSpace(name))
		if !ok {
			return nil, bad(field, "unknown state %q; states are queued, pending, render:dorender, finished, error, manually_cancelled", name)
		}
		out = append(out, st)
	}
	return out, nil
}

func (s *Server) cancelJob(r *request) {
	j, ok := s.loadJob(r)
	if !ok {
		return
	}
	outcome, err := s.Coordinator.CancelJobs([]ulid.ULID{j.ID}, s.actingTeam(r))
	if err != nil {
		r.failErr(err, nil)
		return
	}
	if len(outcome.Cancelled) == 0 || outcome.Cancelled[0].ID != j.ID {
		state := j.State
		if now := outcome.Reached[j.ID]; now != nil {
			state = now.State
		}
		r.fail(newError(http.StatusConflict, codeNotCancellable, "job %s is %s; only queued and pending jobs can be cancelled", j.ID, state))
		return
	}
	r.json(http.StatusOK, s.views.jobViews(outcome.Cancelled))
}

// stopJob stops a job whatever it is doing (an extension: the v2 cancel refuses a rendering job,
// as the interface says): a rendering job's node is told to abandon the render; a queued or
// pending job is cancelled, with the cancel's cascade.
func (s *Server) stopJob(r *request) {
	j, ok := s.loadJob(r)
	if !ok {
		return
	}
	var stopped *persistence.Job
	var err error
	if j.State.Cancellable() {
		var outcome *actors.CancelOutcome
		if outcome, err = s.Coordinator.CancelJobs([]ulid.ULID{j.ID}, s.actingTeam(r)); err == nil {
			if stopped = outcome.Reached[j.ID]; stopped == nil || stopped.State != persistence.JobCancelled {
				err = actors.ErrNotRendering // it started meanwhile, or ended
			}
		}
	} else {
		stopped, err = s.Coordinator.StopJob(j.ID, s.actingTeam(r))
	}
	if errors.Is(err, actors.ErrNotRendering) {
		state := j.State
		if stopped != nil {
			state = stopped.State
		}
		r.fail(newError(http.StatusConflict, codeNotCancellable, "job %s is %s; there is nothing to stop", j.ID, state))
		return
	}
	if err != nil {
		r.failErr(err, nil)
		return
	}
	r.json(http.StatusOK, s.views.jobView(stopped))
}

// retryJob creates a new job with the payload of one that ended in error or was cancelled (an
// extension: the v2 state machine keeps its ends), its nested jobs too, tagged retry-of-ID.
func (s *Server) retryJob(r *request) {
	j, ok := s.loadJob(r)
	if !ok {
		return
	}
	if j.State != persistence.JobFailed && j.State != persistence.JobCancelled {
		r.fail(newError(http.StatusConflict, codeConflict, "job %s is %s; only a job that ended in error or was cancelled can be retried", j.ID, j.State))
		return
	}
	body, e := r.body(s.cfg.MaxBodyBytes)
	if e != nil {
		r.fail(e)
		return
	}
	q, err := s.Store.RetryRequest(r.team, j.ID)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	team, err := s.Store.Team(r.team)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	q.CapPriority(team.Policy.MaxPriority)
	if q.Pool != "" && !team.Policy.AllowsPool(q.Pool) { // nested jobs render in their parent's pool
		r.fail(newError(http.StatusForbidden, codeForbidden, "job %s renders in pool %q, which the team may no longer name (its admin allows only %q): create it again in another pool", j.ID, q.Pool, *team.Policy.Pools))
		return
	}
	var records []*persistence.Job
	s.IDs.Run(s.Clock.Now(), func(next func() ulid.ULID) { records = q.Records(r.team, ulid.ULID{}, 0, next) })
	r.createOnce(body, http.StatusCreated, s.created(records), func(remember *persistence.Answer) error {
		return s.Coordinator.CreateJobs(records, remember)
	})
}

// retagJob changes a queued or pending job's priority and tags (an extension).
func (s *Server) retagJob(r *request) {
	j, ok := s.loadJob(r)
	if !ok {
		return
	}
	body, e := r.body(s.cfg.MaxBodyBytes)
	if e != nil {
		r.fail(e)
		return
	}
	team, err := s.Store.Team(j.TeamID)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	change, verr := validate.ParseRetag(body, team.Policy)
	if verr != nil {
		r.fail(fromValidation(verr))
		return
	}
	changed, err := s.Coordinator.RetagJob(j.ID, change.Priority, change.Tags, s.actingTeam(r))
	if errors.Is(err, actors.ErrNotWaiting) {
		state := j.State
		if changed != nil {
			state = changed.State
		}
		r.fail(newError(http.StatusConflict, codeConflict, "job %s is %s; only a queued or pending job's priority and tags can change", j.ID, state))
		return
	}
	if err != nil {
		r.failErr(err, nil)
		return
	}
	r.json(http.StatusOK, s.views.jobView(changed))
}

// actingTeam names who changed or stopped a job, for its log: the team, and the token's id (what
// `framefarm token list` shows).
func (s *Server) actingTeam(r *request) string {
	if r.admin {
		return fmt.Sprintf("the farm's admin (token %s) through the API", (&persistence.Token{Hash: r.holder.Token}).ID())
	}
	name := r.team.String()
	if team, err := s.Store.Team(r.team); err == nil {
		name = team.Name
	}
	return fmt.Sprintf("team %s (token %s) through the API", name, (&persistence.Token{Hash: r.holder.Token}).ID())
}

func (s *Server) cancelJobs(r *request) {
	var body struct {
		Jobs []string `json:"jobs"`
	}
	if !r.decode(&body) {
		return
	}
	bad := func(msg string) {
		r.fail(&apiError{status: http.StatusBadRequest, Code: validate.CodeValidation, Error: "jobs: " + msg,
			Details: []validate.FieldError{{Field: "jobs", Message: msg}}})
	}
	switch {
	case len(body.Jobs) == 0:
		bad("needs at least one job id")
		return
	case len(body.Jobs) > 1000:
		bad(fmt.Sprintf("at most 1000 job ids, got %d", len(body.Jobs)))
		return
	}
	seen := make(map[string]bool, len(body.Jobs))
	for _, id := range body.Jobs {
		if seen[id] {
			bad(fmt.Sprintf("job id %q is listed twice", id))
			return
		}
		seen[id] = true
	}
	ids, parsed, missing := make([]ulid.ULID, 0, len(body.Jobs)), make([]ulid.ULID, len(body.Jobs)), []validate.FieldError(nil)
	for i, text := range body.Jobs {
		parsed[i], _ = persistence.ParseID(text) // a malformed id is the zero id, which no job has
	}
	for i, exists := range s.Store.TeamJobsExist(r.team, parsed) {
		if !exists {
			missing = append(missing, validate.FieldError{Field: fmt.Sprintf("jobs[%d]", i), Message: fmt.Sprintf("no job %q", body.Jobs[i])})
			continue
		}
		ids = append(ids, parsed[i])
	}
	if len(missing) > 0 {
		r.fail(&apiError{status: http.StatusNotFound, Code: codeNotFound, Details: missing,
			Error: fmt.Sprintf("%d of the listed jobs do not exist; nothing was cancelled", len(missing))})
		return
	}
	outcome, err := s.Coordinator.CancelJobs(ids, s.actingTeam(r))
	if err != nil {
		r.failErr(err, nil)
		return
	}
	if len(outcome.Cancelled) == 0 {
		r.fail(newError(http.StatusConflict, codeNotCancellable, "none of the listed jobs is queued or pending; nothing was cancelled"))
		return
	}
	r.json(http.StatusOK, s.views.jobViews(outcome.Cancelled))
}
