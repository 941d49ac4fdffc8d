package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/membership"
	"github.com/framefarm/framefarm/cluster/node"
	"github.com/framefarm/framefarm/cluster/relay"
	"github.com/framefarm/framefarm/cluster/replicas"
	"github.com/framefarm/framefarm/http/api"
	"github.com/framefarm/framefarm/http/metrics"
	"github.com/framefarm/framefarm/http/outbound"
	"github.com/framefarm/framefarm/http/ui"
	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/persistence/secretbox"
	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/lottie"
	"github.com/valyala/fasthttp"
)

// serveConfig reads serve's flags over the configuration file.
func serveConfig(args []string, stdout io.Writer) (Config, error) {
	fs := commandFlags("serve")
	configPath := fs.String("config", "", "configuration file (TOML)")
	dataDir := fs.String("data-dir", "", "data directory (database, files, keys)")
	listen := fs.String("listen", "", "HOST:PORT to serve on (default 127.0.0.1:8080)")
	publicURL := fs.String("public-url", "", "base of every URL handed out (default from --listen)")
	localSlots := fs.Int("local-slots", 0, "renders the embedded node runs at once; 0 = no embedded node")
	allowPrivate := fs.Bool("allow-private-urls", false, "let webhooks and downloads reach loopback and private addresses")
	if err := parseFlags(fs, stdout, args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return cfg, err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "data-dir":
			cfg.Server.DataDir = *dataDir
		case "listen":
			cfg.Server.Listen = *listen
		case "public-url":
			cfg.Server.PublicURL = *publicURL
		case "local-slots":
			cfg.Node.LocalSlots = *localSlots
		case "allow-private-urls":
			cfg.Server.AllowPrivateURLs = *allowPrivate
		}
	})
	return cfg, cfg.check()
}

// serve runs the coordinator until ctx ends: it builds the farm (every part wired as it is made),
// then runs its services.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer, p plugins) error {
	cfg, err := serveConfig(args, stdout)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, cfg.Log)
	if err != nil {
		return err
	}
	addDiskProcessor()
	f, err := newFarm(cfg, log, p)
	if err != nil {
		return err
	}
	return runServices(ctx, log, f.services(), f.failed, cfg.Server.ShutdownTimeout.Duration, func() { f.greet(stdout) })
}

// farm is the coordinator's parts, wired to one another as they are made.
type farm struct {
	cfg       Config
	log       *slog.Logger
	p         plugins
	clock     clock.Clock
	store     *persistence.Store
	objects   *objectStore
	listener  net.Listener
	publicURL string
	metrics   *metrics.Metrics
	hub       *api.Hub
	history   *api.FarmHistory
	// coord runs the farm's actors: all along in a farm alone, for each term it leads in a
	// replica, which between terms follows and answers that it does not lead.
	coord    *actors.Coordinator
	replica  *replicas.Replica
	server   *api.Server
	outbound *http.Client
	happen   *actors.Events
	// member is the coordinator's membership of the cluster, once joined.
	member *clusterMember
	// failed is told of a service that stopped by itself: the process shuts down.
	failed chan error
	// urlKey and secretKey are the keys the store must be written with (checkKeys).
	urlKey, secretKey []byte
}

