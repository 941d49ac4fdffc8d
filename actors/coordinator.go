// Package actors drives every job, batch and render node of the coordinator as a Proto.Actor
// actor. Messages are the state transitions (STATE_MACHINE.md); the actor that owns a job is the
// only writer of its state, so a cancel racing a dispatch has exactly one winner. Where rules are
// dense they are kept apart from effects: a job's in the job book (job_book.go), a node link's in
// the lease book (lease_book.go); each returns what to do, and its actor does it. The
// Coordinator runs the actors for a term: a farm alone for its life, a replica while it leads.
//
//	POST /jobs ──> intake ──CreateJobs──> store (group commit) ──ack──> handler
//	                 └──queue──> Scheduler ──offer──> JobActor(id), activated from the store
//	                                ▲    ◀──claim──      │ ▲ progress, done, failed
//	                                │                    ▼ │ (fenced by attempt)
//	                                └──slot──── NodeActor(node) ──assign──> node's agent
//	cancel, stop, retry, retag ──ask──> JobActor(id) ──persist──> store ──> answer
//	BatchActor(id): creates a batch's jobs in one write; cancels them through a cascade walk.
//	sweeper: ends a split job's chunks in the background, a step at a time.
//	TemplateProcessor: upload or download -> inspect -> uploaded | error.
//	WebhookDispatcher: durable outbox -> HTTP delivery with retries.
package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/persistence/s3store"
	"github.com/framefarm/framefarm/persistence/secretbox"
	"github.com/framefarm/framefarm/renderer"
)

// Config tunes the coordinator's actors. Zero values select the defaults in brackets.
type Config struct {
	// MaxAttempts is how many attempts may fail or be lost before a job fails [3].
	MaxAttempts int
	// ProgressInterval is the most often a rendering job's progress is persisted [1s].
	ProgressInterval time.Duration
	// PassivateAfter is how long a job's actor stays idle before it stops [2s].
	PassivateAfter time.Duration
	// SilenceTimeout stops a render that reports no progress for this long [10m].
	SilenceTimeout time.Duration
	// MaxRenderTime stops a render that runs longer than this [24h].
	MaxRenderTime time.Duration
	// AskTimeout bounds a request's wait for an actor's answer [30s].
	AskTimeout time.Duration
	// WebhookBackoff are the waits before each retry of a failed webhook [1s 4s 16s].
	WebhookBackoff []time.Duration
	// WebhookTimeout bounds one webhook delivery [10s].
	WebhookTimeout time.Duration
	// WebhookConcurrency caps deliveries in flight [16].
	WebhookConcurrency int
	// NodeURLTTL is how long signed URLs handed to render nodes stay valid [24h].
	NodeURLTTL time.Duration
	// TemplateMaxBytes caps a template file fetched from a src URL [2 GiB].
	TemplateMaxBytes int64
	// TemplateDownloadTimeout bounds the fetch of a template's src [30m].
	TemplateDownloadTimeout time.Duration
	// TemplateWorkers is how many template downloads and inspections run at once [2].
	TemplateWorkers int
	// InspectBeforeAnswerBytes: an upload up to this size is answered once its inspection
	// ended, or after InspectBeforeAnswerWait with the template still processing [16 MiB, 10s].
	InspectBeforeAnswerBytes int64
	InspectBeforeAnswerWait  time.Duration
	// MaxTeamTemplateBytes caps the bytes a team's template files hold [50 GiB].
	MaxTeamTemplateBytes int64
	// HeartbeatInterval is how often render nodes send a heartbeat [1s].
	HeartbeatInterval time.Duration
	// NodeLease is how long a node may go without a heartbeat before it is lost and its attempts
	// run elsewhere [5s].
	NodeLease time.Duration
	// NodeFailureLimit is how many renders of different jobs may fail in a row on one node before
	// it runs its self-test, which quarantines it until an operator clears it if it fails [3];
	// NodeSelfTestTimeout how long the self-test may take [5m].
	NodeFailureLimit    int
	NodeSelfTestTimeout time.Duration
	// ClusterKey is the key nodes prove they hold when they join (empty: no proof asked).
	ClusterKey []byte
	// AdoptAfterRestart lets nodes that outlive a coordinator restart keep the renders they
	// hold (remote nodes); without it those renders are queued again at once.
	AdoptAfterRestart bool
	// AdoptWindow is how long, after the start, a render's node has to reclaim it [a lease and
	// a heartbeat].
	AdoptWindow time.Duration
	// Takeover says this coordinator takes the farm over from another replica: the renders that
	// change interrupted never count as failed attempts.
	Takeover bool
	// MaxOutputBytes caps an output a node puts in the farm's bucket [64 GiB].
	MaxOutputBytes int64
	// StorageRetry is how long a job whose attempt the farm's own storage failed waits before
	// it is queued again, doubling with each further such attempt up to 32 times [15s].
	StorageRetry time.Duration
}

