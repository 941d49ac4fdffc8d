package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/membership"
	"github.com/framefarm/framefarm/cluster/node"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/cluster/remoting"
	"github.com/framefarm/framefarm/http/outbound"
	"github.com/framefarm/framefarm/renderer"
)

// envClusterKey may hold the cluster key instead of the configuration file or a flag (which
// other users of the machine could read in the process list).
const envClusterKey = "FRAMEFARM_CLUSTER_KEY"

// envAdminToken may hold the admin token for `framefarm node list|drain|clear`.
const envAdminToken = "FRAMEFARM_ADMIN_TOKEN"

// nodeCommand dispatches `framefarm node ...`: a render node, or an operator command.
func nodeCommand(ctx context.Context, args []string, stdout, stderr io.Writer, p plugins) error {
	if len(args) > 0 {
		switch args[0] {
		case "list", "drain", "clear", "forget":
			return nodeAdmin(args[0], args[1:], stdout, stderr)
		case "service":
			return nodeService(args[1:], stdout, p)
		}
	}
	return runNode(ctx, args, stdout, stderr, p)
}

// nodeSettings are what `framefarm node` runs with.
type nodeSettings struct {
	cfg         Config
	id          string
	engines     []string
	slots       int
	requireTags []string
	labels      map[string]string
}

// nodeConfig reads the flags of `framefarm node` over the configuration file.
func nodeConfig(args []string, stdout io.Writer) (ns nodeSettings, err error) {
	fs := commandFlags("node")
	configPath := fs.String("config", "", "configuration file (TOML): [engines], [node], [cluster]")
	join := fs.String("join", "", "coordinator gossip address(es) to join, HOST:PORT[,HOST:PORT]")
	nodeID := fs.String("id", "", "node id, unique in the farm (default: the one its certificate names, else the host name and a suffix kept in --data-dir)")
	engineList := fs.String("engines", "", "engines to offer, e.g. lottie,ffmpeg,ae2026 (default: every engine this machine can run)")
	slotCount := fs.Int("slots", 1, "renders run at once")
	bind := fs.String("bind", "", "gossip bind address HOST:PORT (default cluster.bind, 0.0.0.0:7946)")
	advertise := fs.String("advertise", "", "gossip address other machines reach this node at, HOST:PORT")
	actorsBind := fs.String("actors-bind", "", "actors (remote) bind address HOST:PORT (default cluster.actors_bind: 0.0.0.0:7947, or 127.0.0.1:7947 with --insecure)")
	actorsAdvertise := fs.String("actors-advertise", "", "actors address other machines reach this node at")
	dataDir := fs.String("data-dir", "./node-data", "working files, template cache, attempt markers")
	requireTags := fs.String("require-tags", "", "take only jobs tagged with all of these (comma-separated)")
	pools := fs.String("pools", "", "pools this node belongs to, comma-separated (default node.pools): a job naming a pool renders only on its nodes")
	key := fs.String("key", "", "cluster key (default cluster.key or $"+envClusterKey+")")
	allowPrivate := fs.Bool("allow-private-urls", false, "let asset downloads reach loopback and private addresses")
	tlsCert := fs.String("tls-cert", "", "this node's certificate, PEM, from framefarm cluster tls cert create --node ID (default cluster.tls.cert_file)")
	tlsKey := fs.String("tls-key", "", "its key (default cluster.tls.key_file)")
	tlsCA := fs.String("tls-ca", "", "the farm's CA certificate (default cluster.tls.ca_file)")
	insecureLink := fs.Bool("insecure", false, "run the actors port without TLS (a trusted network only; it then binds 127.0.0.1 unless --actors-bind says otherwise)")
	fs.Func("label", "KEY=VALUE shown with the node (repeatable), e.g. --label gpu=rtx4090", func(v string) error {
		key, value, ok := strings.Cut(v, "=")
		if !ok || key == "" {
			return fmt.Errorf("--label %q is not KEY=VALUE", v)
		}
		if ns.labels == nil {
			ns.labels = map[string]string{}
		}
		ns.labels[key] = value
		return nil
	})
	if err := parseFlags(fs, stdout, args); err != nil {
		return ns, err
	}
	if fs.NArg() > 0 {
		return ns, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return ns, err
	}
	if cfg.Cluster == nil {
		c := defaultClusterConfig()
		cfg.Cluster = &c
	}
	c := cfg.Cluster
	var errs []error
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&c.Bind, *bind)
	set(&c.Advertise, *advertise)
	set(&c.ActorsBind, *actorsBind)
	set(&c.ActorsAdvertise, *actorsAdvertise)
	set(&c.Key, os.Getenv(envClusterKey))
	set(&c.Key, *key)
	set(&c.TLS.CertFile, *tlsCert)
	set(&c.TLS.KeyFile, *tlsKey)
	set(&c.TLS.CAFile, *tlsCA)
	if *insecureLink {
		c.Insecure = true
	}
	if *join != "" {
		c.Seeds = strings.Split(*join, ",")
	}
	if *allowPrivate {
		cfg.Server.AllowPrivateURLs = true
	}
	if *requireTags != "" {
		ns.requireTags = strings.Split(*requireTags, ",")
	}
	if *pools != "" {
		cfg.Node.Pools = strings.Split(*pools, ",")
	}
	errs = append(errs, checkNames("--pools", "pool", cfg.Node.Pools)...)
	cfg.Server.DataDir = *dataDir
	ns.id = *nodeID
	if certified, err := certificateNodeID(c.TLS); err != nil {
		errs = append(errs, err)
	} else if ns.id == "" {
		ns.id = certified
	} else if certified != "" && certified != ns.id {
		errs = append(errs, fmt.Errorf("the certificate %s is node %s's, not %s's", c.TLS.CertFile, certified, ns.id))
	}
	if len(c.Seeds) == 0 {
		errs = append(errs, errors.New("--join HOST:PORT (the coordinator's cluster.bind) is required"))
	}
	if *slotCount < 1 {
		errs = append(errs, errors.New("--slots must be at least 1"))
	}
	if *engineList != "" {
		ns.engines = strings.Split(*engineList, ",")
	}
	errs = append(errs, c.check(nodeMember)...)
	ns.cfg, ns.slots = cfg, *slotCount
	return ns, errors.Join(errs...)
}