// newFarm opens the store and the API's listener and makes every part; nothing runs yet. What it
// opened is closed again when a later part cannot be made.
func newFarm(cfg Config, log *slog.Logger, p plugins) (f *farm, err error) {
	f = &farm{cfg: cfg, log: log, p: p, clock: clock.Real{}, metrics: metrics.New(), happen: &actors.Events{}, failed: make(chan error, 1)}
	var opened []io.Closer
	defer func() {
		if err != nil {
			for i := len(opened) - 1; i >= 0; i-- {
				opened[i].Close()
			}
		}
	}()
	dataDir := cfg.Server.DataDir
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	secretKey, err := secretbox.LoadOrCreateKey(cfg.Secrets.Key, filepath.Join(dataDir, "secrets.key"))
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	box, err := secretbox.New(secretKey)
	if err != nil {
		return nil, err
	}
	urlKey, err := secretbox.LoadOrCreateKey(cfg.Objects.SigningKey, filepath.Join(dataDir, "url-signing.key"))
	if err != nil {
		return nil, fmt.Errorf("URL signing key: %w", err)
	}
	f.store, err = persistence.Open(filepath.Join(dataDir, "framefarm.db"), persistence.Options{MaxBatch: cfg.Store.MaxBatch,
		OnCommit: f.metrics.ObserveCommit, Replica: cfg.HA != nil})
	if errors.Is(err, persistence.ErrLocked) {
		return nil, fmt.Errorf("%w: is another framefarm serving from %s?", err, dataDir)
	}
	if err != nil {
		return nil, err
	}
	opened = append(opened, f.store)
	if torn := f.store.SetAside(); torn != "" {
		f.log.Warn("the machine stopped while this replica's store was being written: it was moved aside and is rebuilt from the replicas' snapshot and log (the moved file may be deleted)", "moved_to", torn)
	}
	f.urlKey, f.secretKey = urlKey, secretKey
	// A replica writes through the leader: it records the keys' fingerprints when it leads.
	if err := checkKeys(f.store, urlKey, secretKey, cfg.HA == nil); err != nil {
		return nil, err
	}
	if cfg.HA != nil {
		if err := checkPublicURL(cfg.publicURL(), cfg.Server.Listen); err != nil {
			return nil, err
		}
		f.metrics.ForReplica()
		if f.replica, err = f.startReplica(); err != nil {
			return nil, err
		}
		opened = append(opened, closer(f.replica.Shutdown))
		f.store.Replicate(f.replica)
		f.metrics.WatchReplica(f.replica)
	}
	listener, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return nil, err
	}
	f.listener = countedListener{Listener: listener, t: f.metrics.Network("api")}
	opened = append(opened, f.listener)
	localURL := "http://" + loopbackAddr(f.listener.Addr().String())
	f.publicURL = cfg.publicURL()
	if cfg.Server.PublicURL == "" {
		f.publicURL = localURL
	}
	adminToken := ""
	if cfg.HA != nil {
		adminToken = replicasAdminToken(secretKey)
	}
	local, err := writeLocalAdmin(dataDir, localURL, f.publicURL+"/ui/", adminToken)
	if err != nil {
		return nil, fmt.Errorf("local admin token: %w", err)
	}
	publicURLs := blobs.NewSigner(f.publicURL, urlKey)

	// What the actors do goes to the metrics (first: the tests' signals read them), to the event
	// hub that streams it to dashboard viewers, and to the history that keeps the farm's last
	// hour for the dashboard's charts.
	f.metrics.Watch(f.happen)
	if p.watch != nil {
		p.watch(f.happen)
	}
	f.hub = &api.Hub{Store: f.store, Clock: f.clock}
	f.hub.Watch(f.happen)
	var actorStore actors.Store = f.store
	if p.store != nil {
		actorStore = p.store(f.store)
	}
	ids := persistence.NewIDs()
	f.outbound = outbound.NewClient(outbound.Options{AllowPrivate: cfg.Server.AllowPrivateURLs})
	// Nodes on other machines fetch and upload through the public URL; alone, loopback will do.
	nodeURLBase := localURL
	var clusterKey []byte
	heartbeat, lease, failureLimit := time.Duration(0), time.Duration(0), 0
	var selfTestTimeout time.Duration
	if cfg.Cluster != nil {
		nodeURLBase = f.publicURL
		if u, err := url.Parse(f.publicURL); err == nil && isLoopback(u.Hostname()) && cfg.Objects.Backend == "local" {
			log.Warn("render nodes on other machines fetch and upload files through server.public_url, which is a loopback address: set it to an address they reach",
				"public_url", f.publicURL)
		}
		clusterKey = []byte(cfg.Cluster.Key)
		heartbeat, lease, failureLimit = cfg.Cluster.HeartbeatInterval.Duration, cfg.Cluster.Lease.Duration, cfg.Cluster.NodeFailureLimit
		selfTestTimeout = cfg.Cluster.NodeSelfTestTimeout.Duration
	}
	if f.objects, err = openObjects(cfg, nodeURLBase, urlKey, f.clock, f.metrics, log); err != nil {
		return nil, err
	}
	// A webhook's body is its job as the API shows it; the job has ended, so its view needs no
	// word of the farm's capacity.
	webhookViews := &api.JobViews{URLs: publicURLs, OutputTTL: cfg.Outputs.URLTTL.Duration, Clock: f.clock}
	// Render nodes reclaim their renders from a coordinator that restarted within a lease; after
	// a failover they first notice the leader gone and find the next one through gossip.
	var adoptWindow time.Duration
	var stillLeads func() bool
	if f.replica != nil {
		adoptWindow = lease + heartbeat + nodesFindTheLeader
		stillLeads = f.replica.StillLeads
	}
	f.coord = actors.New(actors.Config{
		MaxAttempts:             cfg.Jobs.MaxAttempts,
		ProgressInterval:        cfg.Jobs.ProgressInterval.Duration,
		SilenceTimeout:          cfg.Node.SilenceTimeout.Duration,
		MaxRenderTime:           cfg.Node.MaxRenderTime.Duration,
		WebhookBackoff:          durations(cfg.Webhooks.RetryBackoff),
		WebhookTimeout:          cfg.Webhooks.Timeout.Duration,
		WebhookConcurrency:      cfg.Webhooks.Concurrency,
		TemplateMaxBytes:        cfg.Templates.MaxFileBytes,
		TemplateDownloadTimeout: cfg.Templates.DownloadTimeout.Duration,
		TemplateWorkers:         cfg.Templates.Workers,
		MaxTeamTemplateBytes:    cfg.Templates.MaxBytesPerTeam,
		HeartbeatInterval:       heartbeat,
		NodeLease:               lease,
		NodeFailureLimit:        failureLimit,
		NodeSelfTestTimeout:     selfTestTimeout,
		ClusterKey:              clusterKey,
		AdoptAfterRestart:       cfg.Cluster != nil,
		AdoptWindow:             adoptWindow,
		Takeover:                f.replica != nil,
		MaxOutputBytes:          cfg.Outputs.MaxBytes,
		StorageRetry:            cfg.Objects.RetryAfter.Duration,
	}, actors.Deps{
		Store: actorStore, Objects: f.objects.store, Uploads: f.objects.uploads, NodeURLs: f.objects.nodeURLs, ClientURLs: publicURLs, Secrets: box,
		Inspector: p.inspector, Clock: f.clock, IDs: ids, Events: f.happen, Logger: log, Outbound: f.outbound,
		WebhookBody: webhookViews.WebhookBody, StillLeads: stillLeads,
	})
	var replicated api.Replicas
	if f.replica != nil {
		replicated = &replicaAPI{replica: f.replica, forward: replicas.NewForwarder(f.replica, f.clock,
			replicas.ForwardTimeouts{Request: cfg.HTTP.RequestTimeout.Duration, Transfer: cfg.HTTP.TransferTimeout.Duration})}
	}
	f.history = &api.FarmHistory{Source: f.coord, Clock: f.clock}
	f.history.Watch(f.happen)
	// With a listener of their own, the metrics are not on the API's port.
	var apiMetrics fasthttp.RequestHandler
	if cfg.Metrics.Listen == "" {
		apiMetrics = f.metrics.Handler()
	}
	f.server = api.New(api.Config{
		HeaderTimeout: cfg.HTTP.HeaderTimeout.Duration, RequestTimeout: cfg.HTTP.RequestTimeout.Duration,
		TransferTimeout: cfg.HTTP.TransferTimeout.Duration, MaxConnsPerIP: cfg.HTTP.MaxConnsPerIP,
		MetricsToken:         cfg.Metrics.Token,
		MaxTemplatesInFlight: cfg.Templates.MaxInFlightPerTeam, MaxTeamTemplateBytes: cfg.Templates.MaxBytesPerTeam,
		MaxBodyBytes:     cfg.Server.MaxBodyBytes,
		MaxTemplateBytes: cfg.Templates.MaxFileBytes,
		MaxOutputBytes:   cfg.Outputs.MaxBytes,
		UploadURLTTL:     cfg.Templates.UploadURLTTL.Duration,
		DownloadURLTTL:   cfg.Outputs.URLTTL.Duration,
		RateLimit:        cfg.RateLimit.RequestsPerSecond,
		RateBurst:        cfg.RateLimit.Burst,
		AdminToken:       cfg.Server.AdminToken,
		LocalAdminToken:  local.Token,
		KeptAdminTokens:  f.store.KeptAdminTokens(),
		Limits: validate.Limits{
			MaxDepth: cfg.Jobs.MaxNestingDepth, MaxAssets: cfg.Jobs.MaxAssets, AllowPrivateURLs: cfg.Server.AllowPrivateURLs,
			ChunkFrames: cfg.Jobs.ChunkFrames, ChunkAbove: cfg.Jobs.ChunkAbove, EngineLimits: cfg.Engines.engineLimits(),
			Engines: map[string]renderer.AssetRules{renderer.EngineLottie: lottie.AssetRules{}},
		},
	}, api.Deps{
		Coordinator: f.coord, Store: f.store, Blobs: f.objects.store, Bucket: f.objects.bucket, URLs: publicURLs,
		IDs: ids, Clock: f.clock, Logger: log, Observer: f.metrics, Metrics: apiMetrics, Events: f.hub, History: f.history,
		UI: ui.Handler, UIRedirect: ui.Redirect, Replicas: replicated,
		Backup: func(w io.Writer) (persistence.BackupManifest, error) {
			return f.store.WriteBackup(w, persistence.BackupOptions{Release: buildVersion(), Now: f.clock.Now(), Files: f.backupFiles,
				AdminTokens: append(f.store.KeptAdminTokens(), persistence.AdminTokenHash(local.Token))})
		},
	})
	f.metrics.WatchJobCounts(f.store.JobCountsByState)
	f.metrics.WatchQueue(f.coord, f.clock.Now)
	f.metrics.WatchDisk(func() (free, size uint64, err error) { return diskSpace(cfg.Server.DataDir) })
	return f, nil
}