func (c *Config) setDefaults() {
	setDefault(&c.MaxAttempts, 3)
	setDefault(&c.ProgressInterval, time.Second)
	setDefault(&c.PassivateAfter, 2*time.Second)
	setDefault(&c.SilenceTimeout, 10*time.Minute)
	setDefault(&c.MaxRenderTime, 24*time.Hour)
	setDefault(&c.AskTimeout, 30*time.Second)
	if len(c.WebhookBackoff) == 0 {
		c.WebhookBackoff = []time.Duration{time.Second, 4 * time.Second, 16 * time.Second}
	}
	setDefault(&c.WebhookTimeout, 10*time.Second)
	setDefault(&c.WebhookConcurrency, 16)
	setDefault(&c.NodeURLTTL, 24*time.Hour)
	setDefault(&c.TemplateMaxBytes, 2<<30)
	setDefault(&c.TemplateDownloadTimeout, 30*time.Minute)
	setDefault(&c.TemplateWorkers, 2)
	setDefault(&c.InspectBeforeAnswerBytes, 16<<20)
	setDefault(&c.InspectBeforeAnswerWait, 10*time.Second)
	setDefault(&c.MaxTeamTemplateBytes, 50<<30)
	setDefault(&c.HeartbeatInterval, time.Second)
	setDefault(&c.NodeLease, 5*time.Second)
	setDefault(&c.NodeFailureLimit, 3)
	setDefault(&c.NodeSelfTestTimeout, 5*time.Minute)
	setDefault(&c.AdoptWindow, c.NodeLease+c.HeartbeatInterval)
	setDefault(&c.MaxOutputBytes, 64<<30)
	setDefault(&c.StorageRetry, 15*time.Second)
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Deps are the coordinator's collaborators; each is asked for no more than the actors use.
type Deps struct {
	Store Store
	// Objects is the farm's object store: template files, fonts, outputs.
	Objects Objects
	// Uploads, when set, plans the uploads of outputs straight to the object store (a bucket);
	// without it nodes upload outputs to NodeURLs.
	Uploads OutputUploads
	// NodeURLs signs the URLs render nodes fetch from and upload to.
	NodeURLs URLSigner
	// ClientURLs recognizes the farm's file URLs handed to clients, when jobs name them.
	ClientURLs OwnURLs
	Secrets    SecretBox
	Inspector  renderer.Inspector
	Clock      clock.Clock
	IDs        IDs
	// Events carries what the actors do to those who watch (metrics, the dashboard).
	Events *Events
	Logger *slog.Logger
	// Outbound sends webhooks and fetches template src URLs; it refuses private addresses unless
	// configured otherwise.
	Outbound *http.Client
	// WebhookBody renders a job as GET /jobs/{id} shows it, with the webhook's data.
	WebhookBody func(job *persistence.Job, data json.RawMessage) ([]byte, error)
	// StillLeads, for a replica, makes sure it still leads before what a write does not fence
	// (a webhook's request); nil: a coordinator alone always does.
	StillLeads func() bool
}

// Store is the database as the actors use it (persistence.Store): named reads, and commands
// applied in group commits, waited for or answered later.
type Store interface {
	Job(jobID ulid.ULID) (*persistence.Job, error)
	Jobs(ids []ulid.ULID) ([]*persistence.Job, error)
	QueuedJobs(fn func(persistence.QueueEntry) error) error
	JobsIn(state persistence.JobState, fn func(*persistence.Job) error) error
	BatchExists(batchID ulid.ULID) bool
	BatchJobs(batchID ulid.ULID) []persistence.BatchJob
	Deliveries() ([]*persistence.Delivery, error)
	Template(teamID, templateID ulid.ULID) (*persistence.Template, error)
	AllTemplates(fn func(*persistence.Template) error) error
	TemplateUsage(teamID, except ulid.ULID) (persistence.TemplateUsage, error)
	Teams() ([]persistence.Team, error)
	Limits() ([]persistence.Limit, error)
	Meta(name string) string
	MetaPrefixed(prefix string) map[string]string
	ReadTeam(teamID ulid.ULID, fn func(persistence.TeamReads) error) error
	Apply(c persistence.Command) error
	ApplyAsync(c persistence.Command, done func(error))
	// LatestWaits is why each engine's jobs could not start, as last recorded.
	LatestWaits() map[string]string
}

// Objects is the farm's object store as the actors use it (blobs.Store, s3store.Store).
type Objects interface {
	Put(key string, r io.Reader, limit int64) (persistence.StoredFile, error)
	// Head is the size of the object at key; persistence.ErrNotFound when there is none.
	Head(key string) (int64, error)
	// Local gives a file of the object on this machine (its own, or a copy) until release.
	Local(ctx context.Context, key string) (path string, release func(), err error)
	Delete(key string) error
	DeletePrefix(prefix string) error
}

// ErrObjectStore marks a failure of the farm's object store (out of reach, refusing): what
// failed for it may work once it answers again.
var ErrObjectStore = errors.New("the object store failed")

// OutputUploads plans the uploads of render outputs straight to the object store (s3store.Store).
type OutputUploads interface {
	// PartSize is the size of each part of an upload above it.
	PartSize() int64
	PlanUpload(ctx context.Context, key string, md5s []string, expires time.Time) (s3store.UploadPlan, error)
	CompleteUpload(ctx context.Context, key, uploadID string, etags []string) error
}

// URLSigner signs the URLs of stored objects for render nodes.
type URLSigner interface {
	URL(method, key string, expires time.Time) string
	// Base is what every URL it signs starts with.
	Base() string
}

// SecretBox seals and opens team secrets (secretbox.Box).
type SecretBox interface {
	Seal(plain, additional []byte) []byte
	Open(sealed, additional []byte) ([]byte, error)
}

// IDs makes record ids (persistence.IDs).
type IDs interface {
	New(t time.Time) ulid.ULID
}

var (
	_ Store         = (*persistence.Store)(nil)
	_ Objects       = (*blobs.Store)(nil)
	_ Objects       = (*s3store.Store)(nil)
	_ OutputUploads = (*s3store.Store)(nil)
	_ URLSigner     = (*s3store.Store)(nil)
	_ OwnURLs       = (*blobs.Signer)(nil)
	_ URLSigner     = (*blobs.Signer)(nil)
	_ SecretBox     = (*secretbox.Box)(nil)
	_ IDs           = (*persistence.IDs)(nil)
)

// Coordinator runs the farm's actors and is what the HTTP layer, the metrics and the history talk
// to. A process makes one, which runs terms: a farm alone runs one from Start to Stop; a replica
// one each time it leads, and between them it follows: every command then answers ErrNotLeading
// and every look finds nothing.
type Coordinator struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	// now is the running term (nil: following, or not started).
	now atomic.Pointer[term]
}

