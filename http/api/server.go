// Package api serves the render job service's HTTP interface (v2) on fasthttp: templates, jobs,
// joins, batches, fonts, secrets, signed file URLs, health, metrics and the OpenAPI document.
package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/oklog/ulid/v2"
	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/persistence/s3store"
)

// Config tunes the API.
type Config struct {
	// MaxBodyBytes caps JSON request bodies [16 MiB].
	MaxBodyBytes int64
	// MaxTemplateBytes caps a template upload [2 GiB].
	MaxTemplateBytes int64
	// MaxFontBytes caps a font upload [40 MiB].
	MaxFontBytes int64
	// MaxOutputBytes caps a render output a node uploads [64 GiB].
	MaxOutputBytes int64
	// UploadURLTTL is how long a template upload URL stays valid [1h].
	UploadURLTTL time.Duration
	// DownloadURLTTL is how long output and template download URLs stay valid [168h].
	DownloadURLTTL time.Duration
	// RateLimit and RateBurst set each token's request budget [50/s, burst 200].
	RateLimit float64
	RateBurst int
	// AdminToken guards the admin routes; empty disables them.
	AdminToken string
	// LocalAdminToken also opens the admin routes: the token a server writes into its data
	// folder for commands run on its machine (framefarm token create while it runs).
	LocalAdminToken string
	// KeptAdminTokens are hashes of admin tokens the farm took before it was restored from a
	// backup (persistence.AdminTokenHash), which also open the admin routes.
	KeptAdminTokens []string
	// Limits bound job requests.
	Limits validate.Limits
	// RetryAfter is what 503 answers say while shutting down [5s].
	RetryAfter time.Duration
	// HeaderTimeout bounds the wait for each request's first byte and headers [10s];
	// RequestTimeout the reading of an API request's body and the writing of its answer [1m];
	// TransferTimeout the same for files under /files/ (uploads and downloads) [1h].
	HeaderTimeout, RequestTimeout, TransferTimeout time.Duration
	// MaxConnsPerIP caps the open connections from one address; 0 leaves them uncapped.
	MaxConnsPerIP int
	// MetricsToken, when set, is the bearer token /metrics asks for.
	MetricsToken string
	// MaxTemplatesInFlight caps a team's templates being downloaded or inspected [8];
	// MaxTeamTemplateBytes the bytes its template files hold [50 GiB].
	MaxTemplatesInFlight int
	MaxTeamTemplateBytes int64
}

func (c *Config) setDefaults() {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxBodyBytes, 16<<20)
	def(&c.MaxTemplateBytes, 2<<30)
	def(&c.MaxFontBytes, 40<<20)
	def(&c.MaxOutputBytes, 64<<30)
	def(&c.MaxTeamTemplateBytes, 50<<30)
	if c.MaxTemplatesInFlight <= 0 {
		c.MaxTemplatesInFlight = 8
	}
	if c.UploadURLTTL <= 0 {
		c.UploadURLTTL = time.Hour
	}
	if c.DownloadURLTTL <= 0 {
		c.DownloadURLTTL = 7 * 24 * time.Hour
	}
	if c.RateLimit <= 0 {
		c.RateLimit = 50
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.HeaderTimeout, 10 * time.Second}, {&c.RequestTimeout, time.Minute}, {&c.TransferTimeout, time.Hour}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if c.RateBurst <= 0 {
		c.RateBurst = 200
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = 5 * time.Second
	}
}

