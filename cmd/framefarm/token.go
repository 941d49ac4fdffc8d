package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/framefarm/framefarm/persistence"
)

// tokenInfo is a token as `token list` and `token revoke` show it (the admin routes' TokenInfo).
type tokenInfo struct {
	ID   string `json:"id"`
	Team struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"team"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt"`
	Expired   bool       `json:"expired"`
	Role      string     `json:"role"`
	// Token, TeamCreated and WebhookSigningSecret are set only in a creation's answer.
	Token                string `json:"token,omitempty"`
	TeamCreated          bool   `json:"teamCreated,omitempty"`
	WebhookSigningSecret string `json:"webhookSigningSecret,omitempty"`
	Error                string `json:"error,omitempty"`
}

// tokenCommand runs `framefarm token create|list|revoke`: straight in the database, or, while a
// server holds the database, through that server's admin routes with the local admin token it
// wrote in the data folder.
func tokenCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("token needs a command: create, list, revoke or admin")
	}
	fs := commandFlags("token " + args[0])
	configPath := fs.String("config", "", "configuration file (TOML), for its data_dir")
	dataDir := fs.String("data-dir", "", "data directory of the coordinator")
	team := fs.String("team", "", "create: team name; the team is created if it does not exist")
	expires := fs.Duration("expires", 0, "create: the token stops working after this long (for example 720h); 0: never")
	role := fs.String("role", "submitter", "create: viewer (reads and streams only), submitter (also sends and changes work) or manager (also makes and revokes the team's tokens)")
	if err := parseFlags(fs, stdout, args[1:]); err != nil {
		return err
	}
	cfg, err := loadConfig(*configPath)
	if err != nil {
		return err
	}
	if *dataDir != "" {
		cfg.Server.DataDir = *dataDir
	}
	t := tokenTool{dataDir: cfg.Server.DataDir, stdout: stdout, dashboard: cfg.publicURL() + "/ui/"}
	switch args[0] {
	case "create":
		r, ok := persistence.ParseTokenRole(*role)
		if !ok {
			return fmt.Errorf("--role %q: viewer, submitter or manager", *role)
		}
		return t.create(strings.TrimSpace(*team), *expires, r)
	case "list":
		return t.list()
	case "admin":
		return t.admin()
	case "revoke":
		if fs.NArg() != 1 {
			return errors.New("token revoke needs the token's id (from token list)")
		}
		return t.revoke(fs.Arg(0))
	}
	return fmt.Errorf("unknown token command %q: create, list, revoke or admin", args[0])
}

// admin prints the farm's admin token for this data folder, kept across restarts, and a link
// that signs the dashboard in as the farm's admin.
func (t tokenTool) admin() error {
	la, err := readLocalAdmin(t.dataDir)
	if err != nil {
		return fmt.Errorf("%w (the coordinator writes its admin token at its first start)", err)
	}
	fmt.Fprintf(t.stdout, "admin token (kept across restarts; framefarm node and ha commands on this machine find it by themselves):\n  %s\n", la.Token)
	dashboard := la.Dashboard
	if dashboard == "" {
		dashboard = t.dashboard
	}
	fmt.Fprintf(t.stdout, "sign in to the dashboard as the farm's admin:\n  %s#token=%s\n", dashboard, la.Token)
	return nil
}

type tokenTool struct {
	dataDir   string
	stdout    io.Writer
	dashboard string // the dashboard's address, for a link that signs in
}

// withStore runs direct on the database, or, when a server holds it, viaServer. A replica's
// records change only through the replicas: with no server running, a write to them is refused.
func (t tokenTool) withStore(writes bool, direct func(*persistence.Store) error, viaServer func(localAdmin) error) error {
	store, err := persistence.Open(filepath.Join(t.dataDir, "framefarm.db"), persistence.Options{})
	if errors.Is(err, persistence.ErrLocked) {
		la, err := readLocalAdmin(t.dataDir)
		if err != nil {
			return fmt.Errorf("the database is in use by a server, and %w", err)
		}
		return viaServer(la)
	}
	if err != nil {
		return err
	}
	defer store.Close()
	if writes && store.AppliedIndex() > 0 {
		return errors.New("this data folder is a replica's: its records change only through the replicas, so tokens are created and revoked through a running one (start this replica and run the command again, or run it with a running replica's data folder)")
	}
	return direct(store)
}

// ask calls an admin route of the server holding the database and decodes its answer into out.
func ask(la localAdmin, method, path string, body any, want int, out any) error {
	var reader io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, la.URL+path, reader)
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
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if resp.StatusCode != want {
		var e struct{ Error string }
		json.Unmarshal(raw, &e)
		return fmt.Errorf("the server at %s refused: %d %s", la.URL, resp.StatusCode, e.Error)
	}
	return json.Unmarshal(raw, out)
}

