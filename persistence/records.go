package persistence

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/renderer"
)

// JobState is a job's status. Its text form is the v2 API name.
type JobState uint8

// Job states. The numeric values are stored in index keys: never renumber them.
const (
	JobQueued    JobState = 1
	JobPending   JobState = 2
	JobRendering JobState = 3
	JobFinished  JobState = 4
	JobFailed    JobState = 5
	JobCancelled JobState = 6
)

// AllJobStates lists every state in numeric order.
var AllJobStates = []JobState{JobQueued, JobPending, JobRendering, JobFinished, JobFailed, JobCancelled}

var jobStateNames = map[JobState]string{
	JobQueued:    "queued",
	JobPending:   "pending",
	JobRendering: "render:dorender",
	JobFinished:  "finished",
	JobFailed:    "error",
	JobCancelled: "manually_cancelled",
}

func (s JobState) String() string {
	if n, ok := jobStateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("JobState(%d)", uint8(s))
}

// Terminal reports whether no transition leaves this state.
func (s JobState) Terminal() bool {
	return s == JobFinished || s == JobFailed || s == JobCancelled
}

// Cancellable reports whether a job in this state may be cancelled.
func (s JobState) Cancellable() bool { return s == JobQueued || s == JobPending }

// ParseJobState reads a v2 state name.
func ParseJobState(name string) (JobState, bool) {
	for s, n := range jobStateNames {
		if n == name {
			return s, true
		}
	}
	return 0, false
}

func (s JobState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

func (s *JobState) UnmarshalText(b []byte) error {
	v, ok := ParseJobState(string(b))
	if !ok {
		return fmt.Errorf("unknown job state %q", b)
	}
	*s = v
	return nil
}

// Team owns tokens, templates, jobs, batches, fonts and secrets; nothing crosses teams.
type Team struct {
	ID   ulid.ULID `json:"id"`
	Name string    `json:"name"`
	// WebhookSecret signs outbound webhooks (hex).
	WebhookSecret string    `json:"webhookSecret"`
	CreatedAt     time.Time `json:"createdAt"`
	// Policy is how the farm's admin shapes the team's use of the farm (SetTeamPolicy).
	Policy TeamPolicy `json:"policy,omitzero"`
}

// TokenRole is what a token may do in its team: a viewer reads and streams only, a submitter (the
// default) also sends and changes work, a manager also issues and revokes its team's tokens.
type TokenRole string

// Token roles.
const (
	RoleViewer    TokenRole = "viewer"
	RoleSubmitter TokenRole = "submitter"
	RoleManager   TokenRole = "manager"
)

// ParseTokenRole reads a role's name; "" is the default, submitter.
func ParseTokenRole(name string) (TokenRole, bool) {
	switch r := TokenRole(name); r {
	case "":
		return RoleSubmitter, true
	case RoleViewer, RoleSubmitter, RoleManager:
		return r, true
	}
	return "", false
}

// Token is an API token; only its SHA-256 hash is stored.
type Token struct {
	TeamID    ulid.ULID `json:"teamId"`
	CreatedAt time.Time `json:"createdAt"`
	// Role is what the token may do; tokens made before roles have none: submitter.
	Role TokenRole `json:"role,omitempty"`
	// ExpiresAt, when set, is when the token stops working.
	ExpiresAt time.Time `json:"expiresAt,omitzero"`
	// Hash is the key the token is stored under (not stored inside the record).
	Hash [32]byte `json:"-"`
}

// TokenIDLength is how many bytes of a token's hash name it (as hex) in lists and revocations:
// enough to tell tokens apart, useless for finding the token.
const TokenIDLength = 8

// ID names the token without revealing it.
func (t *Token) ID() string { return hex.EncodeToString(t.Hash[:TokenIDLength]) }

// RoleOrDefault is the token's role, submitter when it has none.
func (t *Token) RoleOrDefault() TokenRole {
	if t.Role == "" {
		return RoleSubmitter
	}
	return t.Role
}

// Expired reports whether the token no longer works at now.
func (t *Token) Expired(now time.Time) bool { return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) }

// TemplateStatus is a template's status; see actors/STATE_MACHINE.md.
type TemplateStatus string