// ErrNotLeading is the answer of a coordinator that runs no term: a replica that follows (the API
// answers 503: send it again, to the leader).
var ErrNotLeading = fmt.Errorf("%w: this replica does not lead", persistence.ErrNotReplicated)

// leading is the running term, or ErrNotLeading.
func (c *Coordinator) leading() (*term, error) {
	if t := c.now.Load(); t != nil {
		return t, nil
	}
	return nil, ErrNotLeading
}

// term is one run of the actors, from Start to Stop. It owns the actor system and the farm's
// shared parts; each actor is given the few parts it uses (a world of its own, in its file),
// never the term.
type term struct {
	cfg    Config
	deps   Deps
	log    *slog.Logger
	system *actor.ActorSystem
	// addr holds the long-lived actors' addresses, known once Start spawned them.
	addr      *addresses
	jobs      *jobDirectory
	batches   *registry
	intake    *intake
	walks     *cancelWalks
	nodes     *nodeDirectory
	adoptions *adoptionBook
	secrets   *secretReader
	tasks     *taskBuilder
	capacity  capacitySnapshot
	loads     teamLoadSnapshot
	pools     poolSnapshot
	limitUses limitSnapshot
	waits     waitSnapshot
	// worlds of the actors Start spawns and of those activated on demand.
	jobWorld   *jobWorld
	batchWorld *batchWorld
	nodeWorld  *nodeWorld
}

// addresses are the long-lived actors every other one may tell something.
type addresses struct {
	scheduler, gateway, webhooks, templates, sweeper *actor.PID
}

// service is the address of a service a job tells.
func (a *addresses) service(s service) *actor.PID {
	switch s {
	case serviceScheduler:
		return a.scheduler
	case serviceSweeper:
		return a.sweeper
	default:
		return a.webhooks
	}
}

