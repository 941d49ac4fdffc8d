package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/framefarm/framefarm/persistence"
)

// createToken makes a team (if needed) and a new API token for it, straight in the database: it
// works while no server holds the database. The token is the last line printed.
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
		return fmt.Errorf("%w; while the server runs, create tokens with POST /api/v2/admin/tokens and the admin token", err)
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