// Template statuses.
const (
	TemplateAwaitingUpload TemplateStatus = "awaiting_upload"
	TemplateDownloading    TemplateStatus = "downloading"
	TemplateProcessing     TemplateStatus = "processing"
	TemplateUploaded       TemplateStatus = "uploaded"
	TemplateError          TemplateStatus = "error"
)

// Template is a project file uploaded once and used by many jobs.
type Template struct {
	ID          ulid.ULID      `json:"id"`
	TeamID      ulid.ULID      `json:"teamId"`
	Type        string         `json:"type"`
	DisplayName string         `json:"displayName"`
	Status      TemplateStatus `json:"status"`
	Src         string         `json:"src,omitzero"`
	Error       string         `json:"error,omitzero"`
	CreatedAt   time.Time      `json:"createdAt"`
	UpdatedAt   time.Time      `json:"updatedAt"`
	// ReplacementOpen is set when PUT /templates/{id}/upload asked for a URL that replaces the
	// file of a template that has one; the next file to arrive clears it.
	ReplacementOpen bool `json:"replacementOpen,omitzero"`
	// UploadWindow numbers the template's upload windows: the first is its creation's, and each
	// replacement opens the next. An upload URL names its window (UploadKey), so it serves that
	// window only: once a file arrived through it, or a later window opened, it is refused.
	// Templates of releases before it have 0.
	UploadWindow int `json:"uploadWindow,omitzero"`
	// File is the stored project file, once one arrived.
	File       *StoredFile          `json:"file,omitzero"`
	Inspection *renderer.Inspection `json:"inspection,omitzero"`
}

// StoredFile is a file in the object store.
type StoredFile struct {
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// JobKind tells render jobs from join (stitch) jobs and from the chunks of a split job.
type JobKind string

// Job kinds.
const (
	KindRender JobKind = "render"
	KindJoin   JobKind = "join"
	// KindChunk is a range of frames of a split job, rendered on whichever node is free into a
	// segment its job joins. Chunks are the farm's, not their client's: no listing, count, batch
	// or webhook knows them; their job shows them.
	KindChunk JobKind = "chunk"
)

// JobSpec is the validated request that created a job.
type JobSpec struct {
	Composition string            `json:"composition,omitzero"`
	TemplateSrc string            `json:"templateSrc,omitzero"`
	Assets      []renderer.Asset  `json:"assets"`
	Preview     bool              `json:"preview,omitzero"`
	Fonts       []string          `json:"fonts,omitzero"`
	Settings    renderer.Settings `json:"settings"`
	Upload      *Upload           `json:"upload,omitzero"`
	Webhook     *Webhook          `json:"webhook,omitzero"`
}

// Upload sends a job's output to the client's own bucket.
type Upload struct {
	Prefix    string        `json:"prefix,omitempty"`
	OutputURL string        `json:"outputUrl,omitempty"`
	Provider  string        `json:"provider,omitempty"`
	Params    *UploadParams `json:"params,omitempty"`
}

// UploadParams are S3 connection parameters; values may hold ${secret.NAME} references.
type UploadParams struct {
	Endpoint        string `json:"endpoint,omitempty"`
	Region          string `json:"region"`
	Bucket          string `json:"bucket"`
	ACL             string `json:"acl,omitempty"`
	AccessKeyID     string `json:"accessKeyId"`
	AccessKeySecret string `json:"accessKeySecret"`
}

// Webhook is a job's callback configuration; values may hold ${secret.NAME} references.
type Webhook struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Data    json.RawMessage   `json:"data,omitempty"`
	Custom  bool              `json:"custom,omitempty"`
}