// services are the farm's running parts in the order they start; they stop in the reverse one.
// So a shutdown (SIGTERM or SIGINT) goes: API requests get 503 with Retry-After and /readyz
// fails, and event streams end; the embedded node interrupts its renders (they are queued again
// at the next start, without counting as failed attempts) and stops its engines; the history
// stops sampling; the coordinator leaves the cluster (remote nodes keep rendering and reconnect
// to the next start); the HTTP server lets requests in flight finish; retention ends its step;
// the memory releaser stops; the actors stop (scheduler, template processor, webhook
// dispatcher); the event hub, and the metrics and debug listeners stop (metrics and profiles of
// the shutdown stay readable until then); the store commits what it holds and closes.
func (f *farm) services() []service {
	cfg := f.cfg
	var list []service
	add := func(s ...service) { list = append(list, s...) }
	add(service{name: "store", stop: func(context.Context) error { return f.store.Close() }})
	if cfg.Debug.Listen != "" {
		var stop func()
		add(service{name: "debug listener",
			start: func() (err error) { stop, err = startDebug(cfg.Debug.Listen, f.log); return err },
			stop:  func(context.Context) error { stop(); return nil }})
	}
	if cfg.Metrics.Listen != "" {
		var stop func()
		add(service{name: "metrics listener",
			start: func() (err error) {
				stop, err = startMetrics(cfg.Metrics.Listen, cfg.Metrics.Token, f.metrics.HTTPHandler(), f.log)
				return err
			},
			stop: func(context.Context) error { stop(); return nil }})
	}
	add(background("event hub", f.hub.Run))
	var duties []service
	if f.replica == nil {
		duties = f.duties(f.coord)
		add(duties[0])
	}
	// After the actors: the releaser looks at once, and the queue's restore leaves garbage.
	add(background("memory releaser", memoryReleaser{Interval: 2 * time.Second, QuietThreshold: 16 << 20, Threshold: 64 << 20, BusyGap: 10 * time.Second}.Run),
		background("garbage collector tuner", gcTuner{Interval: time.Second, Headroom: 48 << 20}.Run))
	if f.replica == nil {
		add(duties[1:]...)
	}
	relayed := &relay.Server{Handler: f.server.Handler()}
	add(service{name: "HTTP server",
		start: func() error {
			serve := func(l net.Listener) {
				if err := f.server.Serve(l); err != nil {
					f.failed <- fmt.Errorf("HTTP server: %w", err)
				}
			}
			go serve(f.listener)
			if f.replica != nil { // what followers hand to the leader
				go serve(f.replica.ForwardListener())
				go relayed.Serve(f.replica.RelayListener())
			}
			return nil
		},
		stop: func(ctx context.Context) error { return errors.Join(f.server.Shutdown(ctx), relayed.Shutdown(ctx)) }})
	if f.replica == nil && cfg.Cluster != nil {
		add(f.clusterService(f.coord))
	}
	if f.replica != nil {
		add(service{name: "replica", stop: func(context.Context) error { f.replica.Shutdown(); return nil }},
			f.leaderDuties())
	}
	// Sampling asks the actors: it starts once the cluster's remote is up, which must be started
	// before anything else uses the actor system.
	add(background("farm history", f.history.Run))
	if cfg.Node.LocalSlots > 0 {
		var stop func()
		add(service{name: "embedded render node",
			start: func() (err error) {
				stop, err = startEmbeddedNode(f.coord, cfg, cfg.Server.DataDir, f.outbound, f.clock, f.log, f.p)
				return err
			},
			stop: func(context.Context) error { stop(); return nil }})
	}
	add(service{name: "API intake", stop: func(context.Context) error {
		f.server.Drain()
		f.hub.Close() // event streams end, so the HTTP server does not wait for them
		return nil
	}})
	return list
}

