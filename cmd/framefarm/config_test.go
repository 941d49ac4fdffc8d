package main

import (
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
		"typo":        "[server]\nlisten_address = \"x\"\n",
		"bad value":   "[node]\nsilence_timeout = \"soon\"\n",
		"bad listen":  "[server]\nlisten = \"8080\"\n",
		"no attempts": "[jobs]\nmax_attempts = 0\n",
		"short key":   "[cluster]\nkey = \"short\"\n",
		"short lease": "[cluster]\nkey = \"0123456789abcdef\"\nheartbeat_interval = \"1s\"\nlease = \"1s\"\n",
		"bad bind":    "[cluster]\nkey = \"0123456789abcdef\"\nbind = \"7946\"\n",
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