// certificateNodeID is the node id a node's certificate names ("" for none, or no certificate).
func certificateNodeID(t remoting.TLS) (string, error) {
	if t.CertFile == "" {
		return "", nil
	}
	chain, err := certs.ReadCertificates(t.CertFile)
	if err != nil {
		return "", fmt.Errorf("--tls-cert: %w", err)
	}
	id, err := certs.IdentityOf(chain[0])
	if err != nil {
		return "", fmt.Errorf("--tls-cert: %w", err)
	}
	return id.NodeID, nil
}

// runNode is `framefarm node`: a render node that joins the farm, renders what the coordinator
// assigns, and on SIGTERM drains (finishes its renders, takes no new ones) and leaves. A second
// SIGTERM or SIGINT stops it at once; its interrupted renders run again elsewhere.
func runNode(ctx context.Context, args []string, stdout, stderr io.Writer, p plugins) error {
	ns, err := nodeConfig(args, stdout)
	if err != nil {
		return err
	}
	return serveNode(ctx, func() (context.Context, context.CancelFunc) {
		return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	}, ns, stdout, stderr, p)
}

// serveNode runs a node until ctx ends, then drains it until the context from stopNow ends (the
// operator's second stop), and leaves.
func serveNode(ctx context.Context, stopNow func() (context.Context, context.CancelFunc), ns nodeSettings, stdout, stderr io.Writer, p plugins) error {
	cfg, id, slots := ns.cfg, ns.id, ns.slots
	log, err := newLogger(stderr, cfg.Log)
	if err != nil {
		return err
	}
	if id == "" {
		if id, err = defaultNodeID(cfg.Server.DataDir); err != nil {
			return fmt.Errorf("node id: %w", err)
		}
	}
	engines, stopEngines := p.engines(cfg.Engines, log)
	defer stopEngines()
	if engines, err = pickEngines(engines, ns.engines); err != nil {
		return err
	}
	clusterCfg := *cfg.Cluster
	agent, err := node.New(node.Config{
		NodeID: id, Slots: slots, Version: buildVersion(), RequireTags: ns.requireTags, Labels: ns.labels, Pools: cfg.Node.Pools,
		ClusterKey: []byte(clusterCfg.Key), DataDir: cfg.Server.DataDir,
		MaxDownloadBytes: cfg.Node.MaxDownloadBytes, DownloadTimeout: cfg.Node.DownloadTimeout.Duration,
	}, engines, node.Transfers{Internal: &http.Client{}, External: outbound.NewClient(outbound.Options{AllowPrivate: cfg.Server.AllowPrivateURLs})},
		clock.Real{}, log)
	if err != nil {
		return err
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return log.With("component", "protoactor")
	}))
	defer system.Shutdown()
	cm, err := joinCluster(system, clusterCfg, id, membership.Meta{Role: membership.RoleNode, NodeID: id, Incarnation: agent.Incarnation()}, nil, log)
	if err != nil {
		return err
	}
	if err := agent.Start(system, node.AgentName); err != nil {
		cm.leave()
		return err
	}
	linkCtx, stopLink := context.WithCancel(context.Background())
	go cm.member.Run(linkCtx)
	go agent.Run(linkCtx)
	go followCoordinator(linkCtx, cm.member, agent)
	log.Info("render node started", "node", id, "engines", agent.Hello().Engines, "slots", slots)
	fmt.Fprintf(stdout, "framefarm node %s started, gossip on %s, actors on %s\n", id, cm.member.Addr(), cm.actors)

	<-ctx.Done()
	log.Info("draining: finishing current renders before leaving (stop again to stop at once)")
	drainCtx, stopDrain := stopNow()
	err = agent.Drain(drainCtx)
	stopDrain()
	if err != nil {
		log.Warn("stopped before the renders finished; they will run again elsewhere")
	}
	stopLink()
	agent.Stop()
	cm.leave()
	log.Info("render node stopped")
	return nil
}