func (t tokenTool) create(name string, expires time.Duration, role persistence.TokenRole) error {
	if name == "" || len(name) > 128 {
		return errors.New("--team NAME is required (1 to 128 characters)")
	}
	if expires < 0 {
		return errors.New("--expires cannot be negative")
	}
	var expiresAt time.Time
	if expires > 0 {
		expiresAt = time.Now().Add(expires).UTC().Truncate(time.Second)
	}
	return t.withStore(true, func(store *persistence.Store) error {
		token, hash := persistence.NewToken()
		secret, err := persistence.NewWebhookSecret()
		if err != nil {
			return err
		}
		now := time.Now()
		issued := &persistence.IssueToken{At: now, TeamName: name, NewTeamID: persistence.NewIDs().New(now), WebhookSecret: secret,
			TokenHash: hash, ExpiresAt: expiresAt, Role: role}
		if err := store.Apply(issued); err != nil {
			return err
		}
		t.printTeam(issued.Created, issued.Team.Name, issued.Team.ID.String(), issued.Team.WebhookSecret)
		info := persistence.Token{Hash: hash, ExpiresAt: expiresAt}
		t.printCreated(info.ID(), role, expiresAt, token)
		return nil
	}, func(la localAdmin) error {
		body := map[string]any{"team": name, "role": role}
		if !expiresAt.IsZero() {
			body["expiresAt"] = expiresAt
		}
		var answer tokenInfo
		if err := ask(la, http.MethodPost, "/api/v2/admin/tokens", body, http.StatusCreated, &answer); err != nil {
			return err
		}
		t.printTeam(answer.TeamCreated, answer.Team.Name, answer.Team.ID, answer.WebhookSigningSecret)
		fmt.Fprintf(t.stdout, "(made through the server at %s)\n", la.URL)
		if la.Dashboard != "" {
			t.dashboard = la.Dashboard
		}
		t.printCreated(answer.ID, role, expiresAt, answer.Token)
		return nil
	})
}

// printTeam begins a creation's output: the team, and its webhook signing secret.
func (t tokenTool) printTeam(created bool, name, id, webhookSecret string) {
	if created {
		fmt.Fprintf(t.stdout, "created team %q (%s)\n", name, id)
	} else {
		fmt.Fprintf(t.stdout, "team %q (%s)\n", name, id)
	}
	fmt.Fprintf(t.stdout, "webhook signing secret: %s\n", webhookSecret)
}

// printCreated ends a creation's output; the token is the last line.
func (t tokenTool) printCreated(id string, role persistence.TokenRole, expiresAt time.Time, token string) {
	until := "never expires"
	if !expiresAt.IsZero() {
		until = "expires " + expiresAt.Format(time.RFC3339)
	}
	fmt.Fprintf(t.stdout, "token id %s, a %s's (%s; framefarm token revoke %s stops it)\n", id, role, until, id)
	fmt.Fprintf(t.stdout, "dashboard, signed in (the part after # never reaches the server): %s#token=%s\n", t.dashboard, token)
	fmt.Fprintln(t.stdout, "API token (shown once; send it as Authorization: Bearer <token>):")
	fmt.Fprintln(t.stdout, token)
}

func (t tokenTool) list() error {
	var tokens []tokenInfo
	err := t.withStore(false, func(store *persistence.Store) error {
		now := time.Now()
		all, err := store.Tokens()
		for _, tok := range all {
			info := tokenInfo{ID: tok.ID(), CreatedAt: tok.CreatedAt, Expired: tok.Expired(now), Role: string(tok.RoleOrDefault())}
			info.Team.ID, info.Team.Name = tok.Team.ID.String(), tok.Team.Name
			if !tok.ExpiresAt.IsZero() {
				info.ExpiresAt = &tok.ExpiresAt
			}
			tokens = append(tokens, info)
		}
		return err
	}, func(la localAdmin) error {
		return ask(la, http.MethodGet, "/api/v2/admin/tokens", nil, http.StatusOK, &tokens)
	})
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(t.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tTEAM\tROLE\tCREATED\tEXPIRES")
	for _, tok := range tokens {
		expires := "never"
		if tok.ExpiresAt != nil {
			expires = tok.ExpiresAt.UTC().Format(time.RFC3339)
			if tok.Expired {
				expires += " (expired)"
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", tok.ID, tok.Team.Name, tok.Role, tok.CreatedAt.UTC().Format(time.RFC3339), expires)
	}
	return w.Flush()
}

func (t tokenTool) revoke(id string) error {
	err := t.withStore(true, func(store *persistence.Store) error {
		err := store.Apply(&persistence.RevokeToken{TokenID: id})
		if errors.Is(err, persistence.ErrNotFound) {
			return fmt.Errorf("no token %q (framefarm token list shows the ids)", id)
		}
		return err
	}, func(la localAdmin) error {
		var revoked tokenInfo
		return ask(la, http.MethodDelete, "/api/v2/admin/tokens/"+id, nil, http.StatusOK, &revoked)
	})
	if err == nil {
		fmt.Fprintf(t.stdout, "token %s revoked\n", id)
	}
	return err
}
