// Package protocol holds the messages a render node and the coordinator exchange. They cross
// processes inside one Envelope type (codec.go), so every field is plain data, and every report
// names the attempt it belongs to: the coordinator rejects reports from attempts it has moved
// past (fencing). Every message after the Welcome carries its session.
//
//	node                                   coordinator (gateway actor "framefarm-nodes")
//	Hello (no nonce) ───────────────────>  Challenge (nonce, single use, bound to the sender)
//	Hello (nonce, key proof, held) ─────>  Welcome (session, nonce, proof, lease, seq)
//	Heartbeat (attempts held, seq) ─────>  HeartbeatAck (known?, abandon these)
//	                           <─────────── Assign (session, seq, attempt, task)   [NodeActor]
//	Progress ───────────────────────────>  (no answer)
//	Done | Failed ──────────────────────>  FinalAck once the job's change is durable
//	                                         (the node resends with each heartbeat until then)
//	                           <─────────── Abandon (attempt withdrawn or no longer current)
//	Drain ──────────────────────────────>  (gives no new work)
//	Bye ────────────────────────────────>  Ack (left the farm)
//	anything of an unknown kind ────────>  Error
//
// Who may say what: across machines the actors endpoint (cluster/remoting) lets a node's
// messages reach only the coordinator and the coordinator's only nodes, by the role their
// certificates name, and tells the receiver who sent each message (PeerOf). A hello answers a
// fresh challenge with a proof of the cluster key, so a recorded hello is worthless; the welcome
// proves the coordinator holds the key too. Every later message in either direction carries the
// welcome's session, and a message without the current one changes nothing.
package protocol

import (
	"time"

	"github.com/framefarm/framefarm/renderer"
)

// Hello announces a node and what it can render; the coordinator answers with a Welcome. A
// node says Hello when it starts, when the coordinator (re)appears, and whenever a heartbeat
// answer says the coordinator does not know it.
type Hello struct {
	NodeID string `json:"nodeId"`
	// AgentAddress and AgentID name the node's actor, where assignments go.
	AgentAddress string `json:"agentAddress"`
	AgentID      string `json:"agentId"`
	// Incarnation changes at every start of the node process: a new incarnation has lost every
	// attempt the previous one ran.
	Incarnation string            `json:"incarnation"`
	Engines     []string          `json:"engines"`
	Slots       int               `json:"slots"`
	Version     string            `json:"version"`
	Labels      map[string]string `json:"labels,omitempty"`
	// RequireTags, when set, makes the node take only jobs tagged with every one of them.
	RequireTags []string `json:"requireTags,omitempty"`
	// Pools are the pools the node belongs to: a job naming a pool renders only on its nodes.
	Pools []string `json:"pools,omitempty"`
	// Running are the attempts the node still renders or has unacknowledged results for.
	Running []AttemptStatus `json:"running,omitempty"`
	// Nonce is the coordinator's challenge this hello answers; a hello without one asks for a
	// Challenge. KeyProof proves the node holds the cluster key (HelloProof).
	Nonce    string `json:"nonce,omitempty"`
	KeyProof string `json:"keyProof,omitempty"`
	Draining bool   `json:"draining,omitempty"`
	// Machine says what the node runs on, for its operators (nodes before it send none).
	Machine *Machine `json:"machine,omitempty"`
	// Fonts are the names (family and PostScript) of the fonts installed on the node's system,
	// at most MaxHelloFonts, each at most MaxFontName bytes (nodes before it send none).
	Fonts []string `json:"fonts,omitempty"`
}

// Bounds of a hello's fonts.
const (
	MaxHelloFonts = 4096
	MaxFontName   = 128
)

// Machine is what a render node runs on: its system, and the processors and memory it has
// (0 where the system does not say).
type Machine struct {
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	CPUs        int    `json:"cpus"`
	MemoryBytes int64  `json:"memoryBytes,omitempty"`
}

// Challenge answers a hello without a nonce: the node says hello again with this nonce and a
// proof of the cluster key over it. A nonce serves once, for a short while, and only the
// sender it was given to.
type Challenge struct {
	Nonce string `json:"nonce"`
}

// Sender says which node a message comes from and the session of its welcome: every message a
// node sends after its Hello embeds one, and the node fills it in as the message leaves.
type Sender struct {
	NodeID  string `json:"nodeId"`
	Session string `json:"session"`
}

// From returns the message's sender, to read or to fill in.
func (s *Sender) From() *Sender { return s }

// FromNode is a message a node sends after its Hello.
type FromNode interface{ From() *Sender }