// Coordinator is what the API needs of the actors.
type Coordinator interface {
	CreateJobs(jobs []*persistence.Job, remember *persistence.Answer) error
	CreateBatch(b *persistence.Batch, jobs []*persistence.Job, remember *persistence.Answer) error
	CancelJobs(ids []ulid.ULID, by string) (*actors.CancelOutcome, error)
	StopJob(jobID ulid.ULID, by string) (*persistence.Job, error)
	RetagJob(jobID ulid.ULID, priority *int, tags *[]string, by string) (*persistence.Job, error)
	CancelBatch(id ulid.ULID, by string) (*actors.BatchCancelOutcome, error)
	CreateTemplate(tpl *persistence.Template) error
	RenameTemplate(teamID, id ulid.ULID, name string) (*persistence.Template, error)
	DeleteTemplate(teamID, id ulid.ULID) error
	UploadAwaited(tpl *persistence.Template, window int) error
	TemplateFileArrived(teamID, id ulid.ULID, window int, file persistence.StoredFile) (*persistence.Template, error)
	AddFont(f *persistence.Font, data []byte) (*persistence.Font, error)
	DeleteFont(teamID, fontID ulid.ULID) (*persistence.Font, error)
	AddSecret(teamID ulid.ULID, name, value string) (*persistence.Secret, error)
	DeleteSecret(teamID, secretID ulid.ULID) (*persistence.Secret, error)
	IssueToken(teamName string, expires time.Time, role persistence.TokenRole) (actors.IssuedToken, error)
	RevokeToken(tokenID string, team ulid.ULID) (*persistence.Token, error)
	CreateTeam(name string) (persistence.Team, bool, error)
	OpenTemplateReplacement(teamID, id ulid.ULID) (*persistence.Template, error)
	Capacities() map[string]actors.Capacity
	Nodes() []actors.NodeInfo
	InstalledFont(engine, name string) bool
	DrainNode(nodeID string) (actors.NodeInfo, error)
	ClearNode(nodeID string) (actors.NodeInfo, error)
	ForgetNode(nodeID string) error
	SetTeamPolicy(teamID ulid.ULID, change persistence.PolicyChange) (persistence.Team, error)
	TeamLoads() map[ulid.ULID]actors.TeamLoad
	SendAgain(jobID ulid.ULID, by string) (*persistence.Job, error)
	SetLimit(name string, count int) error
	DeleteLimit(name string) (*persistence.Limit, error)
	PoolCapacities() map[string]actors.Capacity
	LimitUses() map[string]actors.LimitUse
	WaitReasons() map[string]string
}

// Store is what the API reads of the store: its named reads.
type Store interface {
	Job(jobID ulid.ULID) (*persistence.Job, error)
	Jobs(ids []ulid.ULID) ([]*persistence.Job, error)
	TeamJob(teamID, jobID ulid.ULID) (*persistence.Job, error)
	TeamJobsExist(teamID ulid.ULID, ids []ulid.ULID) []bool
	ListJobs(q persistence.JobQuery) ([]*persistence.Job, int, error)
	JobLog(j *persistence.Job, now time.Time) string
	TeamBatch(teamID, batchID ulid.ULID) (*persistence.Batch, error)
	TeamBatches(teamID ulid.ULID, offset, limit int) ([]persistence.BatchSummary, error)
	BatchMembers(batchID ulid.ULID) ([]persistence.BatchMember, error)
	Template(teamID, templateID ulid.ULID) (*persistence.Template, error)
	Templates(teamID ulid.ULID) ([]*persistence.Template, error)
	TemplateUsage(teamID, except ulid.ULID) (persistence.TemplateUsage, error)
	Font(teamID, fontID ulid.ULID) (*persistence.Font, error)
	Fonts(teamID ulid.ULID) ([]*persistence.Font, error)
	Secrets(teamID ulid.ULID) ([]*persistence.Secret, error)
	Team(teamID ulid.ULID) (persistence.Team, error)
	Teams() ([]persistence.Team, error)
	TeamByName(name string) (persistence.Team, error)
	Waiting(teams []ulid.ULID) map[ulid.ULID]persistence.WaitingCounts
	Limits() ([]persistence.Limit, error)
	PlacementTags(scope ulid.ULID, engine, pool string) []string
	Usage(from, to time.Time, team ulid.ULID) ([]persistence.UsageRecord, error)
	Token(hash [32]byte) (*persistence.Token, error)
	RetryRequest(teamID, jobID ulid.ULID) (*persistence.JobRequest, error)
	Revocations() uint64
	Tokens() ([]persistence.TeamToken, error)
	ReadTeam(teamID ulid.ULID, fn func(persistence.TeamReads) error) error
	Forgotten(key string) bool
}

// Files is the object store as the API uses it: template uploads and outputs stream in, files
// stream out (or, in a bucket, are looked up before a redirect).
type Files interface {
	Put(key string, r io.Reader, limit int64) (persistence.StoredFile, error)
	Head(key string) (int64, error)
	Local(ctx context.Context, key string) (path string, release func(), err error)
}

