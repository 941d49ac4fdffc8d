// Package protocol holds the messages a render node and the coordinator's NodeActor exchange.
// They cross processes when nodes are remote, so every field is plain data and every report
// names the attempt it belongs to: the coordinator rejects reports from attempts it has moved
// past (fencing).
package protocol

import (
	"time"

	"github.com/framefarm/framefarm/renderer"
)

// Hello announces a node and what it can render.
type Hello struct {
	NodeID  string            `json:"nodeId"`
	Engines []string          `json:"engines"`
	Slots   int               `json:"slots"`
	Version string            `json:"version"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// Assign gives a node one attempt at one job.
type Assign struct {
	JobID   string `json:"jobId"`
	Attempt int    `json:"attempt"`
	Task    Task   `json:"task"`
}

// Task is a job as a node sees it: every reference resolved to something it can fetch, every
// secret already substituted.
type Task struct {
	Engine       string            `json:"engine"`
	Template     *Source           `json:"template,omitempty"`
	TemplateType string            `json:"templateType,omitempty"`
	Composition  string            `json:"composition,omitempty"`
	Assets       []Asset           `json:"assets"`
	Settings     renderer.Settings `json:"settings"`
	Preview      bool              `json:"preview,omitempty"`
	Fonts        []Font            `json:"fonts,omitempty"`
	Output       Output            `json:"output"`
	// SilenceTimeout stops a render that reports no progress for this long.
	SilenceTimeout time.Duration `json:"silenceTimeout"`
	// MaxDuration stops a render that runs longer than this.
	MaxDuration time.Duration `json:"maxDuration"`
}

// Asset is a job asset with its source resolved. Internal assets come from the coordinator's
// store (a finished child job's output); the others' src came from users.
type Asset struct {
	renderer.Asset
	Internal bool `json:"internal,omitempty"`
}

// Source is a file a node downloads. Internal sources are the coordinator's own signed URLs;
// others came from users and pass the private-address guard.
type Source struct {
	URL      string `json:"url"`
	SHA256   string `json:"sha256,omitempty"`
	Internal bool   `json:"internal,omitempty"`
}

// Font is a team font the render needs.
type Font struct {
	FileName string `json:"fileName"`
	Source   Source `json:"source"`
}

// Output says where the rendered file goes: the coordinator's store (a signed PUT URL) or the
// job's own S3 bucket.
type Output struct {
	Name   string    `json:"name"`
	PutURL string    `json:"putUrl,omitempty"`
	S3     *S3Target `json:"s3,omitempty"`
}

// S3Target is an object in an S3-compatible bucket.
type S3Target struct {
	Endpoint        string `json:"endpoint,omitempty"`
	Region          string `json:"region"`
	Bucket          string `json:"bucket"`
	Key             string `json:"key"`
	ACL             string `json:"acl,omitempty"`
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
}

// Progress reports how far an attempt has come.
type Progress struct {
	JobID   string  `json:"jobId"`
	Attempt int     `json:"attempt"`
	Percent float64 `json:"percent"`
}

// Done reports an attempt whose output is stored.
type Done struct {
	JobID    string        `json:"jobId"`
	Attempt  int           `json:"attempt"`
	Size     int64         `json:"size"`
	Duration time.Duration `json:"duration"`
	Log      []string      `json:"log,omitempty"`
}

// Failed reports an attempt that ended without output. Retryable failures say nothing about the
// job (the node is stopping, the render went silent) and the job may run again.
type Failed struct {
	JobID     string   `json:"jobId"`
	Attempt   int      `json:"attempt"`
	Error     string   `json:"error"`
	Retryable bool     `json:"retryable"`
	Log       []string `json:"log,omitempty"`
}
