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
