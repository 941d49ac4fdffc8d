package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/framefarm/framefarm/cluster/membership"
	"github.com/framefarm/framefarm/cluster/remoting"
	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence/secretbox"
	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/aerender"
)

// Config is framefarm.toml; config.example.toml documents every key with its default.
type Config struct {
	Server    ServerConfig    `toml:"server"`
	Log       LogConfig       `toml:"log"`
	Node      NodeConfig      `toml:"node"`
	Engines   EnginesConfig   `toml:"engines"`
	Jobs      JobsConfig      `toml:"jobs"`
	Templates TemplatesConfig `toml:"templates"`
	Outputs   OutputsConfig   `toml:"outputs"`
	HTTP      HTTPConfig      `toml:"http"`
	Metrics   MetricsConfig   `toml:"metrics"`
	RateLimit RateLimitConfig `toml:"ratelimit"`
	Webhooks  WebhooksConfig  `toml:"webhooks"`
	Secrets   SecretsConfig   `toml:"secrets"`
	Objects   ObjectsConfig   `toml:"objects"`
	Store     StoreConfig     `toml:"store"`
	Debug     DebugConfig     `toml:"debug"`
	// Cluster is set when the file has a [cluster] table: the coordinator then takes remote
	// render nodes. Without it the coordinator runs alone with its embedded node.
	Cluster *ClusterConfig `toml:"cluster"`
	// HA is set when the file has an [ha] table: the coordinator is then one of several
	// replicas (ha.go).
	HA *HAConfig `toml:"ha"`
}

// ClusterConfig is the [cluster] table, read by `serve` and by `node`.
type ClusterConfig struct {
	// Bind and Advertise are the gossip (membership) address; ActorsBind and ActorsAdvertise
	// the Proto.Actor remote endpoint. Advertise addresses default to the bound ones; an empty
	// ActorsBind is 0.0.0.0:7947 with TLS, 127.0.0.1:7947 when insecure.
	Bind            string `toml:"bind"`
	Advertise       string `toml:"advertise"`
	ActorsBind      string `toml:"actors_bind"`
	ActorsAdvertise string `toml:"actors_advertise"`
	// Seeds are members to join through: a node lists the coordinator's gossip address.
	Seeds []string `toml:"seeds"`
	// Key is the shared cluster key (at least 16 characters): it encrypts gossip, and a node
	// without it can join neither the membership nor the coordinator.
	Key string `toml:"key"`
	// HeartbeatInterval is how often nodes send a heartbeat; Lease how long the coordinator
	// waits for one before the node's renders run elsewhere.
	HeartbeatInterval Duration `toml:"heartbeat_interval"`
	Lease             Duration `toml:"lease"`
	// NodeFailureLimit: renders of different jobs failing in a row on one node before it runs
	// its self-test (quarantined if that fails, or takes longer than NodeSelfTestTimeout).
	NodeFailureLimit    int      `toml:"node_failure_limit"`
	NodeSelfTestTimeout Duration `toml:"node_self_test_timeout"`
	// Insecure runs the actors endpoint without TLS: whoever reaches it is heard, so it is for a
	// trusted network only, and binds loopback unless ActorsBind says otherwise.
	Insecure bool         `toml:"insecure"`
	TLS      remoting.TLS `toml:"tls"`
}

func defaultClusterConfig() ClusterConfig {
	return ClusterConfig{Bind: "0.0.0.0:7946", Seeds: []string{}, HeartbeatInterval: dur(time.Second),
		Lease: dur(5 * time.Second), NodeFailureLimit: 3, NodeSelfTestTimeout: dur(5 * time.Minute)}
}

// actorsBind is where the actors endpoint listens.
func (c *ClusterConfig) actorsBind() string {
	switch {
	case c.ActorsBind != "":
		return c.ActorsBind
	case c.Insecure:
		return "127.0.0.1:7947"
	}
	return "0.0.0.0:7947"
}

// member is what a [cluster] table configures: the words of its refusals differ.
type member int

const (
	aloneMember   member = iota // serve without [ha]
	replicaMember               // serve with [ha]
	nodeMember                  // framefarm node, configured by its flags
)

