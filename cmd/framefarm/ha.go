package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/framefarm/framefarm/cluster/replicas"
	"github.com/framefarm/framefarm/persistence"
)

// HAConfig is the [ha] table: this coordinator is one of several replicas on raft, which hold
// the same records; one of them, the leader, carries out writes and runs the farm's actors, and
// another takes over when it is lost.
type HAConfig struct {
	// ID names this replica among the others (unique, never reused for another machine).
	ID string `toml:"id"`
	// Bind is the replicas' port (raft, and requests handed to the leader); Advertise what the
	// others dial, Bind when empty.
	Bind      string `toml:"bind"`
	Advertise string `toml:"advertise"`
	// Peers are the replicas of a new set, "id=host:port" each, this one among them; the first
	// starts the set (from its records, when it has any).
	Peers []string `toml:"peers"`
	// HeartbeatTimeout is how long followers wait to hear from the leader before one of them
	// stands for election; LeaderLease how long a leader leads without a quorum's contact.
	HeartbeatTimeout Duration `toml:"heartbeat_timeout"`
	LeaderLease      Duration `toml:"leader_lease"`
	// SnapshotThreshold is how many log entries since the last snapshot make a replica write
	// the next (the store's whole file); TrailingLogs how many stay after it, for followers a
	// little behind (one further behind receives the snapshot).
	SnapshotThreshold uint64 `toml:"snapshot_threshold"`
	TrailingLogs      uint64 `toml:"trailing_logs"`
	// SnapshotInterval is how often a replica looks whether a snapshot is due.
	SnapshotInterval Duration `toml:"snapshot_interval"`
	// RemoveDeadAfter: a replica the leader's heartbeats have not reached for this long is
	// removed from the set (when those left still make a quorum); 0: never.
	RemoveDeadAfter Duration `toml:"remove_dead_after"`
}

func (h *HAConfig) check(c *Config) []error {
	var errs []error
	if h.ID == "" || len(h.ID) > 64 {
		errs = append(errs, fmt.Errorf("ha.id %q: name this replica (c1, c2, ...), in at most 64 bytes", h.ID))
	}
	if _, _, err := net.SplitHostPort(h.Bind); err != nil {
		errs = append(errs, fmt.Errorf("ha.bind %q is not HOST:PORT", h.Bind))
	}
	self := false
	for _, p := range h.Peers {
		peer, err := replicas.ParsePeer(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("ha.peers: %w", err))
		}
		self = self || peer.ID == h.ID
	}
	if !self {
		errs = append(errs, fmt.Errorf("ha.peers must name this replica (%s) among the others", h.ID))
	}
	if h.SnapshotThreshold < 1 || h.TrailingLogs < 1 || h.SnapshotInterval.Duration < 10*time.Millisecond {
		errs = append(errs, errors.New("ha.snapshot_threshold and ha.trailing_logs must be at least 1, ha.snapshot_interval at least 10ms"))
	}
	if h.LeaderLease.Duration > h.HeartbeatTimeout.Duration {
		errs = append(errs, errors.New("ha.leader_lease cannot be longer than ha.heartbeat_timeout"))
	}
	// Every replica serves the same files and reads the same secrets.
	if c.Objects.Backend != "s3" && c.Objects.Folder == "" {
		errs = append(errs, errors.New("replicas ([ha]) share their files: set objects.backend = \"s3\" (a bucket), or objects.folder to a folder every replica reaches at that path (an NFS mount; one machine's disk for a trial)"))
	}
	if c.Objects.SigningKey == "" {
		errs = append(errs, errors.New("replicas ([ha]) sign URLs alike: set objects.signing_key, the same on every replica"))
	}
	if c.Secrets.Key == "" {
		errs = append(errs, errors.New("replicas ([ha]) read the same secrets: set secrets.key, the same on every replica"))
	}
	if c.Cluster == nil {
		errs = append(errs, errors.New("replicas ([ha]) render on remote nodes and authenticate each other with the cluster's certificates: add a [cluster] table"))
	}
	if c.Node.LocalSlots > 0 {
		errs = append(errs, errors.New("replicas ([ha]) render on remote nodes only: set node.local_slots = 0 (serve --local-slots 0)"))
	}
	if c.Server.PublicURL == "" {
		errs = append(errs, errors.New("replicas ([ha]) hand out URLs that must outlive any one of them: set server.public_url to the farm's address (a load balancer in front of every replica), the same on every replica"))
	}
	return errs
}

func defaultHAConfig() HAConfig {
	return HAConfig{Peers: []string{}, HeartbeatTimeout: dur(800 * time.Millisecond), LeaderLease: dur(500 * time.Millisecond), SnapshotThreshold: 16384, TrailingLogs: 8192,
		SnapshotInterval: dur(2 * time.Minute), RemoveDeadAfter: dur(10 * time.Minute)}
}