// JobRequest is a job as a client asked for it, once checked: what becomes its record and the
// records of its nested jobs.
type JobRequest struct {
	Kind       JobKind
	TemplateID ulid.ULID
	Engine     string
	Spec       JobSpec
	Priority   int
	Tags       []string
	// MissingFonts are the fonts the job names, then those its template uses, that neither the
	// job nor the team library provides.
	MissingFonts []string
	// Children are the job's nested jobs; Children[i] renders into Spec.Assets[ChildAsset[i]].
	Children   []*JobRequest
	ChildAsset []int
	// Chunks, when set, split the job: each range renders as a chunk of its own, and the job
	// joins them. ChunkFrames is the frames each chunk has (the last may have more).
	Chunks      []renderer.Frames
	ChunkFrames int
	// Unsplit says why a job that asked to be split renders whole.
	Unsplit string
	// Name, Pool and Limits are what the job is called, where it renders and what its renders
	// hold (Job.Name, Job.Pool, Job.Limits); Frames the frames it renders (Job.Frames).
	Name   string
	Pool   string
	Limits []string
	Frames int
}

// CapPriority lowers the priority of the request and its nested jobs to maxPriority when
// above it (nil: no cap): a job retried after its team's cap was lowered.
func (q *JobRequest) CapPriority(maxPriority *int) {
	if maxPriority == nil {
		return
	}
	q.Priority = min(q.Priority, *maxPriority)
	for _, c := range q.Children {
		c.CapPriority(maxPriority)
	}
}

// Records makes the records of a team's request: the job first, then its descendants depth
// first, with ids from next; batchID and batchIndex place a top-level job in its batch.
func (q *JobRequest) Records(team, batchID ulid.ULID, batchIndex int, next func() ulid.ULID) []*Job {
	return q.records(team, batchID, batchIndex, nil, next)
}

func (q *JobRequest) records(team, batchID ulid.ULID, batchIndex int, parent *Job, next func() ulid.ULID) []*Job {
	id := next()
	j := &Job{
		ID: id, TeamID: team, Kind: q.Kind, TemplateID: q.TemplateID, Engine: q.Engine,
		Spec: q.Spec, MissingFonts: q.MissingFonts, BatchID: batchID, State: JobQueued, Unsplit: q.Unsplit, Frames: q.Frames,
		CreatedAt:  time.UnixMilli(int64(id.Time())).UTC(),
		OutputName: id.String() + renderer.OutputExtension(q.Spec.Settings),
	}
	j.takeRequested(q)
	if parent == nil {
		j.BatchIndex = batchIndex
	} else {
		j.ParentID, j.Depth = parent.ID, parent.Depth+1
	}
	if up := q.Spec.Upload; up != nil && up.Params != nil {
		j.OutputURL = up.PublicURL(j.OutputName)
	}
	if len(q.Children) > 0 {
		j.State = JobPending
		j.Spec.Assets = append([]renderer.Asset(nil), q.Spec.Assets...)
	}
	out := []*Job{j}
	if len(q.Chunks) > 0 {
		j.State, j.ChunkFrames = JobPending, q.ChunkFrames
		for _, frames := range q.Chunks {
			chunk := j.chunk(next(), frames)
			j.Children = append(j.Children, chunk.ID)
			out = append(out, chunk)
		}
		return out
	}
	for i, child := range q.Children {
		descendants := child.records(team, batchID, 0, j, next)
		j.Children = append(j.Children, descendants[0].ID)
		j.Spec.Assets[q.ChildAsset[i]].JobID = descendants[0].ID.String()
		out = append(out, descendants...)
	}
	return out
}

// chunk makes the record of one chunk of j: j's render of frames. It keeps only its settings,
// however many assets j has (TeamReads.AsRendered gives it the rest of j's spec), and delivers
// nothing itself (its output is the farm's; it has no webhook).
func (j *Job) chunk(id ulid.ULID, frames renderer.Frames) *Job {
	spec := JobSpec{Settings: j.Spec.Settings}
	spec.Settings.Frames = &frames
	return &Job{
		ID: id, TeamID: j.TeamID, Kind: KindChunk, TemplateID: j.TemplateID, Engine: j.Engine, Priority: j.Priority,
		Tags: j.Tags, Spec: spec, State: JobQueued, ParentID: j.ID, Depth: j.Depth + 1, Pool: j.Pool, Limits: j.Limits,
		Frames:     frames.End - frames.Start + 1,
		CreatedAt:  time.UnixMilli(int64(id.Time())).UTC(),
		OutputName: id.String() + renderer.ChunkExtension(spec.Settings),
	}
}