// errNoClusterTLS refuses to run a cluster nobody secured, saying both ways forward in the
// words of serve's configuration or of the node's flags.
func errNoClusterTLS(who member) error {
	useCerts := "set cert_file, key_file and ca_file in [cluster.tls]"
	useInsecure := "set insecure = true in [cluster] (the actors port then binds 127.0.0.1 unless actors_bind says otherwise)"
	if who == nodeMember {
		useCerts = "start the node with --tls-cert, --tls-key and --tls-ca"
		useInsecure = "start the node with --insecure (the actors port then binds 127.0.0.1 unless --actors-bind says otherwise)"
	}
	return fmt.Errorf(`the cluster has no TLS certificates, so its actors port would obey anyone who reaches it. Either:
  - make them: framefarm cluster tls ca create, then framefarm cluster tls cert create --coordinator
    (and --node ID for each render node), and %s; or
  - on a network you trust, %s`, useCerts, useInsecure)
}

// errReplicasNeedTLS refuses replicas without certificates. Their port carries raft's log (every
// token hash, webhook signing secret and sealed secret of the farm), changes to the set, and
// requests another replica vouches for as the admin's: whoever reached it in the clear could
// read the farm or write to it, on loopback as on a network, so no setting runs it so.
func errReplicasNeedTLS(insecure bool) error {
	drop := ""
	if insecure {
		drop = "remove insecure = true from [cluster] (it is for a coordinator without [ha]) and "
	}
	return fmt.Errorf(`replicas ([ha]) authenticate each other with TLS on the replicas' port (ha.bind), which carries every record of the farm: %sset cert_file, key_file and ca_file in [cluster.tls], the same CA on every replica (framefarm cluster tls ca create, then framefarm cluster tls cert create --coordinator)`, drop)
}

// check returns what is wrong with the table for who.
func (c *ClusterConfig) check(who member) []error {
	var errs []error
	switch {
	case who == replicaMember && (c.Insecure || !c.TLS.Enabled()):
		errs = append(errs, errReplicasNeedTLS(c.Insecure))
	case !c.Insecure && !c.TLS.Enabled():
		errs = append(errs, errNoClusterTLS(who))
	case c.Insecure && c.TLS.Enabled():
		errs = append(errs, errors.New("cluster.insecure is set together with [cluster.tls]: keep one"))
	}
	for name, addr := range map[string]string{"bind": c.Bind, "actors_bind": c.actorsBind()} {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			errs = append(errs, fmt.Errorf("cluster.%s %q is not HOST:PORT", name, addr))
		}
	}
	if len(c.Key) < membership.MinKeyLength {
		errs = append(errs, fmt.Errorf("cluster.key must be at least %d characters (for example: openssl rand -hex 32)", membership.MinKeyLength))
	}
	if c.HeartbeatInterval.Duration <= 0 || c.Lease.Duration < 2*c.HeartbeatInterval.Duration {
		errs = append(errs, errors.New("cluster.lease must be at least twice cluster.heartbeat_interval, which must be positive"))
	}
	if c.NodeFailureLimit < 1 || c.NodeSelfTestTimeout.Duration <= 0 {
		errs = append(errs, errors.New("cluster.node_failure_limit must be at least 1, and cluster.node_self_test_timeout positive"))
	}
	return errs
}

type ServerConfig struct {
	Listen           string   `toml:"listen"`
	PublicURL        string   `toml:"public_url"`
	DataDir          string   `toml:"data_dir"`
	AllowPrivateURLs bool     `toml:"allow_private_urls"`
	AdminToken       string   `toml:"admin_token"`
	ShutdownTimeout  Duration `toml:"shutdown_timeout"`
	MaxBodyBytes     int64    `toml:"max_body_bytes"`
}

type LogConfig struct {
	Format string `toml:"format"`
	Level  string `toml:"level"`
}

type NodeConfig struct {
	LocalSlots int `toml:"local_slots"`
	// Pools are the pools the node belongs to (the embedded node's, or a framefarm node's).
	Pools            []string `toml:"pools"`
	SilenceTimeout   Duration `toml:"silence_timeout"`
	MaxRenderTime    Duration `toml:"max_render_time"`
	MaxDownloadBytes int64    `toml:"max_download_bytes"`
	DownloadTimeout  Duration `toml:"download_timeout"`
}