// New builds a coordinator; Start brings a term up.
func New(cfg Config, deps Deps) *Coordinator {
	cfg.setDefaults()
	if deps.Events == nil {
		deps.Events = &Events{}
	}
	return &Coordinator{cfg: cfg, deps: deps, log: deps.Logger}
}

// newTerm makes the actor system and parts of a term; nothing runs yet.
func newTerm(cfg Config, deps Deps) *term {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return deps.Logger.With("component", "protoactor")
	}))
	c := &term{cfg: cfg, deps: deps, log: deps.Logger, system: system, addr: &addresses{},
		nodes: newNodeDirectory(), adoptions: newAdoptionBook()}
	idle := idleRule{clock: deps.Clock, after: cfg.PassivateAfter, root: system.Root}
	rules := jobRules{progressInterval: cfg.ProgressInterval, maxAttempts: cfg.MaxAttempts, storageRetry: cfg.StorageRetry,
		adoptAfterRestart: cfg.AdoptAfterRestart, adoptWindow: cfg.AdoptWindow, takeover: cfg.Takeover, farmUploads: deps.Uploads != nil}
	c.jobWorld = &jobWorld{rules: rules, store: deps.Store, clock: deps.Clock, ids: deps.IDs, events: deps.Events, log: deps.Logger,
		root: system.Root, addr: c.addr, adoptions: c.adoptions, idle: idle}
	c.jobs = &jobDirectory{registry: newRegistry(system, c.jobWorld.load), log: deps.Logger}
	c.walks = &cancelWalks{root: system.Root, jobs: c.jobs, log: deps.Logger}
	c.secrets = &secretReader{store: deps.Store, box: deps.Secrets, log: deps.Logger}
	c.tasks = &taskBuilder{cfg: cfg, clock: deps.Clock, store: deps.Store, secrets: c.secrets, urls: deps.NodeURLs, uploads: deps.Uploads,
		own: deps.ClientURLs}
	c.intake = &intake{store: deps.Store, clock: deps.Clock, events: deps.Events, root: system.Root, addr: c.addr}
	c.jobWorld.jobs, c.jobWorld.walks, c.jobWorld.secrets, c.jobWorld.nodes = c.jobs, c.walks, c.secrets, c.nodes
	c.jobWorld.outputs = &outputStore{objects: deps.Objects, uploads: deps.Uploads, clock: deps.Clock}
	c.batchWorld = &batchWorld{store: deps.Store, intake: c.intake, walks: c.walks, root: system.Root, idle: idle}
	c.batches = newRegistry(system, c.batchWorld.load)
	c.batchWorld.batches = c.batches
	c.nodeWorld = &nodeWorld{cfg: cfg, store: deps.Store, clock: deps.Clock, events: deps.Events, log: deps.Logger,
		root: system.Root, addr: c.addr, jobs: c.jobs, adoptions: c.adoptions, tasks: c.tasks, nodes: c.nodes, urls: deps.NodeURLs,
		uploads: deps.Uploads}
	return c
}

// Config returns the effective configuration.
func (c *Coordinator) Config() Config { return c.cfg }

const metaCleanShutdown = "clean_shutdown"

// Start begins a term: it spawns the scheduler, template processor and webhook dispatcher, then
// resumes every job that was not terminal when the previous term or process stopped: queued
// jobs into the scheduler's queue, pending parents and interrupted renders into actors. Commands
// reach the term once it is up.
func (c *Coordinator) Start() error {
	if c.now.Load() != nil {
		return errors.New("the coordinator runs a term already")
	}
	t := newTerm(c.cfg, c.deps)
	if err := t.start(); err != nil {
		t.system.Shutdown()
		return err
	}
	c.now.Store(t)
	return nil
}