// Welcome answers a Hello. Session is the token every later message in either direction
// carries: only a node that proved it holds the cluster key has one, so a message without it
// changes nothing.
type Welcome struct {
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason,omitempty"`
	Session  string `json:"session,omitempty"`
	// Nonce is the one of the hello this answers; Proof proves the coordinator holds the cluster
	// key (WelcomeProof). A node takes no welcome that answers no hello it sent.
	Nonce string `json:"nonce,omitempty"`
	Proof string `json:"proof,omitempty"`
	// InternalURL is the base of the coordinator's own file URLs: a source marked internal, and
	// the output's upload URL, must start with it.
	InternalURL string `json:"internalUrl,omitempty"`
	// HeartbeatInterval is how often the node must send a Heartbeat; Lease is how long the
	// coordinator waits for one before it declares the node lost and runs its attempts elsewhere.
	HeartbeatInterval time.Duration `json:"heartbeatInterval"`
	Lease             time.Duration `json:"lease"`
	// Seq is the last Assign sequence number sent to the node before this welcome: the node
	// counts on from it. The welcome is sent to the node's actor, so it arrives in order with
	// the assignments (a coordinator that restarted starts again from 0).
	Seq uint64 `json:"seq"`
}

// Heartbeat renews the node's lease on all its attempts.
type Heartbeat struct {
	Sender
	Incarnation string `json:"incarnation"`
	// Seq is the highest Assign sequence number the node has received, counted from its last
	// welcome's Seq.
	Seq     uint64          `json:"seq"`
	Running []AttemptStatus `json:"running,omitempty"`
}

// AttemptStatus is one attempt a node holds.
type AttemptStatus struct {
	JobID   string  `json:"jobId"`
	Attempt int     `json:"attempt"`
	Percent float64 `json:"percent"`
}

// HeartbeatAck answers a Heartbeat. Known false asks the node to say Hello again.
type HeartbeatAck struct {
	Known   bool      `json:"known"`
	Abandon []Abandon `json:"abandon,omitempty"`
}