// haCommand runs `framefarm ha status|join|remove`: the replicas as the one asked sees them, or a
// change of the set carried out by the leader; `ha recover`, on the stopped survivor; and for a
// trial on one machine, `ha init` and `ha balance`.
func haCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "recover":
			return haRecover(args[1:], stdout)
		case "init":
			return haInit(args[1:], stdout)
		case "balance":
			return haBalance(ctx, args[1:], stdout, stderr)
		}
	}
	if len(args) == 0 || (args[0] != "status" && args[0] != "join" && args[0] != "remove") {
		return errors.New("ha needs a command: status, join --id ID --address HOST:PORT, remove ID, recover, init or balance")
	}
	fs := commandFlags("ha " + args[0])
	admin := addAdminFlags(fs)
	id := fs.String("id", "", "join: the new replica's id ([ha] id in its configuration)")
	address := fs.String("address", "", "join: the new replica's host:port ([ha] advertise, or bind)")
	rest := args[1:]
	removed := ""
	if args[0] == "remove" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		removed, rest = rest[0], rest[1:]
	}
	if err := parseFlags(fs, stdout, rest); err != nil {
		return err
	}
	method, path, body := http.MethodGet, "/api/v2/admin/cluster", []byte(nil)
	switch args[0] {
	case "join":
		if *id == "" || *address == "" {
			return errors.New("usage: framefarm ha join --id ID --address HOST:PORT [--url URL] [--admin-token TOKEN]")
		}
		method, path = http.MethodPost, "/api/v2/admin/cluster/replicas"
		body, _ = json.Marshal(map[string]string{"id": *id, "address": *address})
	case "remove":
		if removed == "" || fs.NArg() != 0 {
			return errors.New("usage: framefarm ha remove ID [--url URL] [--admin-token TOKEN]")
		}
		method, path = http.MethodDelete, "/api/v2/admin/cluster/replicas/"+url.PathEscape(removed)
	}
	base, token, err := admin.resolve()
	if err != nil {
		return err
	}
	_, answer, err := adminRequest(method, base, path, token, body)
	if err != nil {
		return err
	}
	var s replicas.Status
	if err := json.Unmarshal(answer, &s); err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	fmt.Fprintf(stdout, "asked %s (%s), term %d, leader %s\n", s.ID, s.State, s.Term, s.LeaderID)
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "REPLICA\tADDRESS\tVOTER\tSTATE\tAPPLIED\tLAST CONTACT")
	for _, r := range s.Replicas {
		state, applied, contact := "unreachable", "-", "-"
		if r.State != nil {
			state, applied = *r.State, strconv.FormatUint(*r.Applied, 10)
		}
		if r.Contact != nil {
			contact = r.Contact.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\t%s\n", r.ID, r.Address, r.Voter, state, applied, contact)
	}
	return w.Flush()
}

// haRecover runs `framefarm ha recover`: the replica of a configuration (stopped), whose others
// are gone for good, becomes a set of one with every write its log holds (replicas.Recover).
func haRecover(args []string, stdout io.Writer) error {
	fs := commandFlags("ha recover")
	configPath := fs.String("config", "", "the replica's configuration file (TOML), with its [ha] table")
	dataDir := fs.String("data-dir", "", "its data directory (default: the configuration's)")
	if err := parseFlags(fs, stdout, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*configPath)
	if err == nil && cfg.HA == nil {
		err = errors.New("the configuration has no [ha] table: only a replica is recovered (give its --config)")
	}
	if err != nil {
		return err
	}
	cfg.Server.DataDir = cmp.Or(*dataDir, cfg.Server.DataDir)
	store, err := persistence.Open(filepath.Join(cfg.Server.DataDir, "framefarm.db"), persistence.Options{Replica: true})
	if errors.Is(err, persistence.ErrLocked) {
		err = replicas.ErrRunning
	}
	if err != nil {
		return err
	}
	started := time.Now()
	addr := cmp.Or(cfg.HA.Advertise, cfg.HA.Bind)
	got, err := replicas.Recover(replicas.RecoverConfig{ID: cfg.HA.ID, Addr: addr, Dir: filepath.Join(cfg.Server.DataDir, "replicas"),
		Store: store, Logger: slog.New(slog.NewTextHandler(stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err = errors.Join(err, store.Close()); err == nil {
		fmt.Fprintf(stdout, "replica %s is a set of one at %s, its records at index %d (%s); start it, then add replicas with framefarm ha join\n",
			cfg.HA.ID, addr, got.AppliedIndex, time.Since(started).Round(time.Millisecond))
	}
	return err
}