// EnginesConfig locates what the render engines of a node run.
type EnginesConfig struct {
	FFmpeg       string   `toml:"ffmpeg"`
	FFprobe      string   `toml:"ffprobe"`
	Node         string   `toml:"node"`
	LottieWorker string   `toml:"lottie_worker"`
	FontsDir     string   `toml:"fonts_dir"`
	AE2025       AEConfig `toml:"ae2025"`
	AE2026       AEConfig `toml:"ae2026"`
	// configDir is the folder of the configuration file read (relative lottie_worker paths are
	// looked for there too).
	configDir string
}

// lottieWorker finds the Lottie worker's folder. A relative lottie_worker is looked for from the
// working folder, the configuration file's folder, and the executable's folder and its parent
// (bin/framefarm in a checkout), so the binary works started from anywhere; the first holding
// worker.js wins. Nothing found: the setting as written, and the places looked, for the warning.
func (c EnginesConfig) lottieWorker(executable string) (string, []string) {
	if filepath.IsAbs(c.LottieWorker) {
		return c.LottieWorker, []string{c.LottieWorker}
	}
	var looked []string
	for _, base := range []string{".", c.configDir, filepath.Dir(executable), filepath.Join(filepath.Dir(executable), "..")} {
		if base == "" {
			continue
		}
		dir, err := filepath.Abs(filepath.Join(base, c.LottieWorker))
		if err != nil || slices.Contains(looked, dir) {
			continue
		}
		looked = append(looked, dir)
		if _, err := os.Stat(filepath.Join(dir, "worker.js")); err == nil {
			return dir, looked
		}
	}
	return c.LottieWorker, looked
}

// AEConfig is one After Effects installation.
type AEConfig struct {
	Aerender       string `toml:"aerender"`
	OutputModule   string `toml:"output_module"`
	Extension      string `toml:"extension"`
	RenderSettings string `toml:"render_settings"`
	DraftSettings  string `toml:"draft_settings"`
	// Limits are the farm's limits every job of the engine holds while it renders (its
	// licences), read by the coordinator.
	Limits []string `toml:"limits"`
}

// engineLimits are the limits each engine's jobs hold, as the configuration gives them.
func (c EnginesConfig) engineLimits() map[string][]string {
	out := map[string][]string{}
	for engine, ae := range map[string]AEConfig{renderer.EngineAE2025: c.AE2025, renderer.EngineAE2026: c.AE2026} {
		if len(ae.Limits) > 0 {
			out[engine] = ae.Limits
		}
	}
	return out
}

type JobsConfig struct {
	MaxAttempts      int      `toml:"max_attempts"`
	MaxNestingDepth  int      `toml:"max_nesting_depth"`
	MaxAssets        int      `toml:"max_assets"`
	ProgressInterval Duration `toml:"progress_interval"`
	// ChunkFrames, when set, splits jobs that render at least ChunkAbove frames, and say nothing
	// of chunks, into chunks of this many frames over the render nodes.
	ChunkFrames int `toml:"chunk_frames"`
	ChunkAbove  int `toml:"chunk_above"`
	// Retention is how long finished, failed and cancelled jobs are kept after they ended; 0
	// keeps them for ever.
	Retention Duration `toml:"retention"`
}

type TemplatesConfig struct {
	MaxFileBytes       int64    `toml:"max_file_bytes"`
	UploadURLTTL       Duration `toml:"upload_url_ttl"`
	DownloadTimeout    Duration `toml:"download_timeout"`
	Workers            int      `toml:"workers"`
	MaxInFlightPerTeam int      `toml:"max_in_flight_per_team"`
	MaxBytesPerTeam    int64    `toml:"max_bytes_per_team"`
}

type OutputsConfig struct {
	URLTTL   Duration `toml:"url_ttl"`
	MaxBytes int64    `toml:"max_bytes"`
}

// HTTPConfig is the [http] table: how long and how many connections a client may hold.
type HTTPConfig struct {
	HeaderTimeout   Duration `toml:"header_timeout"`
	RequestTimeout  Duration `toml:"request_timeout"`
	TransferTimeout Duration `toml:"transfer_timeout"`
	MaxConnsPerIP   int      `toml:"max_conns_per_ip"`
}

