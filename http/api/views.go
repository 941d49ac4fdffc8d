package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/renderer"
)

// jobView is the Job object of the v2 API. Fields after outputUrl are extensions.
type jobView struct {
	ID         string           `json:"id"`
	TemplateID *string          `json:"templateId"`
	Status     string           `json:"status"`
	Progress   float64          `json:"progress"`
	Stats      *jobStats        `json:"stats"`
	OutputURL  string           `json:"outputUrl"`
	Assets     []renderer.Asset `json:"assets"`
	// Composition and Settings are what the job renders and how (extensions).
	Composition string            `json:"composition,omitempty"`
	Settings    renderer.Settings `json:"settings"`
	// storedFields show the record's fields as stored (jobfields_gen.go): kind, priority, tags,
	// batch, parent, missing fonts (those the job or its template names that the team's library
	// lacks), attempts, node, why a job that asked to be split renders whole (unsplit), and what
	// the job is called, the pool it renders in and the limits its renders hold.
	storedFields
	Children []string `json:"children,omitempty"`
	// Chunks are a split job's chunks, in GET /jobs/{id}.
	Chunks []chunkView `json:"chunks,omitempty"`
	// ChunksRenderDuration is the render time of a split job's chunks added up, in seconds:
	// the slot time it took, beside its renderDuration, the wall time of it all.
	ChunksRenderDuration *float64 `json:"chunksRenderDuration,omitempty"`
	// Team is the job's team, and TemplateName its template's, in the farm admin's views (the
	// admin lists no team's templates).
	Team         *teamRef `json:"team,omitempty"`
	TemplateName string   `json:"templateName,omitempty"`
	// Data is the webhook's custom data, in webhook bodies only.
	Data json.RawMessage `json:"data,omitempty"`
}

// chunkView is one chunk of a split job: the frames it renders and how far it is.
type chunkView struct {
	Index    int     `json:"index"`
	Frames   []int   `json:"frames"`
	Status   string  `json:"status"`
	Progress float64 `json:"progress"`
	Node     string  `json:"node,omitempty"`
	Attempts int     `json:"attempts"`
	// FailedAttempts are the attempts that count against the job's attempts: those that failed
	// (Attempts also counts those lost with their node or sent again).
	FailedAttempts int        `json:"failedAttempts"`
	StartedAt      *time.Time `json:"startedAt"`
	FinishedAt     *time.Time `json:"finishedAt"`
	// RenderDuration is the chunk's render time in seconds, once rendered.
	RenderDuration *float64 `json:"renderDuration"`
	Error          string   `json:"error,omitempty"`
}

// chunkViews are a split job's chunks, and their render times added up (nil before any ended).
func chunkViews(chunks []*persistence.Job) ([]chunkView, *float64) {
	out := make([]chunkView, 0, len(chunks))
	var sum *float64
	for i, c := range chunks {
		if c == nil {
			continue
		}
		f := c.Spec.Settings.Frames
		v := chunkView{Index: i, Frames: []int{f.Start, f.End}, Status: c.State.String(), Progress: c.Progress,
			Node: c.Node, Attempts: c.Attempts, FailedAttempts: len(c.Failures), StartedAt: optionalTime(c.StartedAt), FinishedAt: optionalTime(c.FinishedAt), Error: c.Error}
		if c.RenderDuration > 0 {
			seconds := c.RenderDuration.Seconds()
			v.RenderDuration = &seconds
			if sum == nil {
				sum = new(float64)
			}
			*sum += seconds
		}
		out = append(out, v)
	}
	return out, sum
}

type jobStats struct {
	CreatedAt      time.Time  `json:"createdAt"`
	UpdatedAt      time.Time  `json:"updatedAt"`
	StartedAt      *time.Time `json:"startedAt"`
	FinishedAt     *time.Time `json:"finishedAt"`
	ErrorAt        *time.Time `json:"errorAt"`
	TotalAssets    int        `json:"totalAssets"`
	RenderDuration *float64   `json:"renderDuration"`
	Error          *string    `json:"error"`
	WaitingFor     string     `json:"waitingFor,omitempty"`
}

// minimalJobView is a listing entry with minimal=true.
type minimalJobView struct {
	ID         string       `json:"id"`
	TemplateID *string      `json:"templateId"`
	Status     string       `json:"status"`
	Progress   float64      `json:"progress"`
	OutputURL  string       `json:"outputUrl"`
	Stats      minimalStats `json:"stats"`
	Name       string       `json:"name,omitempty"`
}

