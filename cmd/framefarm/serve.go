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
	"github.com/framefarm/framefarm/http/api"
	"github.com/framefarm/framefarm/http/metrics"
	"github.com/framefarm/framefarm/http/outbound"
	"github.com/framefarm/framefarm/http/ui"
	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/persistence/secretbox"
	"github.com/valyala/fasthttp"
)

// serveConfig reads serve's flags over the configuration file.
func serveConfig(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (TOML)")
	dataDir := fs.String("data-dir", "", "data directory (database, files, keys)")
	listen := fs.String("listen", "", "HOST:PORT to serve on (default 127.0.0.1:8080)")
	publicURL := fs.String("public-url", "", "base of every URL handed out (default from --listen)")
	localSlots := fs.Int("local-slots", 0, "renders the embedded node runs at once; 0 = no embedded node")
	allowPrivate := fs.Bool("allow-private-urls", false, "let webhooks and downloads reach loopback and private addresses")
	if err := fs.Parse(args); err != nil {
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

// serve runs the coordinator until ctx ends. Shutdown order: API intake stops (503 with
// Retry-After, readyz fails) and event streams end; the embedded node interrupts its renders
// (they are queued again at the next start, without counting as failed attempts) and stops its
// engines; the coordinator
// leaves the cluster (remote nodes keep rendering and reconnect to the next start); the HTTP
// server lets requests in flight finish; retention ends its step; the actors stop (scheduler,
// template processor, webhook dispatcher); the metrics and debug listeners close (metrics and
// profiles of the shutdown stay readable until then); the store commits what it holds and closes.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer, p plugins) error {
	cfg, err := serveConfig(args, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, cfg.Log)
	if err != nil {
		return err
	}
	addDiskProcessor()
	dataDir := cfg.Server.DataDir
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	secretKey, err := secretbox.LoadOrCreateKey(cfg.Secrets.Key, filepath.Join(dataDir, "secrets.key"))
	if err != nil {
		return fmt.Errorf("secrets key: %w", err)
	}
	box, err := secretbox.New(secretKey)
	if err != nil {
		return err
	}
	urlKey, err := secretbox.LoadOrCreateKey("", filepath.Join(dataDir, "url-signing.key"))
	if err != nil {
		return fmt.Errorf("URL signing key: %w", err)
	}
	m := metrics.New()
	store, err := persistence.Open(filepath.Join(dataDir, "framefarm.db"), persistence.Options{MaxBatch: cfg.Store.MaxBatch, OnCommit: m.ObserveCommit})
	if errors.Is(err, persistence.ErrLocked) {
		return fmt.Errorf("%w: is another framefarm serving from %s?", err, dataDir)
	}
	if err != nil {
		return err
	}
	defer store.Close()
	objects, err := blobs.Open(dataDir)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	localURL := "http://" + loopbackAddr(ln.Addr().String())
	local, err := writeLocalAdmin(dataDir, localURL)
	if err != nil {
		return fmt.Errorf("local admin token: %w", err)
	}
	publicURL := cfg.publicURL()
	if cfg.Server.PublicURL == "" {
		publicURL = localURL
	}
	// What the actors do goes to the metrics, to the event hub that streams it to dashboard
	// viewers, and to the history that keeps the farm's last hour for the dashboard's charts.
	happenings := &actors.Events{}
	m.Watch(happenings)
	if p.watch != nil {
		p.watch(happenings)
	}
	clk := clock.Real{}
	events := &api.Hub{Store: store, Clock: clk}
	events.Watch(happenings)
	history := &api.FarmHistory{Clock: clk}
	history.Watch(happenings)
	eventsCtx, stopEvents := context.WithCancel(context.Background())
	defer stopEvents()
	go events.Run(eventsCtx)
	var actorStore actors.Store = store
	if p.store != nil {
		actorStore = p.store(store)
	}
	ids := persistence.NewIDs()
	guarded := outbound.NewClient(outbound.Options{AllowPrivate: cfg.Server.AllowPrivateURLs})
	// Nodes on other machines fetch and upload through the public URL; alone, loopback will do.
	nodeURLBase := localURL
	var clusterKey []byte
	heartbeat, lease, failureLimit := time.Duration(0), time.Duration(0), 0
	if cfg.Cluster != nil {
		nodeURLBase = publicURL
		if u, err := url.Parse(publicURL); err == nil && isLoopback(u.Hostname()) {
			log.Warn("render nodes on other machines fetch and upload files through server.public_url, which is a loopback address: set it to an address they reach",
				"public_url", publicURL)
		}
		clusterKey = []byte(cfg.Cluster.Key)
		heartbeat, lease, failureLimit = cfg.Cluster.HeartbeatInterval.Duration, cfg.Cluster.Lease.Duration, cfg.Cluster.NodeFailureLimit
	}

	coord := actors.New(actors.Config{
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
		ClusterKey:              clusterKey,
		AdoptAfterRestart:       cfg.Cluster != nil,
	}, actors.Deps{
		Store: actorStore, Blobs: objects, NodeURLs: blobs.NewSigner(nodeURLBase, urlKey), Secrets: box,
		Inspector: p.inspector, Clock: clk, IDs: ids, Events: happenings, Logger: log, Outbound: guarded,
	})
	// With a listener of their own, the metrics are not on the API's port.
	var apiMetrics fasthttp.RequestHandler
	if cfg.Metrics.Listen == "" {
		apiMetrics = m.Handler()
	}
	server := api.New(api.Config{
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
		Limits: validate.Limits{
			MaxDepth: cfg.Jobs.MaxNestingDepth, MaxAssets: cfg.Jobs.MaxAssets, AllowPrivateURLs: cfg.Server.AllowPrivateURLs,
		},
	}, api.Deps{
		Coordinator: coord, Store: store, Blobs: objects, URLs: blobs.NewSigner(publicURL, urlKey),
		IDs: ids, Clock: clk, Logger: log, Observer: m, Metrics: apiMetrics, Events: events, History: history,
		UI: ui.Handler, UIRedirect: ui.Redirect,
	})
	coord.JobJSON = server.JobJSON

	m.SetJobCounts(store.JobCountsByState())
	m.WatchQueue(coord, clk.Now)
	history.Source = coord
	if err := coord.Start(); err != nil {
		return err
	}
	leaveCluster := func() {}
	if cfg.Cluster != nil {
		hostname, _ := os.Hostname()
		cm, err := joinCluster(coord.ActorSystem(), *cfg.Cluster, "coordinator-"+hostname, membership.Meta{Role: membership.RoleCoordinator}, log)
		if err != nil {
			coord.Stop(context.Background())
			return err
		}
		clusterCtx, stopCluster := context.WithCancel(context.Background())
		go cm.member.Run(clusterCtx)
		go watchNodes(clusterCtx, cm.member, coord, log)
		leaveCluster = func() {
			stopCluster()
			cm.leave()
		}
		fmt.Fprintf(stdout, "framefarm cluster gossip on %s, actors on %s\n", cm.member.Addr(), cm.actors)
	}
	// Sampling asks the actors; it starts once the cluster's remote is up, which must be started
	// before anything else uses the actor system.
	go history.Run(eventsCtx)
	stopNode := func() {}
	if cfg.Node.LocalSlots > 0 {
		stopNode, err = startEmbeddedNode(coord, cfg, dataDir, guarded, clk, log, p)
		if err != nil {
			leaveCluster()
			coord.Stop(context.Background())
			return err
		}
	}
	stopDebug, stopMetrics := func() {}, func() {}
	if cfg.Debug.Listen != "" {
		if stopDebug, err = startDebug(cfg.Debug.Listen, log); err != nil {
			stopNode()
			leaveCluster()
			coord.Stop(context.Background())
			return fmt.Errorf("debug listener: %w", err)
		}
	}
	if cfg.Metrics.Listen != "" {
		if stopMetrics, err = startMetrics(cfg.Metrics.Listen, cfg.Metrics.Token, m.HTTPHandler(), log); err != nil {
			stopDebug()
			stopNode()
			leaveCluster()
			coord.Stop(context.Background())
			return fmt.Errorf("metrics listener: %w", err)
		}
	}
	releaseCtx, stopReleasing := context.WithCancel(context.Background())
	defer stopReleasing()
	go memoryReleaser{Interval: 2 * time.Second, QuietThreshold: 16 << 20, Threshold: 64 << 20, BusyGap: 10 * time.Second}.Run(releaseCtx)
	go gcTuner{Interval: time.Second, Headroom: 48 << 20}.Run(releaseCtx)
	stopRetention := func() {}
	if keep := cfg.Jobs.Retention.Duration; keep > 0 {
		retention := &actors.Retention{Store: store, Blobs: objects, Clock: clk, Events: happenings, Log: log,
			Keep: keep, Every: min(10*time.Minute, max(keep/2, time.Second))}
		retentionCtx, cancel := context.WithCancel(context.Background())
		swept := make(chan struct{})
		go func() { defer close(swept); retention.Run(retentionCtx) }()
		stopRetention = func() { cancel(); <-swept }
	}
	served := make(chan error, 1)
	go func() { served <- server.Serve(ln) }()
	log.Info("framefarm serving", "listen", ln.Addr().String(), "public_url", publicURL, "version", buildVersion(),
		"embedded_node_slots", cfg.Node.LocalSlots)
	fmt.Fprintf(stdout, "framefarm listening on %s\n", ln.Addr().String())
	fmt.Fprintf(stdout, "dashboard: %s/ui/ (sign in with an API token)\n", publicURL)
	if !store.HasTeams() {
		abs, _ := filepath.Abs(dataDir)
		fmt.Fprintf(stdout, "no team yet: for a first API token, run in another terminal on this machine\n  framefarm token create --data-dir %s --team NAME\n", abs)
	}

	select {
	case <-ctx.Done():
	case err := <-served:
		if err != nil {
			log.Error("HTTP server stopped", "err", err)
		}
	}
	log.Info("shutting down")
	server.Drain()
	events.Close() // event streams end, so the HTTP server does not wait for them
	stopNode()
	leaveCluster()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout.Duration)
	defer cancel()
	if err := server.Shutdown(shutdownCtx); err != nil {
		log.Warn("requests still in flight at the shutdown timeout", "err", err)
	}
	stopRetention()
	coord.Stop(shutdownCtx)
	stopMetrics()
	stopDebug()
	log.Info("stopped")
	return nil
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