// MetricsConfig is the [metrics] table: who may read /metrics, and where.
type MetricsConfig struct {
	Token  string `toml:"token"`
	Listen string `toml:"listen"`
}

type RateLimitConfig struct {
	RequestsPerSecond float64 `toml:"requests_per_second"`
	Burst             int     `toml:"burst"`
}

type WebhooksConfig struct {
	RetryBackoff []Duration `toml:"retry_backoff"`
	Timeout      Duration   `toml:"timeout"`
	Concurrency  int        `toml:"concurrency"`
}

type SecretsConfig struct {
	Key string `toml:"key"`
}

type StoreConfig struct {
	MaxBatch int `toml:"max_batch"`
}

// ObjectsConfig is the [objects] table: where the farm's files (templates, fonts, outputs) live.
type ObjectsConfig struct {
	// Backend is "local" (a folder) or "s3" (a bucket).
	Backend string `toml:"backend"`
	// Folder holds the files of backend "local"; empty: the data directory. Replicas share one,
	// which each of them reaches at this path.
	Folder string `toml:"folder"`
	// SigningKey (base64 of 32 bytes) signs the URLs handed out; empty: a key file in the data
	// directory.
	SigningKey string `toml:"signing_key"`
	// RetryAfter is how long a render the object store failed waits before it is queued again,
	// doubling with each further such attempt (which do not count).
	RetryAfter Duration `toml:"retry_after"`
	S3         S3Config `toml:"s3"`
}

// S3Config is the [objects.s3] table: the bucket of backend "s3".
type S3Config struct {
	Endpoint        string `toml:"endpoint"`
	Bucket          string `toml:"bucket"`
	Region          string `toml:"region"`
	Prefix          string `toml:"prefix"`
	PathStyle       bool   `toml:"path_style"`
	AccessKeyID     string `toml:"access_key_id"`
	SecretAccessKey string `toml:"secret_access_key"`
	// PartSize is the size of each part of an upload above it.
	PartSize int64 `toml:"part_size"`
}

// DebugConfig is the [debug] table: Listen, when set, serves Go's pprof there (loopback only).
type DebugConfig struct {
	Listen string `toml:"listen"`
}

// Duration reads "10s", "5m" and the like.
type Duration struct{ time.Duration }

func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration such as \"30s\" or \"5m\"", b)
	}
	if v < 0 {
		return fmt.Errorf("%q: durations cannot be negative", b)
	}
	d.Duration = v
	return nil
}

func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

func dur(d time.Duration) Duration { return Duration{d} }

// defaultConfig holds every default; config.example.toml repeats them.
func defaultConfig() Config {
	return Config{
		Server: ServerConfig{Listen: "127.0.0.1:8080", DataDir: "./data", ShutdownTimeout: dur(30 * time.Second), MaxBodyBytes: 16 << 20},
		Log:    LogConfig{Format: "text", Level: "info"},
		Node: NodeConfig{LocalSlots: 2, Pools: []string{}, SilenceTimeout: dur(10 * time.Minute), MaxRenderTime: dur(24 * time.Hour),
			MaxDownloadBytes: 2 << 30, DownloadTimeout: dur(30 * time.Minute)},
		Engines: EnginesConfig{LottieWorker: "renderer/lottie/worker", AE2025: defaultAEConfig(), AE2026: defaultAEConfig()},
		Jobs: JobsConfig{MaxAttempts: 3, MaxNestingDepth: 3, MaxAssets: 1000, ProgressInterval: dur(time.Second),
			Retention: dur(30 * 24 * time.Hour)},
		Templates: TemplatesConfig{MaxFileBytes: 2 << 30, UploadURLTTL: dur(time.Hour), DownloadTimeout: dur(30 * time.Minute),
			Workers: 2, MaxInFlightPerTeam: 8, MaxBytesPerTeam: 50 << 30},
		Outputs: OutputsConfig{URLTTL: dur(7 * 24 * time.Hour), MaxBytes: 64 << 30},
		HTTP: HTTPConfig{HeaderTimeout: dur(10 * time.Second), RequestTimeout: dur(time.Minute), TransferTimeout: dur(time.Hour),
			MaxConnsPerIP: 256},
		RateLimit: RateLimitConfig{RequestsPerSecond: 50, Burst: 200},
		Webhooks: WebhooksConfig{
			RetryBackoff: []Duration{dur(time.Second), dur(4 * time.Second), dur(16 * time.Second)},
			Timeout:      dur(10 * time.Second), Concurrency: 16,
		},
		Store:   StoreConfig{MaxBatch: 512},
		Objects: ObjectsConfig{Backend: "local", RetryAfter: dur(15 * time.Second), S3: S3Config{Bucket: "framefarm", Region: "us-east-1", PartSize: 64 << 20}},
	}
}