// Presigner makes URLs clients download objects of a bucket from, valid until expires
// (s3store.Store).
type Presigner interface {
	DownloadURL(method, key string, expires time.Time) string
}

// bucketURLTTL is how long a presigned URL a /files/ URL redirects to stays good: a client uses
// it at once.
const bucketURLTTL = time.Hour

var (
	_ Coordinator = (*actors.Coordinator)(nil)
	_ Store       = (*persistence.Store)(nil)
	_ Files       = (*blobs.Store)(nil)
	_ Files       = (*s3store.Store)(nil)
	_ Presigner   = (*s3store.Store)(nil)
)

// RequestObserver records each request, for metrics.
type RequestObserver interface {
	ObserveRequest(route, method string, status int, d time.Duration)
}

// Deps are the API's collaborators.
type Deps struct {
	Coordinator Coordinator
	Store       Store
	Blobs       Files
	// Bucket, when the files live in a bucket, presigns the URLs /files/ redirects to.
	Bucket Presigner
	// URLs signs the URLs handed to clients.
	URLs     *blobs.Signer
	IDs      *persistence.IDs
	Clock    clock.Clock
	Logger   *slog.Logger
	Observer RequestObserver
	// Metrics serves /metrics.
	Metrics fasthttp.RequestHandler
	// Events streams job changes to dashboard viewers (GET /api/v2/events).
	Events *Hub
	// History is the farm's last hour (GET /api/v2/admin/history).
	History *FarmHistory
	// UI, when set, serves the dashboard under /ui/ (and / redirects there).
	UI, UIRedirect fasthttp.RequestHandler
	// Replicas, when the coordinator is one of several, says which answers what.
	Replicas Replicas
	// Backup, when set, writes backups of the farm (GET /api/v2/admin/backup).
	Backup Backup
}

// Server is the HTTP front end.
type Server struct {
	Deps
	cfg      Config
	log      *slog.Logger
	router   *router.Router
	http     *fasthttp.Server
	limiter  *rateLimiter
	tokens   sync.Map // sha256(token) -> cachedToken
	views    *JobViews
	draining atomic.Bool
	// routes lists every registered route, for the OpenAPI check.
	routes []Route
}

// Route is one registered method and path.
type Route struct{ Method, Path string }

// New builds the server and its routes.
func New(cfg Config, deps Deps) *Server {
	cfg.setDefaults()
	s := &Server{Deps: deps, cfg: cfg, log: deps.Logger, router: router.New()}
	s.views = &JobViews{URLs: deps.URLs, OutputTTL: cfg.DownloadURLTTL, Clock: deps.Clock,
		Capacities: func() map[string]actors.Capacity { return s.Coordinator.Capacities() },
		TeamLoads:  func() map[ulid.ULID]actors.TeamLoad { return s.Coordinator.TeamLoads() },
		Pools:      func() map[string]actors.Capacity { return s.Coordinator.PoolCapacities() },
		Limits:     func() map[string]actors.LimitUse { return s.Coordinator.LimitUses() },
		Waits:      func() map[string]string { return s.Coordinator.WaitReasons() }}
	s.limiter = newRateLimiter(cfg.RateLimit, float64(cfg.RateBurst), deps.Clock)
	s.routesV2()
	s.routesV3()
	s.http = &fasthttp.Server{
		Handler:                      s.router.Handler,
		Name:                         "framefarm",
		StreamRequestBody:            true,
		MaxRequestBodySize:           64 << 10, // bodies above this are streamed, and capped per route
		DisablePreParseMultipartForm: true,
		// ReadTimeout covers a request's first byte and headers; requestLimits then gives its
		// body (and its answer) the time its route needs.
		ReadTimeout:           s.cfg.HeaderTimeout,
		WriteTimeout:          s.cfg.RequestTimeout,
		HeaderReceived:        s.requestLimits,
		MaxConnsPerIP:         s.cfg.MaxConnsPerIP,
		IdleTimeout:           2 * time.Minute,
		NoDefaultServerHeader: true,
		CloseOnShutdown:       true,
		Logger:                slogPrinter{deps.Logger},
		ErrorHandler:          unreadable,
	}
	return s
}