// duties are what the coordinator that leads runs: a farm alone runs them all along, a replica
// while it leads, each term with a coordinator of its own. The actors come first; the cluster,
// where nodes meet the coordinator, is joined after them (clusterService).
func (f *farm) duties(coord *actors.Coordinator) []service {
	cfg := f.cfg
	list := []service{{name: "actors", start: coord.Start, stop: func(ctx context.Context) error { coord.Stop(ctx); return nil }}}
	if keep := cfg.Jobs.Retention.Duration; keep > 0 {
		retention := &actors.Retention{Store: f.store, Clock: f.clock, Events: f.happen, Log: f.log,
			Keep: keep, Every: min(10*time.Minute, max(keep/2, time.Second))}
		list = append(list, background("retention", retention.Run))
	}
	deleter := &actors.Deleter{Store: f.store, Objects: f.objects.store, Clock: f.clock, Log: f.log}
	list = append(list, background("object deleter", deleter.Run),
		background("object counter", countObjects(f.objects, f.metrics, f.clock, 10*time.Minute, f.log)))
	if f.objects.janitor != nil {
		list = append(list, background("unfinished upload janitor", f.objects.janitor))
	}
	return list
}

// clusterService joins the farm's cluster, where render nodes meet the coordinator, and watches
// its members; it leaves the cluster when stopped.
func (f *farm) clusterService(coord *actors.Coordinator) service {
	var watch service
	return service{name: "cluster",
		start: func() error {
			hostname, _ := os.Hostname()
			m, err := joinCluster(coord.ActorSystem(), *f.cfg.Cluster, "coordinator-"+hostname, membership.Meta{Role: membership.RoleCoordinator}, f.metrics.Network("nodes"), f.log)
			if err != nil {
				return err
			}
			f.member = m
			watch = background("cluster watch", func(ctx context.Context) {
				if known := coord.NodeAddresses(); len(known) > 0 {
					go func() {
						reached := m.member.Reach(known, nodesReachTimeout)
						f.log.Info("reached the render nodes the farm knows of", "known", len(known), "answered", reached)
					}()
				}
				go m.member.Run(ctx)
				watchNodes(ctx, m.member, coord, f.log)
			})
			return watch.start()
		},
		stop: func(ctx context.Context) error {
			err := watch.stop(ctx)
			f.member.leave()
			return err
		},
	}
}

