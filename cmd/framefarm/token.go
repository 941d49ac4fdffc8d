package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/framefarm/framefarm/persistence"
)

// createToken makes a team (if needed) and a new API token for it: straight in the database, or,
// while a server holds the database, through that server's admin route with the local admin
// token it wrote in the data folder. The token is the last line printed.
func createToken(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (TOML), for its data_dir")
	dataDir := fs.String("data-dir", "", "data directory of the coordinator")
	team := fs.String("team", "", "team name; the team is created if it does not exist")
	if err := fs.Parse(args); err != nil {
		return err
	}
	name := strings.TrimSpace(*team)
	if name == "" || len(name) > 128 {
		return errors.New("--team NAME is required (1 to 128 characters)")
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	if *dataDir != "" {
		cfg.Server.DataDir = *dataDir
	}
	store, err := persistence.Open(filepath.Join(cfg.Server.DataDir, "framefarm.db"), persistence.Options{})
	if errors.Is(err, persistence.ErrLocked) {
		return createTokenThroughServer(cfg.Server.DataDir, name, stdout)
	}
	if err != nil {
		return err
	}
	defer store.Close()
	token, hash := persistence.NewToken()
	secret, err := persistence.NewWebhookSecret()
	if err != nil {
		return err
	}
	now := time.Now()
	issued := &persistence.IssueToken{At: now, TeamName: name, NewTeamID: persistence.NewIDs().New(now), WebhookSecret: secret, TokenHash: hash}
	if err := store.Apply(issued); err != nil {
		return err
	}
	t := issued.Team
	if issued.Created {
		fmt.Fprintf(stdout, "created team %q (%s)\n", t.Name, t.ID)
	} else {
		fmt.Fprintf(stdout, "team %q (%s)\n", t.Name, t.ID)
	}
	fmt.Fprintf(stdout, "webhook signing secret: %s\n", t.WebhookSecret)
	fmt.Fprintln(stdout, "API token (shown once; send it as Authorization: Bearer <token>):")
	fmt.Fprintln(stdout, token)
	return nil
}

// createTokenThroughServer asks the server holding the data folder for the token.
func createTokenThroughServer(dataDir, team string, stdout io.Writer) error {
	la, err := readLocalAdmin(dataDir)
	if err != nil {
		return fmt.Errorf("the database is in use by a server, and %w", err)
	}
	body, _ := json.Marshal(map[string]string{"team": team})
	req, err := http.NewRequest(http.MethodPost, la.URL+"/api/v2/admin/tokens", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+la.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("the database is in use by a server, which does not answer at %s: %w", la.URL, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var answer struct {
		Team  struct{ ID, Name string } `json:"team"`
		Token string                    `json:"token"`
		Error string                    `json:"error"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil || resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("the server at %s refused: %d %s", la.URL, resp.StatusCode, answer.Error)
	}
	fmt.Fprintf(stdout, "team %q (%s), through the server at %s\n", answer.Team.Name, answer.Team.ID, la.URL)
	fmt.Fprintln(stdout, "API token (shown once; send it as Authorization: Bearer <token>):")
	fmt.Fprintln(stdout, answer.Token)
	return nil
}