// requestLimits gives file transfers under /files/, backups and event streams the long allowance
// and every other request the short one, once its headers are in.
func (s *Server) requestLimits(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	d := s.cfg.RequestTimeout
	if uri := h.RequestURI(); bytes.HasPrefix(uri, []byte("/files/")) || bytes.HasPrefix(uri, []byte(APIPrefix+"/events")) ||
		bytes.HasPrefix(uri, []byte(APIPrefix+"/admin/events")) || bytes.HasPrefix(uri, []byte(APIPrefix+"/admin/backup")) {
		d = s.cfg.TransferTimeout // file transfers, backups, and event streams (whose viewers reconnect after)
	}
	return fasthttp.RequestConfig{ReadTimeout: d, WriteTimeout: d}
}

// Routes lists every registered method and path.
func (s *Server) Routes() []Route { return s.routes }

// Handler answers one request, as Serve does.
func (s *Server) Handler() fasthttp.RequestHandler { return s.http.Handler }

// Serve answers requests on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.http.Serve(ln) }

// Drain makes API requests answer 503 with Retry-After; file transfers, health and metrics go
// on, so nodes can still upload the renders they finish.
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown stops accepting connections and waits for requests in flight.
func (s *Server) Shutdown(ctx context.Context) error { return s.http.ShutdownWithContext(ctx) }

// authKind says what a route requires.
type authKind int

const (
	authNone authKind = iota
	authTeam
	authAdmin
)