// minimalStats are a minimal listing's: when the job was made and, once finished, when it
// finished (what a listing of finished work is read for).
type minimalStats struct {
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func optionalString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optionalID(id ulid.ULID) *string {
	if id == (ulid.ULID{}) {
		return nil
	}
	s := id.String()
	return &s
}

func idOrEmpty(id ulid.ULID) string {
	if id == (ulid.ULID{}) {
		return ""
	}
	return id.String()
}

// JobViews renders jobs as the API shows them, webhook bodies included: output URLs signed with
// URLs for OutputTTL. Capacities and TeamLoads, when set, explain why a queued job waits; a
// webhook's job has ended, so its views need neither.
type JobViews struct {
	URLs       *blobs.Signer
	OutputTTL  time.Duration
	Clock      clock.Clock
	Capacities func() map[string]actors.Capacity
	TeamLoads  func() map[ulid.ULID]actors.TeamLoad
	// Pools and Limits say what each pool's nodes offer (by persistence.PoolWaitSubject) and
	// how the limits are used.
	Pools  func() map[string]actors.Capacity
	Limits func() map[string]actors.LimitUse
	// Waits are the scheduler's reasons, by wait subject, which say what the nodes are doing
	// when none is ready.
	Waits func() map[string]string
}

// recordedWait is the scheduler's reason for a subject, or else.
func (s *JobViews) recordedWait(subject, otherwise string) string {
	if s.Waits != nil {
		if r := s.Waits()[subject]; r != "" {
			return r
		}
	}
	return otherwise
}

func (s *JobViews) jobView(j *persistence.Job) *jobView {
	v := &jobView{
		ID:          j.ID.String(),
		TemplateID:  optionalID(j.TemplateID),
		Status:      j.Status(),
		Progress:    j.Progress,
		OutputURL:   s.outputURL(j),
		Assets:      j.Spec.Assets,
		Composition: j.Spec.Composition,
		Settings:    j.Spec.Settings,
		Stats:       s.jobStats(j),
	}
	v.fill(j)
	if v.Assets == nil {
		v.Assets = []renderer.Asset{}
	}
	if j.Split() {
		return v // its children are its chunks, the farm's
	}
	for _, c := range j.Children {
		v.Children = append(v.Children, c.String())
	}
	return v
}

// jobStats are a job's times, size and outcome, as GET /jobs/{id} and batch items show them.
func (s *JobViews) jobStats(j *persistence.Job) *jobStats {
	st := &jobStats{
		CreatedAt:   j.CreatedAt.UTC(),
		UpdatedAt:   j.UpdatedAt.UTC(),
		StartedAt:   optionalTime(j.StartedAt),
		FinishedAt:  optionalTime(j.FinishedAt),
		ErrorAt:     optionalTime(j.ErrorAt),
		TotalAssets: len(j.Spec.Assets),
		Error:       optionalString(j.Error),
		WaitingFor:  s.waitingFor(j),
	}
	if j.RenderDuration > 0 {
		seconds := j.RenderDuration.Seconds()
		st.RenderDuration = &seconds
	}
	return st
}

func (s *JobViews) minimalJobView(j *persistence.Job) *minimalJobView {
	return &minimalJobView{
		ID: j.ID.String(), TemplateID: optionalID(j.TemplateID), Status: j.Status(),
		Progress: j.Progress, OutputURL: s.outputURL(j), Stats: minimalStats{CreatedAt: j.CreatedAt.UTC(), FinishedAt: optionalTime(j.FinishedAt)},
		Name: j.Name,
	}
}

// WebhookBody is the webhook body of a job: the Job object, with the webhook's data when set.
func (s *JobViews) WebhookBody(j *persistence.Job, data json.RawMessage) ([]byte, error) {
	v := s.jobView(j)
	v.Data = data
	return marshal(v)
}

// waitingFor explains why a job is not rendering yet.
func (s *JobViews) waitingFor(j *persistence.Job) string {
	// A split job waits on nodes as a queued job does until its first chunk starts; then it
	// renders, until its join waits for a node.
	queued := j.State == persistence.JobQueued || j.Split() && j.State == persistence.JobPending && j.StartedAt.IsZero()
	switch {
	case j.State == persistence.JobPending && !queued && j.Split():
		return ""
	case j.State == persistence.JobPending && !queued:
		return fmt.Sprintf("waiting for %d child jobs to finish", len(j.Children))
	case queued && s.Clock != nil && s.Clock.Now().Before(j.StorageRetryAt):
		return fmt.Sprintf("the farm's storage failed attempt %d, which does not count against jobs.max_attempts; it is offered to the render nodes again at %s (in %s)",
			j.Attempts, j.StorageRetryAt.UTC().Format(time.RFC3339), j.StorageRetryAt.Sub(s.Clock.Now()).Round(time.Second))
	case queued && s.Capacities != nil:
		return s.queuedWait(j)
	}
	return ""
}

// queuedWait says what a queued job waits for, in the order the scheduler asks: a node for its
// engine, one of its pool, its team below its maxRunning, its limits free, a free slot.
func (s *JobViews) queuedWait(j *persistence.Job) string {
	c := s.Capacities()[j.Engine]
	if c.Nodes == 0 {
		return s.recordedWait(j.Engine, fmt.Sprintf("no ready render node offers the %q engine", j.Engine))
	}
	slotsOf := fmt.Sprintf("the %q engine", j.Engine)
	if j.Pool != "" && s.Pools != nil {
		c = s.Pools()[persistence.PoolWaitSubject(j.Pool, j.Engine)]
		if reason := actors.PoolWaitReason(j.Pool, j.Engine, c); reason != "" {
			return s.recordedWait(persistence.PoolWaitSubject(j.Pool, j.Engine), reason)
		}
		slotsOf = fmt.Sprintf("the %q engine in pool %q", j.Engine, j.Pool)
	}
	if s.TeamLoads != nil {
		if load := s.TeamLoads()[j.TeamID]; load.AtCap() {
			return actors.CapWaitReason(load.Running, load.MaxRunning)
		}
	}
	if len(j.Limits) > 0 && s.Limits != nil {
		uses := s.Limits()
		for _, name := range j.Limits {
			if reason := actors.LimitWaitReason(name, uses[name]); reason != "" {
				return reason
			}
		}
	}
	if c.Free == 0 {
		return fmt.Sprintf("%s for %s %s busy; %s queued for them", every(c.Slots, "render slot"), slotsOf, are(c.Slots), renderer.Count(c.Queued, "job"))
	}
	return "being assigned to a render node"
}

// every writes "the one render slot" or "all 3 render slots".
func every(n int, noun string) string {
	if n == 1 {
		return "the one " + noun
	}
	return "all " + renderer.Count(n, noun)
}

func are(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// outputURL is where a job's output is (or will be) available.
func (s *JobViews) outputURL(j *persistence.Job) string {
	if j.OutputURL != "" {
		return j.OutputURL
	}
	if up := j.Spec.Upload; up != nil && up.OutputURL != "" {
		return up.PublicURL(j.OutputName)
	}
	return s.signedURL(j.OutputLink())
}

// signedURL signs a download of key with an expiry rounded up to the hour, so repeated reads of
// one record hand out the same URL for a while.
func (s *JobViews) signedURL(key string) string {
	expires := s.Clock.Now().Add(s.OutputTTL).Truncate(time.Hour).Add(time.Hour)
	return s.URLs.URL(http.MethodGet, key, expires)
}

func (s *JobViews) jobViews(jobs []*persistence.Job) jobPage {
	out := make(jobPage, len(jobs))
	for i, j := range jobs {
		out[i] = s.jobView(j)
	}
	return out
}

// templateMeta is what both versions of the API say about every template.
type templateMeta struct {
	ID          string    `json:"id"`
	Type        string    `json:"type"`
	DisplayName string    `json:"displayName"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

func templateMetaOf(t *persistence.Template) templateMeta {
	return templateMeta{ID: t.ID.String(), Type: t.Type, DisplayName: t.DisplayName, Status: string(t.Status),
		CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC()}
}

// templateView is the Template object of the v2 API.
type templateView struct {
	templateMeta
	Compositions []string `json:"compositions"`
	Layers       []string `json:"layers"`
	// Mogrt is left out of templates that are not mogrt (the official interface omits it).
	Mogrt      *renderer.Mogrt `json:"mogrt,omitempty"`
	Error      *string         `json:"error"`
	UploadInfo *uploadInfo     `json:"uploadInfo,omitempty"`
	// Engines are the engines able to render the template (extension).
	Engines []string `json:"engines"`
	Src     string   `json:"src,omitempty"`
	// MissingFonts are the fonts the template uses that it does not bundle and the team's
	// library does not hold (extension): its texts fall back to other fonts unless the render
	// nodes have them installed (a job's missingFonts leaves those out).
	MissingFonts []string `json:"missingFonts,omitempty"`
}

type uploadInfo struct {
	URL       string            `json:"url"`
	Method    string            `json:"method"`
	ExpiresIn int               `json:"expiresIn"`
	Key       string            `json:"key"`
	Fields    map[string]string `json:"fields"`
}

// templateView describes a template, with the fonts missing from library (the team's); its
// upload URL only to a request whose token may upload (a viewer's may not).
func (s *Server) templateView(t *persistence.Template, r *request, library []*persistence.Font) *templateView {
	v := &templateView{
		templateMeta: templateMetaOf(t), Error: optionalString(t.Error),
		Compositions: []string{}, Layers: []string{}, Engines: []string{}, Src: t.Src,
	}
	if in := t.Inspection; in != nil {
		v.Compositions, v.Layers, v.Mogrt, v.Engines = in.CompositionNames(), in.LayerNames(), in.Mogrt, in.Engines
		v.MissingFonts = validate.FontsMissing(in.Fonts, in.BundledFonts, nil, library, func(string) bool { return false })
	}
	if t.Status == persistence.TemplateAwaitingUpload && r.mayChange() {
		v.UploadInfo = s.uploadInfo(t)
	}
	return v
}

func (s *Server) uploadInfo(t *persistence.Template) *uploadInfo {
	key := t.UploadKey()
	return &uploadInfo{
		URL:       s.URLs.URL(http.MethodPut, key, s.Clock.Now().Add(s.cfg.UploadURLTTL)),
		Method:    http.MethodPut,
		ExpiresIn: int(s.cfg.UploadURLTTL.Seconds()),
		Key:       key,
		Fields:    map[string]string{"Content-Type": "application/octet-stream"},
	}
}
