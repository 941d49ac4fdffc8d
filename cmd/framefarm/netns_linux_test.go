package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/framefarm/framefarm/persistence/porttest"
)

// testNetwork is a network of the test's own: a hub namespace holding a bridge, this test's
// namespace and one namespace per node each joined to it by a veth pair. Cutting a node's port
// off the bridge is a silent partition (its packets go nowhere, no error comes back), as a
// switch or a cloud's network failing is; joining it back heals it.
type testNetwork struct {
	t      testing.TB
	prefix string // of every name the network makes
	subnet string // 10.X.Y: the hosts are .1 (this namespace), .2 on
	hosts  int
}

// newTestNetwork makes the hub, and joins this namespace to it as host .1. It needs to make
// network namespaces (root, or CAP_NET_ADMIN): elsewhere the test is skipped, saying so.
func newTestNetwork(t testing.TB) *testNetwork {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making network namespaces needs root (CAP_NET_ADMIN)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("ip (Debian's iproute2, which make test installs) is not installed")
	}
	n := &testNetwork{t: t, prefix: fmt.Sprintf("ff%04x", rand.IntN(1<<16)), subnet: fmt.Sprintf("10.%d.%d", 200+rand.IntN(50), rand.IntN(250))}
	hub := n.prefix + "hub"
	n.ip("netns", "add", hub)
	t.Cleanup(func() {
		// Deleting a namespace deletes the veth ends in it, and with them their peers.
		for i := 2; i <= n.hosts; i++ {
			exec.Command("ip", "netns", "del", n.nodeNamespace(i)).Run()
		}
		exec.Command("ip", "netns", "del", hub).Run()
	})
	n.ip("-n", hub, "link", "add", "br0", "type", "bridge")
	n.ip("-n", hub, "link", "set", "br0", "up")
	n.hosts = 1
	n.plug("", 1)
	return n
}

// nodeNamespace is the namespace of host i.
func (n *testNetwork) nodeNamespace(i int) string { return fmt.Sprintf("%sn%d", n.prefix, i) }

// addr is host i's address.
func (n *testNetwork) addr(i int) string { return fmt.Sprintf("%s.%d", n.subnet, i) }

// host adds a namespace as the next host and returns its name and address.
func (n *testNetwork) host() (namespace, addr string) {
	n.hosts++
	namespace = n.nodeNamespace(n.hosts)
	n.ip("netns", "add", namespace)
	n.ip("-n", namespace, "link", "set", "lo", "up")
	n.plug(namespace, n.hosts)
	return namespace, n.addr(n.hosts)
}

// plug joins namespace ("": this test's) to the hub's bridge as host i.
func (n *testNetwork) plug(namespace string, i int) {
	hub, inside, port := n.prefix+"hub", fmt.Sprintf("%se%d", n.prefix, i), n.port(i)
	n.ip("link", "add", inside, "type", "veth", "peer", "name", port)
	n.ip("link", "set", port, "netns", hub)
	n.ip("-n", hub, "link", "set", port, "master", "br0")
	n.ip("-n", hub, "link", "set", port, "up")
	in := []string{}
	if namespace != "" {
		n.ip("link", "set", inside, "netns", namespace)
		in = []string{"-n", namespace}
	}
	n.ip(append(in, "addr", "add", n.addr(i)+"/24", "dev", inside)...)
	n.ip(append(in, "link", "set", inside, "up")...)
}

// port is host i's port on the bridge.
func (n *testNetwork) port(i int) string { return fmt.Sprintf("%sp%d", n.prefix, i) }

// cut takes host i off the network, silently; heal puts it back.
func (n *testNetwork) cut(i int) { n.ip("-n", n.prefix+"hub", "link", "set", n.port(i), "nomaster") }
func (n *testNetwork) heal(i int) {
	n.ip("-n", n.prefix+"hub", "link", "set", n.port(i), "master", "br0")
}