// Split reports whether the job renders as chunks (its Children) that it joins.
func (j *Job) Split() bool { return j.ChunkFrames > 0 }

// Status is the job's status as its client sees it (Listed).
func (j *Job) Status() string { return j.Listed().String() }

// Listed is the state the job's client sees, and listings by state file it under: its state,
// except that a split job waiting on its chunks (pending) is queued until its first chunk
// starts, and renders (render:dorender) from then until it has joined its chunks.
func (j *Job) Listed() JobState {
	switch {
	case !j.Split() || !j.State.Cancellable():
		return j.State
	case j.StartedAt.IsZero():
		return JobQueued
	}
	return JobRendering
}

// Job is one render (or stitch) instruction and everything known about its progress.
//
// Its tags are the one description of a job's fields: the record form that added each (form,
// and codec where its type has no default), the key of a job request that sets it (request) and
// the key of a job view that shows it as stored (view). cmd/jobfields writes the record walk, the
// request's fields and the view's fields from them (`make generate`); json is the form of records
// written before the binary codec.
//
//go:generate go run ../cmd/jobfields -root ..
type Job struct {
	ID         ulid.ULID `json:"id" form:"1"`
	TeamID     ulid.ULID `json:"teamId" form:"1"`
	Kind       JobKind   `json:"kind" form:"1" codec:"string" view:"kind"`
	TemplateID ulid.ULID `json:"templateId,omitzero" form:"1"`
	State      JobState  `json:"state" form:"1" codec:"byte"`
	Progress   float64   `json:"progress,omitzero" form:"1"`
	Priority   int       `json:"priority,omitzero" form:"1" request:"priority" view:"priority"`
	Tags       []string  `json:"tags,omitzero" form:"1" request:"tags,raw" view:"tags,array"`
	// Engine is the render engine the job needs.
	Engine     string      `json:"engine" form:"1"`
	BatchID    ulid.ULID   `json:"batchId,omitzero" form:"1" view:"batchId,omitempty"`
	BatchIndex int         `json:"batchIndex,omitzero" form:"1"`
	ParentID   ulid.ULID   `json:"parentId,omitzero" form:"1" view:"parentId,omitempty"`
	Children   []ulid.ULID `json:"children,omitzero" form:"1" codec:"idList"`
	// Depth is 0 for a top-level job, 1 for its children and so on.
	Depth        int      `json:"depth,omitzero" form:"1"`
	Spec         JobSpec  `json:"spec" form:"1" codec:"specFields"`
	MissingFonts []string `json:"missingFonts,omitzero" form:"1" view:"missingFonts,omitempty"`
	// Attempts counts dispatches to a render node; messages from older attempts are rejected.
	Attempts int    `json:"attempts,omitzero" form:"1" view:"attempts"`
	Node     string `json:"node,omitzero" form:"1" view:"node,omitempty"`
	// Failures are the attempts that ended without output; after enough of them the job fails.
	Failures []AttemptFailure `json:"failures,omitzero" form:"1" codec:"failureFields"`
	// OutputName is the output's file name; OutputURL is set when the job uploads to its own
	// bucket, otherwise the output lives in the object store under OutputKey().
	OutputName     string        `json:"outputName" form:"1"`
	OutputURL      string        `json:"outputUrl,omitzero" form:"1"`
	CreatedAt      time.Time     `json:"createdAt" form:"1"`
	UpdatedAt      time.Time     `json:"updatedAt" form:"1"`
	StartedAt      time.Time     `json:"startedAt,omitzero" form:"1"`
	FinishedAt     time.Time     `json:"finishedAt,omitzero" form:"1"`
	ErrorAt        time.Time     `json:"errorAt,omitzero" form:"1"`
	RenderDuration time.Duration `json:"renderDuration,omitzero" form:"1" codec:"int64"`
	Error          string        `json:"error,omitzero" form:"1"`
	// ChunkFrames, on a split job, is how many frames each of its chunks has (the last may have
	// more); its Children are the chunks, in frame order.
	ChunkFrames int `json:"chunkFrames,omitzero" form:"2"`
	// Unsplit says why a job that asked to be split renders whole.
	Unsplit string `json:"unsplit,omitzero" form:"2" view:"unsplit,omitempty"`
	// StorageRetryAt, on a queued job whose last attempt the farm's storage failed (an attempt
	// that does not count), is when it is offered to the nodes again.
	StorageRetryAt time.Time `json:"storageRetryAt,omitzero" form:"3"`
	// Name is what its client calls the job (an extension). Pool, when set, is the only pool of
	// render nodes the job renders on; Limits are the limits its renders hold (those it named
	// and those its engine implies), sorted.
	Name   string   `json:"name,omitzero" form:"4" request:"name" view:"name,omitempty"`
	Pool   string   `json:"pool,omitzero" form:"4" request:"pool" view:"pool,omitempty"`
	Limits []string `json:"limits,omitzero" form:"4" request:"limits" view:"limits,omitempty"`
	// AttemptStartedAt is when its current (or last) attempt was dispatched; Frames the frames
	// its render makes (0: not known before it renders); OutputBytes its output's size, once
	// finished. What it used of the farm is counted from them (usage.go).
	AttemptStartedAt time.Time `json:"attemptStartedAt,omitzero" form:"5"`
	Frames           int       `json:"frames,omitzero" form:"5"`
	OutputBytes      int64     `json:"outputBytes,omitzero" form:"5"`
}

