package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
)

// localAdminFile, in the data folder, lets commands run on the coordinator's machine reach its
// admin routes while it runs (the database is then locked), and gives the farm's operator an
// admin token for the dashboard (`framefarm token admin`): whoever may read the data folder may
// read the database anyway. It holds where the server listens and a token made at the first
// start and kept across restarts; the file is readable by its owner only.
const localAdminFile = "local-admin.json"

type localAdmin struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	// Dashboard is the dashboard's address as the server hands it out (its public URL).
	Dashboard string `json:"dashboard,omitempty"`
}

// writeLocalAdmin records where a server listens and its dashboard is, with its local admin
// token: token when given (a replica's, the farm's), else the one it had (a new one the first
// time, or when the file is damaged).
func writeLocalAdmin(dataDir, url, dashboard, token string) (localAdmin, error) {
	la, err := readLocalAdmin(dataDir)
	switch {
	case token != "":
		la.Token = token
	case err != nil:
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return localAdmin{}, err
		}
		la.Token = "ffl_" + hex.EncodeToString(b[:])
	}
	la.URL, la.Dashboard = url, dashboard
	raw, err := json.Marshal(la)
	if err != nil {
		return localAdmin{}, err
	}
	path := filepath.Join(dataDir, localAdminFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return localAdmin{}, err
	}
	return la, os.Rename(tmp, path)
}

// replicasAdminToken is the farm admin's token of a set of replicas, the same on every one of
// them: made from the secrets key they share, so `framefarm token admin` on any replica's
// machine prints a token every replica takes, whichever leads. It reveals nothing of the key.
func replicasAdminToken(secretsKey []byte) string {
	mac := hmac.New(sha256.New, secretsKey)
	mac.Write([]byte("framefarm farm admin token"))
	return "ffl_" + hex.EncodeToString(mac.Sum(nil))
}

// readLocalAdmin reads what the running server wrote.
func readLocalAdmin(dataDir string) (localAdmin, error) {
	raw, err := os.ReadFile(filepath.Join(dataDir, localAdminFile))
	if errors.Is(err, os.ErrNotExist) {
		return localAdmin{}, fmt.Errorf("no %s in %s: is the server running with this data folder?", localAdminFile, dataDir)
	}
	if err != nil {
		return localAdmin{}, err
	}
	var la localAdmin
	if err := json.Unmarshal(raw, &la); err != nil || la.URL == "" || la.Token == "" {
		return localAdmin{}, fmt.Errorf("%s in %s is damaged; restart the server to write it again", localAdminFile, dataDir)
	}
	return la, nil
}

// adminFlags are how the admin commands (node, ha) reach a coordinator: its URL and an admin
// token, which default to $FRAMEFARM_ADMIN_TOKEN, then to what the coordinator of a data folder
// on this machine wrote (--data-dir, or the configuration's data_dir).
type adminFlags struct {
	url, token, dataDir, config *string
}

func addAdminFlags(fs *flag.FlagSet) adminFlags {
	return adminFlags{
		url:     fs.String("url", "", "the coordinator's API base URL (default: the one the data folder's coordinator wrote, else http://127.0.0.1:8080)"),
		token:   fs.String("admin-token", "", "admin token (default $"+envAdminToken+", else the local admin token of the data folder)"),
		dataDir: fs.String("data-dir", "", "data folder of a coordinator on this machine, for its URL and local admin token"),
		config:  fs.String("config", "", "configuration file (TOML), for its data_dir"),
	}
}

// resolve returns the URL and token to use, saying what is missing when no token is found.
func (a adminFlags) resolve() (base, token string, err error) {
	base, token = *a.url, *a.token
	if token == "" {
		token = os.Getenv(envAdminToken)
	}
	if token == "" || base == "" {
		cfg, cfgErr := loadConfig(*a.config)
		dir := *a.dataDir
		if dir == "" && cfgErr == nil {
			dir = cfg.Server.DataDir
		}
		if la, err := readLocalAdmin(dir); err == nil {
			if token == "" {
				token = la.Token
				if base == "" {
					base = la.URL
				}
			}
		} else if token == "" {
			return "", "", fmt.Errorf("no admin token: give --admin-token or $%s, or run this on the coordinator's machine (%v)", envAdminToken, err)
		}
	}
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	return base, token, nil
}

// ask sends one admin request with a JSON body (nil: none) and decodes the answer into out
// (nil: ignored).
func (a adminFlags) ask(method, path string, body, out any) (status int, err error) {
	var raw []byte
	if body != nil {
		if raw, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	base, token, err := a.resolve()
	if err != nil {
		return 0, err
	}
	status, answer, err := adminRequest(method, base, path, token, raw)
	if err != nil || out == nil || status == http.StatusNoContent {
		return status, err
	}
	if err := json.Unmarshal(answer, out); err != nil {
		return status, fmt.Errorf("unexpected answer: %w", err)
	}
	return status, nil
}