// nodesReachTimeout bounds the wait of a coordinator starting its term for the nodes it knows of
// to answer; the others find it as before, by joining the seeds they were given.
const nodesReachTimeout = 2 * time.Second

// greet tells the operator where the farm serves, once every service runs.
func (f *farm) greet(stdout io.Writer) {
	if f.member != nil {
		fmt.Fprintf(stdout, "framefarm cluster gossip on %s, actors on %s\n", f.member.member.Addr(), f.member.actors)
	}
	f.log.Info("framefarm serving", "listen", f.listener.Addr().String(), "public_url", f.publicURL, "version", buildVersion(),
		"embedded_node_slots", f.cfg.Node.LocalSlots)
	f.warnOfMissingLimits()
	fmt.Fprintf(stdout, "framefarm listening on %s\n", f.listener.Addr().String())
	fmt.Fprintf(stdout, "dashboard: %s/ui/ (sign in with an API token)\n", f.publicURL)
	// The commands are printed to run as written from any folder: this binary's own path, and
	// the data folder's.
	self, err := os.Executable()
	if err != nil {
		self = "framefarm"
	}
	abs, _ := filepath.Abs(f.cfg.Server.DataDir)
	la, err := readLocalAdmin(f.cfg.Server.DataDir)
	fmt.Fprint(stdout, adminSignIn(err == nil && isTerminal(stdout), f.publicURL, la.Token, self, abs))
	if !f.store.HasTeams() {
		fmt.Fprintf(stdout, "no team yet: for a first API token, run in another terminal on this machine\n  %s token create --data-dir %s --team NAME\n", self, abs)
	}
}