// followCoordinator points the agent at the coordinator's gateway wherever membership shows it.
func followCoordinator(ctx context.Context, member *membership.Member, agent *node.Agent) {
	connect := func(meta membership.Meta) {
		agent.Connect(actor.NewPID(meta.Actors, actors.GatewayName))
	}
	for _, meta := range member.Alive(membership.RoleCoordinator) {
		connect(meta)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-member.Events():
			if ev.Meta.Role == membership.RoleCoordinator && ev.Alive {
				connect(ev.Meta)
			}
		}
	}
}

// pickEngines keeps the engines asked for; an engine asked for that this machine cannot run is
// an error, so a node never joins announcing less than its operator meant.
func pickEngines(all []renderer.Renderer, want []string) ([]renderer.Renderer, error) {
	if len(want) == 0 {
		if len(all) == 0 {
			return nil, errors.New("this machine can run no engine (see the warnings above)")
		}
		return all, nil
	}
	var out []renderer.Renderer
	for _, name := range want {
		i := slices.IndexFunc(all, func(r renderer.Renderer) bool { return r.Engine() == name })
		if i < 0 {
			return nil, fmt.Errorf("engine %q is not available on this machine (see the warnings above)", name)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// nodeAdmin runs `framefarm node list|drain ID|clear ID|forget ID` against a coordinator's API.
func nodeAdmin(verb string, args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("node " + verb)
	admin := addAdminFlags(fs)
	if err := parseFlags(fs, stdout, args); err != nil {
		return err
	}
	// The node id may come before the flags (as the usage shows) or after them.
	nodeID := ""
	if verb != "list" && fs.NArg() > 0 {
		nodeID = fs.Arg(0)
		if err := parseFlags(fs, stdout, fs.Args()[1:]); err != nil {
			return err
		}
	}
	method, path := http.MethodGet, "/api/v2/nodes"
	switch {
	case verb == "list" && fs.NArg() != 0:
		return errors.New("usage: framefarm node list [--url URL] [--admin-token TOKEN]")
	case verb != "list" && (nodeID == "" || fs.NArg() != 0):
		return fmt.Errorf("usage: framefarm node %s NODE_ID [--url URL] [--admin-token TOKEN]", verb)
	case verb == "forget":
		method, path = http.MethodDelete, "/api/v2/nodes/"+url.PathEscape(nodeID)
	case verb != "list":
		method, path = http.MethodPost, "/api/v2/nodes/"+url.PathEscape(nodeID)+"/"+verb
	}
	base, token, err := admin.resolve()
	if err != nil {
		return err
	}
	status, body, err := adminRequest(method, base, path, token, nil)
	if err != nil {
		return err
	}
	if status == http.StatusNoContent {
		fmt.Fprintf(stdout, "forgot %s\n", nodeID)
		return nil
	}
	var nodes []actors.NodeInfo
	if verb == "list" {
		err = json.Unmarshal(body, &nodes)
	} else {
		var one actors.NodeInfo
		err = json.Unmarshal(body, &one)
		nodes = append(nodes, one)
	}
	if err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tSTATE\tENGINES\tPOOLS\tSLOTS\tJOBS\tMACHINE\tVERSION\tLAST HEARTBEAT\tREASON")
	for _, n := range nodes {
		pools := strings.Join(n.Pools, ",")
		if pools == "" {
			pools = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", n.ID, n.State, strings.Join(n.Engines, ","), pools, n.Slots,
			len(n.CurrentJobs), machineText(n.Machine), n.Version, n.LastHeartbeat.Format(time.RFC3339), n.Reason)
	}
	return w.Flush()
}

// machineText says what a node runs on: "linux/amd64, 8 CPUs, 31.3 GiB".
func machineText(m *protocol.Machine) string {
	if m == nil {
		return "-"
	}
	text := fmt.Sprintf("%s/%s, %d CPUs", m.OS, m.Arch, m.CPUs)
	if m.MemoryBytes > 0 {
		text += fmt.Sprintf(", %.1f GiB", float64(m.MemoryBytes)/(1<<30))
	}
	return text
}

// adminRequest makes one request of a coordinator's admin routes, with a JSON body when one is
// given; an answer other than 200 or 204 is an error quoting it.
func adminRequest(method, base, path, token string, body []byte) (status int, answer []byte, err error) {
	req, err := http.NewRequest(method, strings.TrimRight(base, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if answer, err = io.ReadAll(io.LimitReader(resp.Body, 16<<20)); err != nil {
		return 0, nil, err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(answer, &e) == nil && e.Error != "" {
			return resp.StatusCode, nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, e.Error)
		}
		return resp.StatusCode, nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(answer)))
	}
	return resp.StatusCode, answer, nil
}

// nodeIDFile, in a node's data folder, keeps the suffix of its default id.
const nodeIDFile = "node-id"

// defaultNodeID is the host name and a suffix made at the first start and kept in the data
// folder: stable across the node's restarts, and different for two nodes of one machine (each
// has its own data folder, as it must for its attempt markers).
func defaultNodeID(dataDir string) (string, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "node"
	}
	path := filepath.Join(dataDir, nodeIDFile)
	if raw, err := os.ReadFile(path); err == nil {
		if suffix := strings.TrimSpace(string(raw)); suffix != "" {
			return host + "-" + suffix, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	suffix := hex.EncodeToString(b[:])
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, []byte(suffix+"\n"), 0o600); err != nil {
		return "", err
	}
	return host + "-" + suffix, nil
}