func defaultAEConfig() AEConfig {
	return AEConfig{OutputModule: aerender.DefaultOutputModule, Extension: aerender.DefaultExtension,
		RenderSettings: aerender.DefaultRenderSettings, DraftSettings: aerender.DefaultDraftSettings, Limits: []string{}}
}

// loadConfig reads path over the defaults; an unknown key is an error, so a typo is not silently
// ignored.
func loadConfig(path string) (Config, error) {
	cfg := defaultConfig()
	if path == "" {
		return cfg, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	md, err := toml.Decode(string(raw), &cfg)
	if err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	// Optional tables: decoded again over their defaults, now that they are known to be there.
	if md.IsDefined("cluster") || md.IsDefined("ha") {
		if md.IsDefined("cluster") {
			cluster := defaultClusterConfig()
			cfg.Cluster = &cluster
		}
		if md.IsDefined("ha") {
			ha := defaultHAConfig()
			cfg.HA = &ha
		}
		if md, err = toml.Decode(string(raw), &cfg); err != nil {
			return cfg, fmt.Errorf("%s: %w", path, err)
		}
	}
	if dir, err := filepath.Abs(filepath.Dir(path)); err == nil {
		cfg.Engines.configDir = dir
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		return cfg, fmt.Errorf("%s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	return cfg, nil
}

// check rejects values the server cannot run with.
func (c *Config) check() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Server.Listen); err != nil {
		errs = append(errs, fmt.Errorf("server.listen %q is not HOST:PORT", c.Server.Listen))
	}
	if c.Server.DataDir == "" {
		errs = append(errs, errors.New("server.data_dir is empty"))
	}
	if c.Server.PublicURL != "" && !strings.HasPrefix(c.Server.PublicURL, "http://") && !strings.HasPrefix(c.Server.PublicURL, "https://") {
		errs = append(errs, fmt.Errorf("server.public_url %q must start with http:// or https://", c.Server.PublicURL))
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		errs = append(errs, fmt.Errorf("log.format %q must be text or json", c.Log.Format))
	}
	if c.Node.LocalSlots < 0 {
		errs = append(errs, errors.New("node.local_slots cannot be negative"))
	}
	errs = append(errs, checkNames("node.pools", "pool", c.Node.Pools)...)
	for engine, limits := range c.Engines.engineLimits() {
		errs = append(errs, checkNames("engines."+engine+".limits", "limit", limits)...)
	}
	if c.Jobs.MaxAttempts < 1 {
		errs = append(errs, errors.New("jobs.max_attempts must be at least 1"))
	}
	if c.Jobs.ChunkFrames < 0 || c.Jobs.ChunkFrames > 0 && c.Jobs.ChunkFrames < renderer.MinChunkFrames || c.Jobs.ChunkAbove < 0 {
		errs = append(errs, fmt.Errorf("jobs.chunk_frames must be 0 (off) or at least %d, and jobs.chunk_above at least 0", renderer.MinChunkFrames))
	}
	if len(c.Webhooks.RetryBackoff) == 0 {
		errs = append(errs, errors.New("webhooks.retry_backoff needs at least one duration"))
	}
	if c.RateLimit.RequestsPerSecond <= 0 || c.RateLimit.Burst < 1 {
		errs = append(errs, errors.New("ratelimit.requests_per_second and ratelimit.burst must be positive"))
	}
	if c.Cluster != nil {
		who := aloneMember
		if c.HA != nil {
			who = replicaMember
		}
		errs = append(errs, c.Cluster.check(who)...)
	}
	if c.HA != nil {
		errs = append(errs, c.HA.check(c)...)
	}
	if c.Debug.Listen != "" {
		// pprof shows memory contents and costs CPU on demand: never on a reachable address.
		if host, _, err := net.SplitHostPort(c.Debug.Listen); err != nil || !isLoopback(host) {
			errs = append(errs, fmt.Errorf("debug.listen %q must be a loopback HOST:PORT such as 127.0.0.1:6060 (reach it through an SSH tunnel)", c.Debug.Listen))
		}
	}
	if _, _, err := net.SplitHostPort(c.Metrics.Listen); c.Metrics.Listen != "" && err != nil {
		errs = append(errs, fmt.Errorf("metrics.listen %q is not HOST:PORT (for example 127.0.0.1:9090)", c.Metrics.Listen))
	}
	switch c.Objects.Backend {
	case "local":
	case "s3":
		if c.Objects.S3.Bucket == "" {
			errs = append(errs, errors.New("objects.s3.bucket is empty"))
		}
		if c.Objects.S3.PartSize < 5<<20 {
			errs = append(errs, errors.New("objects.s3.part_size must be at least 5242880 (5 MiB, the smallest part S3 takes)"))
		}
		if (c.Objects.S3.AccessKeyID == "") != (c.Objects.S3.SecretAccessKey == "") {
			errs = append(errs, errors.New("objects.s3.access_key_id and secret_access_key go together: set both, or neither for the AWS environment and credentials files"))
		}
		if u, err := url.Parse(c.Objects.S3.Endpoint); c.Objects.S3.Endpoint != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			errs = append(errs, fmt.Errorf("objects.s3.endpoint %q must be an http:// or https:// URL", c.Objects.S3.Endpoint))
		}
	default:
		errs = append(errs, fmt.Errorf("objects.backend %q must be local or s3", c.Objects.Backend))
	}
	if c.Objects.SigningKey != "" {
		if _, err := secretbox.LoadOrCreateKey(c.Objects.SigningKey, ""); err != nil {
			errs = append(errs, fmt.Errorf("objects.signing_key: %w (for example: openssl rand -base64 32)", err))
		}
	}
	if c.HTTP.MaxConnsPerIP < 0 || c.Templates.Workers < 1 || c.Templates.MaxInFlightPerTeam < 1 || c.Templates.MaxBytesPerTeam < 1 {
		errs = append(errs, errors.New("http.max_conns_per_ip must be 0 or more; templates.workers, max_in_flight_per_team and max_bytes_per_team at least 1"))
	}
	return errors.Join(errs...)
}

