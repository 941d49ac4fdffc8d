package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestExampleConfigStatesTheDefaults keeps config.example.toml and the code's defaults equal.
func TestExampleConfigStatesTheDefaults(t *testing.T) {
	var fromFile Config
	md, err := toml.DecodeFile("../../config.example.toml", &fromFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Undecoded()) > 0 {
		t.Fatalf("unknown keys in the example: %v", md.Undecoded())
	}
	var want, got strings.Builder
	toml.NewEncoder(&want).Encode(defaultConfig())
	toml.NewEncoder(&got).Encode(fromFile)
	if want.String() != got.String() {
		t.Fatalf("config.example.toml differs from the defaults:\n--- example\n%s\n--- defaults\n%s", got.String(), want.String())
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"typo":             "[server]\nlisten_address = \"x\"\n",
		"bad value":        "[node]\nsilence_timeout = \"soon\"\n",
		"bad listen":       "[server]\nlisten = \"8080\"\n",
		"no attempts":      "[jobs]\nmax_attempts = 0\n",
		"short key":        "[cluster]\nkey = \"short\"\n",
		"short lease":      "[cluster]\nkey = \"0123456789abcdef\"\nheartbeat_interval = \"1s\"\nlease = \"1s\"\n",
		"bad bind":         "[cluster]\nkey = \"0123456789abcdef\"\nbind = \"7946\"\ninsecure = true\n",
		"no TLS":           "[cluster]\nkey = \"0123456789abcdef\"\n",
		"TLS and insecure": "[cluster]\nkey = \"0123456789abcdef\"\ninsecure = true\n[cluster.tls]\ncert_file = \"a\"\nkey_file = \"b\"\nca_file = \"c\"\n",
		"debug elsewhere":  "[debug]\nlisten = \"0.0.0.0:6060\"\n",
		"debug no port":    "[debug]\nlisten = \"127.0.0.1\"\n",
		"metrics no port":  "[metrics]\nlisten = \"localhost\"\n",
		"no workers":       "[templates]\nworkers = 0\n",
		"negative cap":     "[http]\nmax_conns_per_ip = -1\n",
	} {
		path := filepath.Join(dir, name+".toml")
		os.WriteFile(path, []byte(body), 0o600)
		cfg, err := loadConfig(path)
		if err == nil {
			err = cfg.check()
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestExampleClusterTableStatesTheDefaults: the commented [cluster] table of the example, once
// uncommented, is the defaults; a file without it leaves the coordinator alone.
func TestExampleClusterTableStatesTheDefaults(t *testing.T) {
	cfg := exampleTable(t, "cluster")
	if cfg.Cluster == nil {
		t.Fatal("the [cluster] table was not read")
	}
	sameTOML(t, "[cluster]", *cfg.Cluster, defaultClusterConfig())
	if alone, _ := loadConfig(""); alone.Cluster != nil {
		t.Fatal("no configuration file, yet a cluster")
	}
}

// TestExampleHATableStatesTheDefaults: the commented [ha] table, once uncommented, reads as the
// defaults, and without it the coordinator runs alone.
func TestExampleHATableStatesTheDefaults(t *testing.T) {
	cfg := exampleTable(t, "ha")
	if cfg.HA == nil {
		t.Fatal("the [ha] table was not read")
	}
	sameTOML(t, "[ha]", *cfg.HA, defaultHAConfig())
	if alone, _ := loadConfig(""); alone.HA != nil {
		t.Fatal("no configuration file, yet replicas")
	}
}

// exampleTable reads the commented table name of the example (up to the next blank line), as an
// operator who uncomments it would.
func exampleTable(t *testing.T, name string) Config {
	t.Helper()
	raw, err := os.ReadFile("../../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "\n# ["+name+"]\n")
	if !ok {
		t.Fatalf("no commented [%s] table in the example", name)
	}
	table, _, _ = strings.Cut(table, "\n\n")
	var uncommented strings.Builder
	uncommented.WriteString("[" + name + "]\n")
	for _, line := range strings.Split(table, "\n") {
		uncommented.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ") + "\n")
	}
	path := filepath.Join(t.TempDir(), name+".toml")
	os.WriteFile(path, []byte(uncommented.String()), 0o600)
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// sameTOML fails t unless two tables encode alike.
func sameTOML(t *testing.T, what string, example, defaults any) {
	t.Helper()
	var want, got strings.Builder
	toml.NewEncoder(&want).Encode(defaults)
	toml.NewEncoder(&got).Encode(example)
	if want.String() != got.String() {
		t.Fatalf("the example's %s differs from the defaults:\n--- example\n%s\n--- defaults\n%s", what, got.String(), want.String())
	}
}

func TestNodeFlags(t *testing.T) {
	t.Setenv(envClusterKey, "")
	_, err := nodeConfig(nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--join") || !strings.Contains(err.Error(), "cluster.key") {
		t.Fatalf("a node without --join and key: %v", err)
	}
	t.Setenv(envClusterKey, "0123456789abcdef")
	if _, err := nodeConfig([]string{"--join", "10.0.0.1:7946"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--tls-cert") {
		t.Fatalf("a node without certificates: %v", err)
	}
	ns, err := nodeConfig([]string{"--join", "10.0.0.1:7946,10.0.0.9:7946", "--id", "r2", "--slots", "3", "--insecure",
		"--engines", "lottie,ae2026", "--require-tags", "gpu,hd", "--advertise", "10.0.0.2:7946", "--label", "gpu=rtx", "--label", "site=berlin"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if ns.id != "r2" || ns.slots != 3 || len(ns.cfg.Cluster.Seeds) != 2 || ns.cfg.Cluster.Key != "0123456789abcdef" ||
		strings.Join(ns.engines, ",") != "lottie,ae2026" || strings.Join(ns.requireTags, ",") != "gpu,hd" ||
		ns.labels["gpu"] != "rtx" || ns.labels["site"] != "berlin" {
		t.Fatalf("settings %+v", ns)
	}
	if addr, err := actorsAdvertise(*ns.cfg.Cluster); err != nil || addr != "" || ns.cfg.Cluster.actorsBind() != "127.0.0.1:7947" {
		t.Fatalf("an insecure node's actors bound at %s, advertised at %q: %v", ns.cfg.Cluster.actorsBind(), addr, err)
	}
	ns.cfg.Cluster.Insecure = false
	if addr, err := actorsAdvertise(*ns.cfg.Cluster); err != nil || addr != "10.0.0.2:7947" {
		t.Fatalf("actors advertised at %q: %v", addr, err)
	}
	if _, err := actorsAdvertise(defaultClusterConfig()); err == nil {
		t.Fatal("a wildcard bind without advertise was accepted")
	}
}

// TestNodeTakesItsIDFromItsCertificate: a node certificate that names a node id gives the node
// its id; another --id is refused.
func TestNodeTakesItsIDFromItsCertificate(t *testing.T) {
	t.Setenv(envClusterKey, "0123456789abcdef")
	dir := t.TempDir()
	if err := createCA([]string{"--dir", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := createCert([]string{"--node", "render-07", "--dir", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := createCert([]string{"--node", "render-07", "--dir", dir}, io.Discard, io.Discard); err == nil {
		t.Fatal("a certificate was replaced")
	}
	tls := []string{"--join", "10.0.0.1:7946", "--tls-cert", filepath.Join(dir, "node-render-07.pem"),
		"--tls-key", filepath.Join(dir, "node-render-07-key.pem"), "--tls-ca", filepath.Join(dir, "farm-ca.pem")}
	ns, err := nodeConfig(tls, io.Discard)
	if err != nil || ns.id != "render-07" {
		t.Fatalf("node id %q: %v", ns.id, err)
	}
	if _, err := nodeConfig(append(tls, "--id", "render-08"), io.Discard); err == nil || !strings.Contains(err.Error(), "render-07") {
		t.Fatalf("another id with the certificate: %v", err)
	}
	if info, err := os.Stat(filepath.Join(dir, "node-render-07-key.pem")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the key file: %v %v", info.Mode(), err)
	}
}

// TestLottieWorkerIsFoundFromAnyFolder: a relative lottie_worker is found beside the
// configuration file or the executable (bin/ of a checkout), whatever the working folder.
func TestLottieWorkerIsFoundFromAnyFolder(t *testing.T) {
	checkout := t.TempDir()
	worker := filepath.Join(checkout, "renderer", "lottie", "worker")
	os.MkdirAll(worker, 0o700)
	os.WriteFile(filepath.Join(worker, "worker.js"), []byte("//"), 0o600)
	executable := filepath.Join(checkout, "bin", "framefarm")
	t.Chdir(t.TempDir())

	byExecutable := EnginesConfig{LottieWorker: "renderer/lottie/worker"}
	if got, _ := byExecutable.lottieWorker(executable); got != worker {
		t.Fatalf("beside the executable: %s, want %s", got, worker)
	}
	byConfig := EnginesConfig{LottieWorker: "renderer/lottie/worker", configDir: checkout}
	if got, _ := byConfig.lottieWorker("/elsewhere/framefarm"); got != worker {
		t.Fatalf("beside the configuration: %s, want %s", got, worker)
	}
	nowhere := EnginesConfig{LottieWorker: "renderer/lottie/worker"}
	if got, looked := nowhere.lottieWorker("/elsewhere/framefarm"); got != "renderer/lottie/worker" || len(looked) < 2 {
		t.Fatalf("not found: %s, looked in %v", got, looked)
	}
}

// TestDefaultNodeIDIsStableAndPerDataFolder: without --id (or a certificate naming one), a node
// is the host name and a suffix kept in its data folder: the same at every start, another for a
// node with another data folder on the same machine.
func TestDefaultNodeIDIsStableAndPerDataFolder(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	a, err := defaultNodeID(first)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := defaultNodeID(first)
	other, _ := defaultNodeID(second)
	host, _ := os.Hostname()
	if a != again || a == other || !strings.HasPrefix(a, host+"-") || !strings.HasPrefix(other, host+"-") {
		t.Fatalf("ids %q, %q again, %q for another folder", a, again, other)
	}
}

// TestReplicasRefuseWhatTheyCannotShare: an [ha] table is refused, naming what to set, without
// the files in a bucket or a shared folder, without the keys in the configuration, without a [cluster], with an
// embedded node, or with peers that do not name this replica.
func TestReplicasRefuseWhatTheyCannotShare(t *testing.T) {
	good := map[string]string{
		"objects":    "[objects]\nbackend = \"s3\"\nsigning_key = \"c2lnbmluZy1rZXktb2YtdGhlLXJlcGxpY2FzLTAxMjM=\"\n",
		"secrets":    "[secrets]\nkey = \"c2VjcmV0cy1rZXktb2YtdGhlLXJlcGxpY2FzLTAxMjM=\"\n",
		"cluster":    "[cluster]\nkey = \"0123456789abcdef\"\n[cluster.tls]\ncert_file = \"c.pem\"\nkey_file = \"c-key.pem\"\nca_file = \"ca.pem\"\n",
		"node":       "[node]\nlocal_slots = 0\n",
		"ha":         "[ha]\nid = \"c1\"\nbind = \"127.0.0.1:7950\"\npeers = [\"c1=127.0.0.1:7950\", \"c2=127.0.0.1:7960\"]\n",
		"objects.s3": "[objects.s3]\nbucket = \"farm\"\n",
		"server":     "[server]\npublic_url = \"http://farm.example:8080\"\n",
	}
	load := func(change map[string]string) error {
		var body strings.Builder
		for _, table := range []string{"server", "objects", "objects.s3", "secrets", "cluster", "node", "ha"} {
			text := good[table]
			if replaced, ok := change[table]; ok {
				text = replaced
			}
			body.WriteString(text)
		}
		path := filepath.Join(t.TempDir(), "ha.toml")
		os.WriteFile(path, []byte(body.String()), 0o600)
		cfg, err := loadConfig(path)
		if err == nil {
			err = cfg.check()
		}
		return err
	}
	if err := load(nil); err != nil {
		t.Fatalf("a good [ha]: %v", err)
	}
	// A folder every replica reaches will do as well as a bucket.
	if err := load(map[string]string{"objects": "[objects]\nbackend = \"local\"\nfolder = \"/srv/farm-files\"\nsigning_key = \"c2lnbmluZy1rZXktb2YtdGhlLXJlcGxpY2FzLTAxMjM=\"\n"}); err != nil {
		t.Fatalf("replicas sharing a folder: %v", err)
	}
	for want, change := range map[string]map[string]string{
		"objects.folder":      {"objects": "[objects]\nbackend = \"local\"\nsigning_key = \"c2lnbmluZy1rZXktb2YtdGhlLXJlcGxpY2FzLTAxMjM=\"\n"},
		"objects.signing_key": {"objects": "[objects]\nbackend = \"s3\"\n"},
		"secrets.key":         {"secrets": ""},
		"[cluster]":           {"cluster": ""},
		// The replicas' port carries every record: insecure, meant for a lone coordinator's
		// actors port, is refused with [ha], and so is a [cluster] without certificates.
		"remove insecure = true from [cluster]":                                              {"cluster": "[cluster]\nkey = \"0123456789abcdef\"\ninsecure = true\n"},
		"set cert_file, key_file and ca_file in [cluster.tls], the same CA on every replica": {"cluster": "[cluster]\nkey = \"0123456789abcdef\"\n"},
		"node.local_slots":  {"node": "[node]\nlocal_slots = 2\n"},
		"server.public_url": {"server": ""},
		"ha.peers":          {"ha": "[ha]\nid = \"c3\"\nbind = \"127.0.0.1:7950\"\npeers = [\"c1=127.0.0.1:7950\"]\n"},
	} {
		err := load(change)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want a refusal naming %s, got %v", want, err)
		} else if strings.Contains(err.Error(), "set insecure = true") {
			t.Errorf("a replica's refusal suggests running in the clear: %v", err)
		}
	}
}

// TestAReplicaPublicURLNamesTheFarm: a replica's public URL naming its own API port is refused:
// the URLs it hands out would die with it.
func TestAReplicaPublicURLNamesTheFarm(t *testing.T) {
	for _, c := range []struct {
		url, listen string
		refused     bool
	}{
		{"http://127.0.0.1:8080", "127.0.0.1:8080", true},
		{"http://localhost:8080", "0.0.0.0:8080", true},
		{"http://127.0.0.1", "127.0.0.1:80", true},
		{"http://127.0.0.1:9000", "127.0.0.1:8080", false}, // a balancer on this machine
		{"https://farm.example.invalid", "0.0.0.0:443", false},
		{"http://192.0.2.10:8080", "0.0.0.0:8080", false}, // another machine
	} {
		err := checkPublicURL(c.url, c.listen)
		if (err != nil) != c.refused {
			t.Errorf("public URL %s, listening on %s: %v", c.url, c.listen, err)
		}
	}
}

// TestTheStartSaysHowToSignIn: at a terminal the start prints the link that signs the dashboard
// in as the farm's admin; to anything else (a pipe, a service's journal) the command that prints
// it, never the token.
func TestTheStartSaysHowToSignIn(t *testing.T) {
	if got := adminSignIn(true, "http://127.0.0.1:8080", "ffl_x", "/bin/framefarm", "/data"); got != "farm admin: sign in to the dashboard at http://127.0.0.1:8080/ui/#token=ffl_x\n" {
		t.Errorf("at a terminal: %q", got)
	}
	if got := adminSignIn(false, "http://127.0.0.1:8080", "ffl_x", "/bin/framefarm", "/data"); strings.Contains(got, "ffl_x") || !strings.Contains(got, "/bin/framefarm token admin --data-dir /data") {
		t.Errorf("elsewhere: %q", got)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&strings.Builder{}) {
		t.Error("a pipe or a buffer taken for a terminal")
	}
}
