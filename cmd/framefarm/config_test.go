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
	raw, err := os.ReadFile("../../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "\n# [cluster]\n")
	if !ok {
		t.Fatal("no commented [cluster] table in the example")
	}
	var uncommented strings.Builder
	uncommented.WriteString("[cluster]\n")
	for _, line := range strings.Split(table, "\n") {
		uncommented.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ") + "\n")
	}
	path := filepath.Join(t.TempDir(), "cluster.toml")
	os.WriteFile(path, []byte(uncommented.String()), 0o600)
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cluster == nil {
		t.Fatal("the [cluster] table was not read")
	}
	var want, got strings.Builder
	toml.NewEncoder(&want).Encode(defaultClusterConfig())
	toml.NewEncoder(&got).Encode(*cfg.Cluster)
	if want.String() != got.String() {
		t.Fatalf("the example's [cluster] differs from the defaults:\n--- example\n%s\n--- defaults\n%s", got.String(), want.String())
	}
	if alone, _ := loadConfig(""); alone.Cluster != nil {
		t.Fatal("no configuration file, yet a cluster")
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