// Abandon tells a node to stop an attempt and report nothing more of it: the job was withdrawn
// or the attempt is no longer the job's current one.
type Abandon struct {
	Session string `json:"session,omitempty"`
	JobID   string `json:"jobId"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
}

// Assign gives a node one attempt at one job. Seq numbers a node's assignments in the order the
// coordinator sent them, so a heartbeat tells which assignments it already accounts for.
type Assign struct {
	Session string `json:"session"`
	Seq     uint64 `json:"seq"`
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
	// Redact maps the names of the secrets the task carries to their values: the node never
	// reports them, and writes their references (${secret.NAME}) in their place.
	Redact map[string]string `json:"redact,omitempty"`
	// Chunk asks for one chunk of a split job: Settings.Frames as a lossless intermediate.
	Chunk bool `json:"chunk,omitempty"`
	// Chunks are a split job's finished chunks, in frame order, to join into its output; they
	// are the coordinator's files.
	Chunks []Source `json:"chunks,omitempty"`
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
	// Frames, for a chunk of a split job, is how many frames it holds: the join lays each at
	// its exact place on the timeline.
	Frames int `json:"frames,omitempty"`
}

// Font is a team font the render needs.
type Font struct {
	FileName string `json:"fileName"`
	Source   Source `json:"source"`
}

// Output says where the rendered file goes: the coordinator's store (a signed PUT URL) or the
// job's own S3 bucket.
type Output struct {
	Name string `json:"name"`
	// PutURL is the coordinator's signed URL the output is PUT to (its embedded object store).
	PutURL string `json:"putUrl,omitempty"`
	// S3 is the job's own bucket.
	S3 *S3Target `json:"s3,omitempty"`
	// PartSize, when set, puts the output in the farm's bucket: once it is made, the node asks
	// for an UploadPlan, in parts of PartSize bytes, and uploads it there itself.
	PartSize int64 `json:"partSize,omitempty"`
}

// UploadRequest asks the coordinator where to put an attempt's output in the farm's bucket: its
// size, its SHA-256 (hex), and the MD5 (base64) of each part of the output's PartSize bytes.
// The coordinator answers with an UploadPlan.
type UploadRequest struct {
	Sender
	JobID   string `json:"jobId"`
	Attempt int    `json:"attempt"`
	// Name is the output's file name, as its assignment gave it.
	Name    string   `json:"name"`
	Size    int64    `json:"size"`
	SHA256  string   `json:"sha256"`
	PartMD5 []string `json:"partMd5"`
}

// UploadPlan answers an UploadRequest: a presigned PUT per part, in order, each sent with its
// headers (the bucket refuses a part whose bytes do not match its MD5). UploadID names the
// multipart upload ("" for one part). Error, when set, says why there is no plan.
type UploadPlan struct {
	UploadID string       `json:"uploadId,omitempty"`
	Parts    []PartTarget `json:"parts,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// PartTarget is the presigned PUT of one part.
type PartTarget struct {
	URL    string            `json:"url"`
	Header map[string]string `json:"header,omitempty"`
}

// OutputReport tells the coordinator what a node uploaded to the farm's bucket: the output's
// size and SHA-256, and the ETag of each part of a multipart upload, which the coordinator
// completes before it checks the object is there.
type OutputReport struct {
	Size     int64    `json:"size"`
	SHA256   string   `json:"sha256"`
	UploadID string   `json:"uploadId,omitempty"`
	ETags    []string `json:"etags,omitempty"`
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

// Progress reports how far an attempt has come, with the log lines written since the last
// report (LogAt as in Done), so a render's log is seen while it runs.
type Progress struct {
	Sender
	JobID   string   `json:"jobId"`
	Attempt int      `json:"attempt"`
	Percent float64  `json:"percent"`
	Log     []string `json:"log,omitempty"`
	LogAt   []int64  `json:"logAt,omitempty"`
}

// Done reports an attempt whose output is stored.
type Done struct {
	Sender
	JobID   string `json:"jobId"`
	Attempt int    `json:"attempt"`
	// Size is the output's, in bytes.
	Size int64 `json:"size"`
	// Output is what was uploaded to the farm's bucket (Output.PartSize set).
	Output   *OutputReport `json:"output,omitempty"`
	Duration time.Duration `json:"duration"`
	Log      []string      `json:"log,omitempty"`
	// LogAt is when each Log line was written on the node, in Unix milliseconds (nodes before
	// it send none: their lines take the time the result is recorded).
	LogAt []int64 `json:"logAt,omitempty"`
}

// Failed reports an attempt that ended without output. Retryable failures may pass (the node is
// stopping, the render went silent, a store was out of reach) and the job may run again.
// NotStarted failures are refusals (no free slot, no such engine, draining): the attempt never
// began, so it counts against neither the job nor the node. Fault says whose failure it is.
type Failed struct {
	Sender
	JobID      string   `json:"jobId"`
	Attempt    int      `json:"attempt"`
	Error      string   `json:"error"`
	Retryable  bool     `json:"retryable"`
	NotStarted bool     `json:"notStarted,omitempty"`
	Fault      Fault    `json:"fault,omitempty"`
	Log        []string `json:"log,omitempty"`
	LogAt      []int64  `json:"logAt,omitempty"`
}

// Fault says whose a failed render is. Only FaultNode counts toward a node's quarantine: a job's
// bad input must never take a render node shared by other teams out of the farm.
type Fault string

const (
	// FaultJob: the job's input or content (a URL that fails, a file the engine refuses); it
	// would fail on any node. Nodes before Fault existed send "", read the same way.
	FaultJob Fault = ""
	// FaultNode: the node itself (its disk, an engine that cannot start or crashed, an output
	// that vanished, a render that went silent).
	FaultNode Fault = "node"
	// FaultFarm: the farm's own files out of reach (the coordinator's URLs, its object store).
	FaultFarm Fault = "farm"
)

// FinalAck tells a node the job's outcome of its Done or Failed is durable; until then the node
// resends it.
type FinalAck struct {
	Session string `json:"session,omitempty"`
	JobID   string `json:"jobId"`
	Attempt int    `json:"attempt"`
}

// SelfTest asks a node to render its engines' own small tests (renderer.SelfTester): the
// coordinator asks before it quarantines a node whose renders of different jobs failed in a row,
// which may be the jobs' fault rather than the node's. The node answers SelfTested.
type SelfTest struct {
	Session string   `json:"session"`
	Engines []string `json:"engines"`
}

// SelfTested answers a SelfTest: whether every engine's test passed, and if not, why.
type SelfTested struct {
	Sender
	Passed bool   `json:"passed"`
	Error  string `json:"error,omitempty"`
}

// Drain says a node takes no new work: it was told to stop (SIGTERM) and finishes what it holds.
type Drain struct {
	Sender
}

// Bye says a drained node leaves the farm; the coordinator keeps no lease for it.
type Bye struct {
	Sender
}

// Ack answers a message that needs no other answer (a Bye), so its sender knows it arrived.
type Ack struct {
	Kind string `json:"kind"`
}

// Error answers a message the receiver could not take (an unknown kind, a bad payload).
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}
