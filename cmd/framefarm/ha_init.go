package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	lb "github.com/framefarm/framefarm/cluster/balancer"
	"github.com/framefarm/framefarm/cluster/clock"
)

// trialFarm is the layout `framefarm ha init` writes: replicas of one farm on one machine, the
// ports following each other from the balancer's (the farm's address): each replica's API,
// then their raft, gossip and actors ports, then a render node's gossip and actors ports.
type trialFarm struct {
	dir      string
	host     string
	port     int
	replicas int
}

func (f trialFarm) addr(port int) string { return net.JoinHostPort(f.host, strconv.Itoa(port)) }

// api, raft, gossip and actors are replica i's (from 1) addresses.
func (f trialFarm) api(i int) string    { return f.addr(f.port + i) }
func (f trialFarm) raft(i int) string   { return f.addr(f.port + f.replicas + i) }
func (f trialFarm) gossip(i int) string { return f.addr(f.port + 2*f.replicas + i) }
func (f trialFarm) actors(i int) string { return f.addr(f.port + 3*f.replicas + i) }

// nodeGossip and nodeActors are the render node's.
func (f trialFarm) nodeGossip() string { return f.addr(f.port + 4*f.replicas + 1) }
func (f trialFarm) nodeActors() string { return f.addr(f.port + 4*f.replicas + 2) }

func (f trialFarm) publicURL() string { return "http://" + f.addr(f.port) }

func (f trialFarm) id(i int) string { return "c" + strconv.Itoa(i) }

func (f trialFarm) path(parts ...string) string {
	return filepath.Join(append([]string{f.dir}, parts...)...)
}