func (c *term) start() error {
	store := c.deps.Store
	previous := store.Meta(metaCleanShutdown) // "" before the first start
	c.jobWorld.rules.cleanRestart = previous == "1"
	if err := store.Apply(&persistence.SetMeta{Name: metaCleanShutdown, Value: "0"}); err != nil {
		return err
	}
	teams, err := store.Teams()
	if err != nil {
		return fmt.Errorf("read the teams: %w", err)
	}
	policies := make(map[ulid.ULID]persistence.TeamPolicy, len(teams))
	for _, team := range teams {
		policies[team.ID] = team.Policy
	}
	limits, err := store.Limits()
	if err != nil {
		return fmt.Errorf("read the limits: %w", err)
	}
	root := c.system.Root
	c.addr.scheduler = root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return newScheduler(schedulerDeps{clock: c.deps.Clock, jobs: c.jobs, log: c.log, published: &c.capacity, loads: &c.loads,
			store: store, events: c.deps.Events, waits: store.LatestWaits(), teams: policies, limits: limits,
			poolsPublished: &c.pools, limitsPublished: &c.limitUses, waitsPublished: &c.waits})
	}))
	scheduler := c.addr.scheduler
	c.addr.sweeper = root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &sweeper{jobs: c.jobs, store: store, scheduler: scheduler, log: c.log}
	}))
	c.deps.Clock.AfterFunc(c.cfg.AdoptWindow, func() { root.Send(scheduler, &judgeWaits{}) })
	c.addr.gateway, err = root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &nodeGateway{w: c.nodeWorld, challenges: newChallengeBook(), refusals: clock.Throttle{Period: 10 * time.Second}}
	}), GatewayName)
	if err != nil {
		return fmt.Errorf("node gateway: %w", err)
	}
	c.addr.webhooks = root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return newWebhookDispatcher(webhookWorld{cfg: c.cfg, store: store, clock: c.deps.Clock, events: c.deps.Events, log: c.log,
			root: root, outbound: c.deps.Outbound, secrets: c.secrets, body: c.deps.WebhookBody, stillLeads: c.deps.StillLeads})
	}))
	c.addr.templates = root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return newTemplateProcessor(templateWorld{cfg: c.cfg, store: store, objects: c.deps.Objects, inspector: c.deps.Inspector,
			clock: c.deps.Clock, ids: c.deps.IDs, events: c.deps.Events, log: c.log, root: root, outbound: c.deps.Outbound})
	}))
	// The queue comes back from the live-jobs index alone; only pending parents and interrupted
	// renders get actors (and records) now.
	queued := &queueRestore{root: root, scheduler: c.addr.scheduler, ask: c.cfg.AskTimeout}
	var resume []*persistence.Job
	err = store.QueuedJobs(queued.add)
	for _, s := range []persistence.JobState{persistence.JobPending, persistence.JobRendering} {
		if err == nil {
			err = store.JobsIn(s, func(j *persistence.Job) error {
				resume = append(resume, j)
				return nil
			})
		}
	}
	if err == nil {
		// What renders now holds its limits before the last of the queue lets anything start.
		held := map[ulid.ULID][]string{}
		for _, j := range resume {
			if j.State == persistence.JobRendering && len(j.Limits) > 0 {
				held[j.ID] = j.Limits
			}
		}
		if len(held) > 0 {
			root.Send(c.addr.scheduler, &limitsHeld{jobs: held})
		}
		err = queued.finish()
	}
	if err != nil {
		return fmt.Errorf("resume jobs: %w", err)
	}
	resumeSweeps(store, root, c.addr.sweeper)
	for _, j := range resume {
		if j.State == persistence.JobRendering && c.cfg.AdoptAfterRestart {
			// Offered before any node can reach this process, so none says hello too early.
			c.adoptions.offer(j.ID, adoptable{attempt: j.Attempts, node: j.Node, team: j.TeamID})
		}
		c.jobs.activate(j.ID, c.jobWorld.producer(j, true))
	}
	switch {
	case previous == "":
		c.log.Info("coordinator started for the first time on this store")
	case c.jobWorld.rules.cleanRestart:
		c.log.Info("coordinator started", "queued_jobs", queued.total, "resumed_jobs", len(resume), "previous_stop", "clean")
	default:
		c.log.Info("coordinator started", "queued_jobs", queued.total, "resumed_jobs", len(resume),
			"previous_stop", "interrupted (the renders it cut short count as failed attempts)")
	}
	return nil
}

// restoreChunk is how many queued jobs a start hands the scheduler at a time.
const restoreChunk = 4096

// queueRestore hands the queued jobs read at a start to the scheduler in chunks, so a
// campaign's million queued jobs never sit in one slice beside the queue built from them. At most
// two chunks are out at once: the store is read while the scheduler queues the chunk before.
type queueRestore struct {
	root      *actor.RootContext
	scheduler *actor.PID
	ask       time.Duration
	chunk     []persistence.QueueEntry
	taking    *actor.Future // the scheduler's answer for the chunk sent last
	total     int
}

func (r *queueRestore) add(e persistence.QueueEntry) error {
	if r.chunk == nil {
		r.chunk = make([]persistence.QueueEntry, 0, restoreChunk)
	}
	if r.chunk = append(r.chunk, e); len(r.chunk) < restoreChunk {
		return nil
	}
	return r.send(true)
}