// adminSignIn is how the start tells the operator to sign in as the farm's admin: the link that
// does, to a person at a terminal; elsewhere (a service's journal, which others may read) the
// command that prints it.
func adminSignIn(terminal bool, publicURL, token, self, dataDir string) string {
	if terminal {
		return fmt.Sprintf("farm admin: sign in to the dashboard at %s/ui/#token=%s\n", publicURL, token)
	}
	return fmt.Sprintf("farm admin: %s token admin --data-dir %s   (prints the admin token and a sign-in link)\n", self, dataDir)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// startEmbeddedNode runs a render node inside the coordinator; it reaches the coordinator's files
// over loopback, exactly as a remote node would over the network. stop interrupts its renders,
// then ends its engines.
func startEmbeddedNode(coord *actors.Coordinator, cfg Config, dataDir string, guarded *http.Client,
	clk clock.Clock, log *slog.Logger, p plugins) (stop func(), err error) {
	hostname, _ := os.Hostname()
	engines, stopEngines := p.engines(cfg.Engines, log)
	var key []byte
	if cfg.Cluster != nil {
		key = []byte(cfg.Cluster.Key)
	}
	agent, err := node.New(node.Config{
		NodeID:           "embedded-" + hostname,
		Slots:            cfg.Node.LocalSlots,
		Pools:            cfg.Node.Pools,
		Version:          buildVersion(),
		ClusterKey:       key,
		DataDir:          filepath.Join(dataDir, "node"),
		MaxDownloadBytes: cfg.Node.MaxDownloadBytes,
		DownloadTimeout:  cfg.Node.DownloadTimeout.Duration,
	}, engines, node.Transfers{Internal: &http.Client{}, External: guarded}, clk, log)
	if err != nil {
		stopEngines()
		return nil, err
	}
	if err := agent.Start(coord.ActorSystem(), "embedded-node"); err != nil {
		stopEngines()
		return nil, err
	}
	ctx, stopLink := context.WithCancel(context.Background())
	agent.Connect(coord.NodeGateway())
	go agent.Run(ctx)
	stop = func() {
		stopLink()
		agent.Stop()
		// The coordinator stops with this node: it queues the interrupted renders again at its
		// next start, as renders a clean shutdown interrupted (not counted as failures).
		agent.ForgetInterrupted()
		stopEngines()
	}
	log.Info("embedded render node started", "engines", agent.Hello().Engines, "slots", cfg.Node.LocalSlots)
	return stop, nil
}

func durations(ds []Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Duration
	}
	return out
}

// isLoopback reports whether host names this machine only.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackAddr turns a wildcard listen address into one a local client can dial.
func loopbackAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// warnOfMissingLimits says which limits the engines imply that the farm does not have: their
// jobs are refused until the admin makes them.
func (f *farm) warnOfMissingLimits() {
	have, err := f.store.Limits()
	if err != nil {
		return
	}
	names := map[string]bool{}
	for _, l := range have {
		names[l.Name] = true
	}
	for engine, limits := range f.cfg.Engines.engineLimits() {
		for _, name := range limits {
			if !names[name] {
				f.log.Warn("an engine's jobs hold a limit the farm does not have: they are refused until the admin makes it",
					"engine", engine, "limit", name, "make_it", fmt.Sprintf("PUT /api/v2/admin/limits/%s {\"count\": N}", name))
			}
		}
	}
}