// haInit writes a trial farm of replicas on this machine: the farm's CA and certificates, the
// keys every replica shares, each replica's configuration and a render node's, and prints the
// commands that start them behind the built-in balancer.
func haInit(args []string, stdout io.Writer) error {
	fs := commandFlags("ha init")
	dir := fs.String("dir", "farm", "folder to write the farm into (it must not exist, or be empty)")
	replicas := fs.Int("replicas", 3, "replicas: 3 or 5")
	host := fs.String("host", "127.0.0.1", "the address every process listens on")
	port := fs.Int("port", 8080, "the farm's port (the balancer's); the other processes take the ports after it")
	if err := parseFlags(fs, stdout, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || (*replicas != 3 && *replicas != 5) || net.ParseIP(*host) == nil {
		return errors.New("usage: framefarm ha init [--dir DIR] [--replicas 3|5] [--host IP] [--port PORT]")
	}
	f := trialFarm{host: *host, port: *port, replicas: *replicas}
	if last := f.port + 4*f.replicas + 2; f.port < 1 || last > 65535 {
		return fmt.Errorf("--port %d: the farm takes ports %d to %d, which must lie within 1 to 65535", f.port, f.port, last)
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	f.dir = abs
	if entries, err := os.ReadDir(f.dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty: give another --dir, or remove it", f.dir)
	}
	for _, d := range []string{f.dir, f.path("files")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	pki := f.path("pki")
	for _, step := range [][]string{
		{"--dir", pki},
		{"--coordinator", "--dir", pki},
		{"--any-node", "--dir", pki},
	} {
		create := createCert
		if len(step) == 2 {
			create = createCA
		}
		if err := create(step, io.Discard, io.Discard); err != nil {
			return err
		}
	}
	keys := map[string]string{}
	for _, name := range []string{"secrets", "signing", "cluster"} {
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		keys[name] = base64.StdEncoding.EncodeToString(raw)
		if name == "cluster" {
			keys[name] = hex.EncodeToString(raw)
		}
	}
	for i := 1; i <= f.replicas; i++ {
		if err := os.WriteFile(f.path(f.id(i)+".toml"), []byte(f.replicaConfig(i, keys)), 0o600); err != nil {
			return err
		}
	}
	if err := os.WriteFile(f.path("node.toml"), []byte(f.nodeConfig(keys["cluster"])), 0o600); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		self = "framefarm"
	}
	fmt.Fprintf(stdout, "wrote a farm of %d replicas in %s (its keys and certificates in pki/ and the .toml files: keep them private)\n", f.replicas, f.dir)
	fmt.Fprintf(stdout, "start each of these, in a terminal of its own (or with & and its output to a file):\n")
	for _, line := range f.commands(self) {
		fmt.Fprintf(stdout, "  %s\n", line)
	}
	fmt.Fprintf(stdout, "then the farm is %s: its dashboard %s/ui/, its admin token from\n  %s token admin --config %s\n",
		f.publicURL(), f.publicURL(), self, f.path("c1.toml"))
	fmt.Fprintf(stdout, "and %s ha status --url %s --config %s shows the replicas.\n", self, f.publicURL(), f.path("c1.toml"))
	return nil
}

// commands are the command lines that run the farm, self the framefarm binary.
func (f trialFarm) commands(self string) []string {
	var lines []string
	var apis []string
	for i := 1; i <= f.replicas; i++ {
		lines = append(lines, fmt.Sprintf("%s serve --config %s", self, f.path(f.id(i)+".toml")))
		apis = append(apis, f.api(i))
	}
	lines = append(lines, fmt.Sprintf("%s ha balance --listen %s --to %s", self, f.addr(f.port), strings.Join(apis, ",")),
		fmt.Sprintf("%s node --config %s --data-dir %s", self, f.path("node.toml"), f.path("node")))
	return lines
}

// replicaConfig is replica i's configuration.
func (f trialFarm) replicaConfig(i int, keys map[string]string) string {
	var peers []string
	for p := 1; p <= f.replicas; p++ {
		peers = append(peers, strconv.Quote(f.id(p)+"="+f.raft(p)))
	}
	return fmt.Sprintf(`# Replica %[1]s of a trial farm on one machine, written by framefarm ha init. The other
# replicas' files differ only in their addresses, data folder and [ha] id; the keys are the same.
[server]
listen = %[2]q
public_url = %[3]q
data_dir = %[4]q

[node]
# Replicas render on remote nodes (node.toml) only.
local_slots = 0

[secrets]
key = %[5]q

[objects]
# Every replica reaches the farm's files in this one folder; on several machines, a bucket or
# a folder each of them mounts.
backend = "local"
folder = %[6]q
signing_key = %[7]q

[cluster]
bind = %[8]q
actors_bind = %[9]q
key = %[10]q

[cluster.tls]
cert_file = %[11]q
key_file = %[12]q
ca_file = %[13]q

[ha]
id = %[1]q
bind = %[14]q
peers = [%[15]s]
`, f.id(i), f.api(i), f.publicURL(), f.path(f.id(i)), keys["secrets"], f.path("files"), keys["signing"],
		f.gossip(i), f.actors(i), keys["cluster"],
		f.path("pki", "coordinator.pem"), f.path("pki", "coordinator-key.pem"), f.path("pki", caCertFile),
		f.raft(i), strings.Join(peers, ", "))
}

// nodeConfig is the render node's configuration: it joins through every replica's gossip port.
func (f trialFarm) nodeConfig(clusterKey string) string {
	var seeds []string
	for i := 1; i <= f.replicas; i++ {
		seeds = append(seeds, strconv.Quote(f.gossip(i)))
	}
	return fmt.Sprintf(`# A render node of the trial farm written by framefarm ha init (framefarm node --config this).
[cluster]
bind = %q
actors_bind = %q
seeds = [%s]
key = %q

[cluster.tls]
cert_file = %q
key_file = %q
ca_file = %q
`, f.nodeGossip(), f.nodeActors(), strings.Join(seeds, ", "), clusterKey,
		f.path("pki", "node.pem"), f.path("pki", "node-key.pem"), f.path("pki", caCertFile))
}

// haBalance runs the built-in balancer in front of replicas: for a trial on one machine, where
// a farm of replicas needs one address (server.public_url) that outlives any of them.
func haBalance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("ha balance")
	listen := fs.String("listen", "127.0.0.1:8080", "the farm's address: every replica's server.public_url names it")
	to := fs.String("to", "", "the replicas' API addresses (server.listen), HOST:PORT,HOST:PORT,...")
	interval := fs.Duration("check-interval", time.Second, "how often each replica's readiness is asked (GET /readyz)")
	if err := parseFlags(fs, stdout, args); err != nil {
		return err
	}
	var replicas []string
	for _, r := range strings.Split(*to, ",") {
		if r = strings.TrimSpace(r); r != "" {
			if _, _, err := net.SplitHostPort(r); err != nil {
				return fmt.Errorf("--to %q: %w", r, err)
			}
			replicas = append(replicas, r)
		}
	}
	if fs.NArg() != 0 || len(replicas) == 0 || *interval <= 0 {
		return errors.New("usage: framefarm ha balance --listen HOST:PORT --to HOST:PORT,HOST:PORT,... [--check-interval 1s]")
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	log.Info("balancing the farm's connections over its replicas", "listen", l.Addr().String(), "replicas", strings.Join(replicas, ","))
	return lb.New(l, replicas, *interval, clock.Real{}, log).Run(ctx)
}