// send hands over the chunk gathered; more says that others follow.
func (r *queueRestore) send(more bool) error {
	if err := r.wait(); err != nil {
		return err
	}
	r.total += len(r.chunk)
	r.taking = r.root.RequestFuture(r.scheduler, &jobsQueued{entries: r.chunk, restoring: more}, r.ask)
	r.chunk = nil
	return nil
}

func (r *queueRestore) wait() error {
	if r.taking == nil {
		return nil
	}
	_, err := r.taking.Result()
	r.taking = nil
	return err
}

// finish hands over the last chunk and waits until the scheduler has queued every job.
func (r *queueRestore) finish() error {
	if err := r.send(false); err != nil {
		return err
	}
	return r.wait()
}

// Stop ends the term: commands answer ErrNotLeading from now on, and the actors stop in order:
// the node gateway and the scheduler first (no node reports taken, no new dispatches), then the
// template processor and the webhook dispatcher (unfinished work stays in the store and resumes
// at the next start), and finally the term records that it ended cleanly. The caller stops HTTP
// intake and render nodes before, and closes the store after.
func (c *Coordinator) Stop(context.Context) {
	if t := c.now.Swap(nil); t != nil {
		t.stop()
	}
}

func (c *term) stop() {
	for _, pid := range []*actor.PID{c.addr.gateway, c.addr.scheduler, c.addr.templates, c.addr.webhooks} {
		if err := c.system.Root.StopFuture(pid).Wait(); err != nil {
			c.log.Warn("actor did not stop cleanly", "pid", pid.String(), "err", err)
		}
	}
	if err := c.deps.Store.Apply(&persistence.SetMeta{Name: metaCleanShutdown, Value: "1"}); err != nil {
		c.log.Error("cannot record the clean shutdown", "err", err)
	}
	c.system.Shutdown()
}

// LiveJobActors counts the job actors in memory.
func (c *Coordinator) LiveJobActors() int {
	if t := c.now.Load(); t != nil {
		return t.jobs.live()
	}
	return 0
}

// ErrUnavailable is returned when an actor did not answer in time.
var ErrUnavailable = errors.New("the coordinator did not answer in time")

// CreateJobs stores new jobs (each with its children) in one durable write, then queues them.
// Until that write the jobs have no owner; from then on their actors are their only writers.
// remember (nil without an Idempotency-Key) keeps the request's answer in the same write; a key
// answered before fails with *persistence.AnsweredError and creates nothing.
func (c *Coordinator) CreateJobs(jobs []*persistence.Job, remember *persistence.Answer) error {
	t, err := c.leading()
	if err != nil {
		return err
	}
	result := make(chan error, 1)
	t.intake.write(nil, jobs, remember, func(err error) { result <- err })
	if err := <-result; err != nil {
		return err
	}
	t.intake.start(jobs)
	return nil
}

// intake stores new jobs and queues them.
type intake struct {
	store interface {
		ApplyAsync(persistence.Command, func(error))
	}
	clock  clock.Clock
	events *Events
	root   *actor.RootContext
	addr   *addresses
}

// write submits the first write of new jobs (and of their batch when b is not nil); done is
// called once it is durable or has failed (persistence.ErrTemplateGone when a job's template was
// deleted since validation: jobs must not outlive it).
func (in *intake) write(b *persistence.Batch, jobs []*persistence.Job, remember *persistence.Answer, done func(error)) {
	in.store.ApplyAsync(&persistence.CreateJobs{At: in.clock.Now(), Batch: b, Jobs: jobs, Remember: remember}, done)
}

// start queues the jobs whose first write is durable. They get actors only when something
// happens to them: pending parents when a child ends, queued jobs when offered a slot.
func (in *intake) start(jobs []*persistence.Job) {
	queued := make([]persistence.QueueEntry, 0, len(jobs))
	for _, j := range jobs {
		in.events.JobStateChanged.Publish(JobStateChanged{Job: j.ID, To: j.State, Chunk: j.Kind == persistence.KindChunk})
		if j.State == persistence.JobQueued {
			queued = append(queued, j.QueueEntry())
		}
	}
	if len(queued) > 0 {
		in.root.Send(in.addr.scheduler, &jobsQueued{entries: queued})
	}
}

// tellScheduler sends the term's scheduler a message.
func (c *term) tellScheduler(msg any) { c.system.Root.Send(c.addr.scheduler, msg) }