func (s *Server) handle(method, path string, auth authKind, h func(*request)) {
	s.routes = append(s.routes, Route{Method: method, Path: path})
	s.router.Handle(method, path, s.wrap(path, auth, placementOf(method, path), h))
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

func (s *Server) wrap(route string, auth authKind, place placement, h func(*request)) fasthttp.RequestHandler {
	api := strings.HasPrefix(route, "/api/")
	return func(ctx *fasthttp.RequestCtx) {
		started := time.Now()
		id := string(ctx.Request.Header.Peek("X-Request-Id"))
		if !requestIDPattern.MatchString(id) {
			id = newRequestID()
		}
		ctx.Response.Header.Set("X-Request-Id", id)
		r := &request{ctx: ctx, id: id, s: s}
		defer func() {
			if p := recover(); p != nil {
				r.logger().Error("handler panicked", "panic", p, "route", route)
				r.fail(newError(http.StatusInternalServerError, codeInternal, "internal error; the request id is in X-Request-Id"))
			}
			r.drainBody(s.cfg.MaxBodyBytes)
			status := ctx.Response.StatusCode()
			if s.Observer != nil {
				s.Observer.ObserveRequest(route, string(ctx.Method()), status, time.Since(started))
			}
			level := slog.LevelDebug
			if status >= 500 {
				level = slog.LevelWarn
			}
			if s.log.Enabled(context.Background(), level) {
				r.logger().Log(context.Background(), level, "request", "method", string(ctx.Method()), "route", route,
					"status", status, "duration_ms", float64(time.Since(started).Microseconds())/1000)
			}
		}()
		if api && s.draining.Load() {
			r.fail(&apiError{status: http.StatusServiceUnavailable, Code: codeUnavailable, Error: "the server is shutting down", retryAfter: int(s.cfg.RetryAfter.Seconds())})
			return
		}
		// Admin tokens come from each replica's configuration: checked where the request
		// arrived, and vouched for to the leader when it is handed on.
		if auth == authAdmin {
			if vouchedAdmin(r.ctx) {
				r.vouchedAsAdmin()
			} else if !s.authenticateAdmin(r) {
				return
			}
		}
		if !s.place(r, place) {
			return
		}
		if auth == authTeam && !s.authenticate(r) {
			return
		}
		h(r)
	}
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func bearer(ctx *fasthttp.RequestCtx) (string, bool) {
	h := string(ctx.Request.Header.Peek("Authorization"))
	token, ok := strings.CutPrefix(h, "Bearer ")
	token = strings.TrimSpace(token)
	return token, ok && token != ""
}

var errUnauthorized = newError(http.StatusUnauthorized, codeUnauthorized, "a valid API token is required: Authorization: Bearer <token>")

// authenticate resolves the request's token to its team and spends one unit of its rate budget.
func (s *Server) authenticate(r *request) bool {
	token, ok := bearer(r.ctx)
	if !ok {
		r.ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
		r.fail(errUnauthorized)
		return false
	}
	hash := persistence.HashToken(token)
	tok, err := s.token(hash)
	if err != nil || tok.Expired(s.Clock.Now()) {
		r.ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
		r.fail(errUnauthorized)
		return false
	}
	r.team, r.holder, r.role = tok.TeamID, Holder{Token: hash, Expires: tok.ExpiresAt}, tok.RoleOrDefault()
	r.log = nil // made again with the team when first used
	if r.role == persistence.RoleViewer && !reads(string(r.ctx.Method())) {
		r.fail(newError(http.StatusForbidden, codeForbidden, "this token is a viewer's: it reads and streams the team's work, and changes nothing"))
		return false
	}
	return s.limit(r, hash)
}

// mayChange reports whether the request's token may change the team's work: any but a viewer's.
func (r *request) mayChange() bool { return r.role != persistence.RoleViewer }

// reads reports whether a method only reads.
func reads(method string) bool { return method == http.MethodGet || method == http.MethodHead }

// token loads a token by its hash, through a cache that revocation empties: one through this
// server at once, any other (on another replica) once the store applied it. Each entry carries
// the store's count of revocations before it was read; once the count moves it is read again.
func (s *Server) token(hash [32]byte) (*persistence.Token, error) {
	revocations := s.Store.Revocations()
	if c, cached := s.tokens.Load(hash); cached && c.(cachedToken).revocations == revocations {
		return c.(cachedToken).tok, nil
	}
	tok, err := s.Store.Token(hash)
	if err != nil {
		return nil, err
	}
	s.tokens.Store(hash, cachedToken{tok: tok, revocations: revocations})
	return tok, nil
}

type cachedToken struct {
	tok         *persistence.Token
	revocations uint64
}

// vouchedAsAdmin takes the request as the admin's, as the replica that handed it on
// authenticated it (its rate budget spent there).
func (r *request) vouchedAsAdmin() {
	token, _ := bearer(r.ctx)
	r.holder, r.admin = Holder{Token: persistence.HashToken(token)}, true
}

// adminToken reports whether token is one of the admin's: the configuration's, the data
// folder's, or one the farm took before it was restored from a backup.
func (s *Server) adminToken(token string) bool {
	for _, admin := range []string{s.cfg.AdminToken, s.cfg.LocalAdminToken} {
		if admin != "" && subtle.ConstantTimeCompare([]byte(token), []byte(admin)) == 1 {
			return true
		}
	}
	hashed := []byte(persistence.AdminTokenHash(token))
	for _, kept := range s.cfg.KeptAdminTokens {
		if subtle.ConstantTimeCompare(hashed, []byte(kept)) == 1 {
			return true
		}
	}
	return false
}

func (s *Server) authenticateAdmin(r *request) bool {
	token, ok := bearer(r.ctx)
	if !ok {
		r.fail(errUnauthorized)
		return false
	}
	hash := persistence.HashToken(token)
	if s.adminToken(token) {
		r.holder, r.admin = Holder{Token: hash}, true
		return s.limit(r, hash)
	}
	if tok, err := s.token(hash); err != nil || tok.Expired(s.Clock.Now()) {
		r.fail(errUnauthorized)
		return false
	}
	r.fail(newError(http.StatusForbidden, codeForbidden, "this route needs the admin token from the server configuration"))
	return false
}

func (s *Server) limit(r *request, key [32]byte) bool {
	ok, wait := s.limiter.allow(key)
	if !ok {
		r.fail(&apiError{status: http.StatusTooManyRequests, Code: codeRateLimited, Error: "too many requests for this token",
			retryAfter: max(1, int(wait.Seconds()+0.999))})
	}
	return ok
}

// slogPrinter routes fasthttp's own messages to the structured log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Printf(format string, args ...any) {
	p.log.Warn("http server", "message", strings.TrimSpace(fmt.Sprintf(format, args...)))
}