// Clone returns a copy that can be changed without touching j: records handed out are shared
// between goroutines and never modified in place.
func (j *Job) Clone() *Job {
	c := *j
	c.Failures = slices.Clone(j.Failures)
	return &c
}

// WithProgress returns a copy of j with another progress.
func (j *Job) WithProgress(percent float64) *Job {
	c := *j
	c.Progress = percent
	return &c
}

// AttemptFailure is one attempt that ended without output.
type AttemptFailure struct {
	Attempt int       `json:"attempt"`
	Node    string    `json:"node"`
	Error   string    `json:"error"`
	At      time.Time `json:"at"`
}

// Batch groups top-level jobs submitted in one request.
type Batch struct {
	ID        ulid.ULID    `json:"id"`
	TeamID    ulid.ULID    `json:"teamId"`
	Name      string       `json:"name,omitempty"`
	Total     int          `json:"total"`
	Jobs      []BatchEntry `json:"jobs"`
	CreatedAt time.Time    `json:"createdAt"`
}

// BatchEntry is one created top-level job of a batch, with its index in the request.
type BatchEntry struct {
	Index int       `json:"index"`
	JobID ulid.ULID `json:"jobId"`
}

// Font is a TrueType file in a team's font library.
type Font struct {
	ID         ulid.ULID `json:"id"`
	TeamID     ulid.ULID `json:"teamId"`
	FamilyName string    `json:"familyName"`
	// PostScriptName is the name the file gives itself there, the name After Effects projects
	// use for the font; empty for fonts stored before it was read.
	PostScriptName string     `json:"postScriptName,omitzero"`
	FileName       string     `json:"fileName"`
	File           StoredFile `json:"file"`
	CreatedAt      time.Time  `json:"createdAt"`
}

// Secret is an encrypted team value, referenced as ${secret.NAME}.
type Secret struct {
	ID         ulid.ULID `json:"id"`
	TeamID     ulid.ULID `json:"teamId"`
	Name       string    `json:"name"`
	Ciphertext []byte    `json:"ciphertext"`
	CreatedAt  time.Time `json:"createdAt"`
}

// SecretAAD binds a secret's sealed value to its team and name: a value copied to another
// secret's record does not open.
func SecretAAD(teamID ulid.ULID, name string) []byte { return []byte(teamID.String() + "/" + name) }

// Delivery is a webhook waiting in the outbox.
type Delivery struct {
	ID     ulid.ULID `json:"id"`
	JobID  ulid.ULID `json:"jobId"`
	TeamID ulid.ULID `json:"teamId"`
	// Attempt counts delivery attempts made so far.
	Attempt   int       `json:"attempt"`
	NextAt    time.Time `json:"nextAt"`
	LastError string    `json:"lastError,omitzero"`
	CreatedAt time.Time `json:"createdAt"`
}
