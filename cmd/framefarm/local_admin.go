package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// localAdminFile, in the data folder, lets commands run on the coordinator's machine reach its
// admin routes while it runs (the database is then locked): whoever may read the data folder
// may read the database anyway. It holds where the server listens and a token made at each
// start; the file is readable by its owner only.
const localAdminFile = "local-admin.json"

type localAdmin struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// writeLocalAdmin makes a fresh local admin token for a server listening at url.
func writeLocalAdmin(dataDir, url string) (localAdmin, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return localAdmin{}, err
	}
	la := localAdmin{URL: url, Token: "ffl_" + hex.EncodeToString(b[:])}
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