func (n *testNetwork) ip(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// TestANodeIsBackSoonAfterAPartitionHeals: a node in a namespace of its own is cut off from the
// coordinator longer than TCP's retransmissions take to slow down (the coordinator loses it),
// then the network comes back: the node is ready on the coordinator again at once, not when a
// connection that died in the cut is found dead.
func TestANodeIsBackSoonAfterAPartitionHeals(t *testing.T) {
	network := newTestNetwork(t)
	c := startCoordinator(t, options{cluster: true, clusterHost: network.addr(1)})
	namespace, addr := network.host()
	n := c.newNode(t.TempDir(), "n1", 1, "--id", "n1")
	for i, arg := range n.args {
		if arg == "--bind" || arg == "--actors-bind" {
			n.args[i+1] = onHost(addr, porttest.FreeAddr(t))
		}
	}
	n.netns = namespace
	c.runNode(n)
	count := func(state string) (got int) {
		c.Read(func() { got = c.counts["node n1 "+state] })
		return got
	}
	lost, ready := count("lost"), count("ready")
	network.cut(2)
	c.waitUntil("the node is lost", func() bool { return c.counts["node n1 lost"] > lost })
	time.Sleep(15 * time.Second) // a partition: the time it lasts is the point
	network.heal(2)
	healed := time.Now()
	c.waitUntil("the node is ready again", func() bool { return c.counts["node n1 ready"] > ready })
	back := time.Since(healed)
	t.Logf("the node was ready again %s after the network came back", back.Round(time.Millisecond))
	// Well short of what TCP's retransmissions would take after such a cut.
	if back > 5*time.Second {
		t.Fatalf("the node was back %s after the network came back\n%s", back, n.stderr.tail(40))
	}
}

// BenchmarkClusterCutNodeDetection: one of four nodes silently cut off from the coordinator and
// the other nodes (each in a namespace of its own, its port taken off the bridge), with the
// default timings: the time until the coordinator declares it lost, and whether its lease or
// membership did.
func BenchmarkClusterCutNodeDetection(b *testing.B) {
	network := newTestNetwork(b)
	c := startCoordinator(b, options{cluster: true, clusterHost: network.addr(1), heartbeat: "1s", lease: "5s", logLevel: "info"})
	for i := range 4 {
		namespace, addr := network.host()
		id := fmt.Sprintf("n%d", i+1)
		n := c.newNode(b.TempDir(), id, 1, "--id", id)
		for k, arg := range n.args {
			if arg == "--bind" || arg == "--actors-bind" {
				n.args[k+1] = onHost(addr, porttest.FreeAddr(b))
			}
		}
		n.netns = namespace
		c.runNode(n)
	}
	b.ResetTimer()
	cut := time.Now()
	network.cut(2) // n1
	c.waitFor("node", "n1", "lost")
	took := time.Since(cut)
	b.ReportMetric(took.Seconds(), "detect-s")
	line := c.stderr.lineWith("render node lost")
	by := "membership"
	if strings.Contains(line, "lease expired") {
		by = "lease"
	}
	b.Logf("lost after %s, by its %s", took.Round(time.Millisecond), by)
}

// TestACutFollowerAnswersThroughAnother: three replicas, each in a namespace of its own; one
// follower is cut off from the leader alone (the routes between the two lead nowhere) and still
// reaches the other follower. Asked through its own address, it answers an admin's
// write and the reads after it (one of the leader's, one of the records) through the follower
// in touch with the leader, instead of refusing them for the whole cut.
func TestACutFollowerAnswersThroughAnother(t *testing.T) {
	network := newTestNetwork(t)
	dir := filepath.Join(t.TempDir(), "farm")
	base := porttest.FreeRange(t, 15)
	if out, err := framefarm("ha", "init", "--dir", dir, "--port", strconv.Itoa(base)); err != nil {
		t.Fatalf("ha init: %v\n%s", err, out)
	}
	// ha init lays the ports out on one address; each replica gets a namespace and an address.
	namespaces, addrs := make([]string, 4), make([]string, 4)
	for i := 1; i <= 3; i++ {
		namespaces[i], addrs[i] = network.host()
	}
	hostOf := func(port int) string {
		for i := 1; i <= 3; i++ {
			for _, p := range []int{base + i, base + 3 + i, base + 6 + i, base + 9 + i} {
				if port == p {
					return addrs[i]
				}
			}
		}
		return network.addr(1)
	}
	loopback := regexp.MustCompile(`127\.0\.0\.1:(\d+)`)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	api := func(i int) string { return fmt.Sprintf("http://%s:%d", addrs[i], base+i) }
	for i := 1; i <= 3; i++ {
		path := filepath.Join(dir, fmt.Sprintf("c%d.toml", i))
		cfg, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg = loopback.ReplaceAllFunc(cfg, func(m []byte) []byte {
			port, _ := strconv.Atoi(string(m[len("127.0.0.1:"):]))
			return []byte(fmt.Sprintf("%s:%d", hostOf(port), port))
		})
		if err := os.WriteFile(path, cfg, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ip", "netns", "exec", namespaces[i], self, "serve", "--config", path)
		cmd.Env = append(os.Environ(), envRun+"=1", envJobSignals+"=0")
		startProcess(t, fmt.Sprintf("replica c%d", i), cmd)
	}
	var token string
	pollUntil(t, "the admin token", func() bool {
		out, err := framefarm("token", "admin", "--config", filepath.Join(dir, "c1.toml"))
		if err == nil {
			token = strings.TrimSpace(strings.Split(string(out), "\n")[1])
		}
		return err == nil
	})
	replica := func(i int) *client { return &client{c: &coordinator{t: t, url: api(i)}, token: token} }
	var status struct {
		Leader   string `json:"leader"`
		State    string `json:"state"`
		Replicas []struct {
			ID    string  `json:"id"`
			State *string `json:"state"`
		} `json:"replicas"`
	}
	pollUntil(t, "three replicas under a leader", func() bool {
		code, body, _ := replica(1).call(http.MethodGet, "/api/v2/admin/cluster", nil)
		if code != http.StatusOK || json.Unmarshal(body, &status) != nil || status.Leader == "" {
			return false
		}
		for _, r := range status.Replicas {
			if r.State == nil || (*r.State != "leader" && *r.State != "follower") {
				return false
			}
		}
		return true
	})
	leader, _ := strconv.Atoi(strings.TrimPrefix(status.Leader, "c"))
	cut := 1 + leader%3 // a follower
	other := 6 - leader - cut
	// The leader and the cut follower route each other's address nowhere (a blackhole).
	for _, pair := range [][2]int{{cut, leader}, {leader, cut}} {
		network.ip("-n", namespaces[pair[0]], "route", "add", "blackhole", addrs[pair[1]]+"/32")
	}
	pollUntil(t, "the cut follower loses the leader", func() bool {
		code, body, _ := replica(cut).call(http.MethodGet, "/api/v2/admin/cluster", nil)
		return code == http.StatusOK && json.Unmarshal(body, &status) == nil && status.State == "candidate"
	})

	asked := time.Now()
	var issued struct {
		Token string `json:"token"`
	}
	replica(cut).must(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": "detoured"}, http.StatusCreated, &issued)
	t.Logf("the cut follower c%d answered a write in %s, through c%d", cut, time.Since(asked).Round(time.Millisecond), other)
	type listedToken struct {
		Team struct {
			Name string `json:"name"`
		} `json:"team"`
	}
	var tokens []listedToken
	replica(cut).must(http.MethodGet, "/api/v2/admin/tokens", nil, http.StatusOK, &tokens)
	if !slices.ContainsFunc(tokens, func(tok listedToken) bool { return tok.Team.Name == "detoured" }) {
		t.Fatalf("the cut follower's list of tokens lacks the one it made: %+v", tokens)
	}
	var teams []struct{ Name string }
	replica(cut).must(http.MethodGet, "/api/v2/admin/teams", nil, http.StatusOK, &teams)
	(&client{c: &coordinator{t: t, url: api(cut)}, token: issued.Token}).must(http.MethodGet, "/api/v2/team", nil, http.StatusOK, nil)
}