// publicURL is the base of every URL handed to clients.
func (c *Config) publicURL() string {
	if c.Server.PublicURL != "" {
		return strings.TrimRight(c.Server.PublicURL, "/")
	}
	return "http://" + c.Server.Listen
}

// checkNames refuses names that are not as pools and limits are named.
func checkNames(setting, what string, names []string) []error {
	var errs []error
	for _, n := range names {
		if !validate.ValidTag(n) {
			errs = append(errs, fmt.Errorf("%s: %s %q must match ^[a-zA-Z0-9_-]{1,64}$", setting, what, n))
		}
	}
	return errs
}

// checkPublicURL refuses a replica whose public URL names its own API port, which dies with it:
// the URL must name the farm, in front of every replica. listen is where the API listens.
func checkPublicURL(publicURL, listen string) error {
	u, err := url.Parse(publicURL)
	if err != nil {
		return fmt.Errorf("server.public_url %q: %w", publicURL, err)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	listenHost, listenPort, err := net.SplitHostPort(listen)
	if err != nil || port != listenPort {
		return nil
	}
	ips, _ := net.LookupIP(u.Hostname())
	for _, ip := range ips {
		if ip.String() == listenHost || ip.IsLoopback() || isLocalAddress(ip) {
			return fmt.Errorf("server.public_url %s names this replica's own API (%s), which dies with it: give the farm's address, a load balancer in front of every replica", publicURL, listen)
		}
	}
	return nil
}

// isLocalAddress reports whether ip is an address of this machine.
func isLocalAddress(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}
