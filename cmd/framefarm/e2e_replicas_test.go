package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	bolt "go.etcd.io/bbolt"

	"github.com/framefarm/framefarm/cluster/relay"
	"github.com/framefarm/framefarm/http/api"
	"github.com/framefarm/framefarm/persistence/porttest"
)

// replicaSet is three (or more) coordinator processes replicating one farm: files in one
// bucket, keys and certificates shared, an [ha] table each.
type replicaSet struct {
	t       testing.TB
	members []*coordinator
	// made holds members once they are all made, for the balancer's goroutine.
	made atomic.Pointer[[]*coordinator]
	ids  []string
	// pki holds the farm's CA and the coordinators' certificate; shared is the configuration
	// every replica has (bucket, keys), besides its public URL, the balancer's.
	pki, shared string
	// balancer is the farm's address, in front of every running replica.
	balancer *balancer
}

// balancer hands each connection to a running replica, the next one each time, as a load
// balancer in front of the replicas does: the farm's public URL.
type balancer struct {
	url      string
	listener net.Listener
	next     atomic.Int64
}

// startBalancer listens on loopback and passes connections to the addresses listening() gives.
func startBalancer(t testing.TB, listening func() []string) *balancer {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{url: "http://" + l.Addr().String(), listener: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go b.pass(conn, listening())
		}
	}()
	return b
}

// pass joins conn to the first of the addresses, from the next in turn, that takes a connection.
func (b *balancer) pass(conn net.Conn, addrs []string) {
	defer conn.Close()
	start := int(b.next.Add(1))
	for i := range addrs {
		upstream, err := net.DialTimeout("tcp", addrs[(start+i)%len(addrs)], 2*time.Second)
		if err != nil {
			continue
		}
		defer upstream.Close()
		go func() { io.Copy(upstream, conn); upstream.(*net.TCPConn).CloseWrite() }()
		io.Copy(conn, upstream)
		return
	}
}

// sharedConfig is what every replica of a farm shares: its bucket and its keys.
func sharedConfig(bucketTable string) string {
	objects := strings.Replace(bucketTable, "backend = \"s3\"\n",
		"backend = \"s3\"\nsigning_key = \"c2lnbmluZy1rZXktb2YtdGhlLXJlcGxpY2FzLTAxMjM=\"\n", 1)
	return "\n[secrets]\nkey = \"c2VjcmV0cy1rZXktb2YtdGhlLXJlcGxpY2FzLTAxMjM=\"\n" + objects
}

// haTable is replica id's [ha] table among peers ("id=host:port"), with extra keys.
func haTable(id string, peers []string, extra string) string {
	quoted := make([]string, len(peers))
	var bind string
	for i, p := range peers {
		quoted[i] = fmt.Sprintf("%q", p)
		if name, addr, _ := strings.Cut(p, "="); name == id {
			bind = addr
		}
	}
	return fmt.Sprintf("\n[ha]\nid = %q\nbind = %q\npeers = [%s]\n%s", id, bind, strings.Join(quoted, ", "), extra)
}

// testTimings make the tests' elections quick.
const testTimings = "heartbeat_timeout = \"500ms\"\nleader_lease = \"250ms\"\n"

// newReplicaSet prepares n replicas c1..cn (none started); extra is added to each [ha] table.
// Their public URL is a balancer in front of them, as the farm's must be.
func newReplicaSet(t testing.TB, n int, extra string) *replicaSet {
	srv := testBucket(t)
	rs := &replicaSet{t: t, pki: t.TempDir()}
	rs.balancer = startBalancer(t, rs.listening)
	rs.shared = sharedConfig(s3Config(srv, "s3", fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())))
	tlsCommand(t, "ca", "create", "--dir", rs.pki)
	tlsCommand(t, "cert", "create", "--coordinator", "--dir", rs.pki)
	var peers []string
	for i := range n {
		id := fmt.Sprintf("c%d", i+1)
		rs.ids = append(rs.ids, id)
		peers = append(peers, id+"="+porttest.FreeAddr(t))
	}
	for _, id := range rs.ids {
		rs.members = append(rs.members, newCoordinator(t, options{cluster: true, pki: rs.pki, logLevel: "info",
			publicURL: rs.balancer.url, config: rs.shared + haTable(id, peers, extra)}))
	}
	rs.made.Store(&rs.members)
	return rs
}

// startedReplicaSet starts three replicas (extra added to each [ha] table) and returns them, the
// leader, a team's client on it and a template of the team's.
func startedReplicaSet(t *testing.T, extra string) (rs *replicaSet, leader *coordinator, acme *client, tplID string) {
	t.Helper()
	rs = newReplicaSet(t, 3, extra)
	rs.start()
	leader = rs.leader()
	acme = leader.team("acme")
	return rs, leader, acme, acme.uploadTemplate(inspection())
}

// listening are the addresses of the replicas whose process listens, read from any goroutine
// (the balancer's).
func (rs *replicaSet) listening() []string {
	var addrs []string
	if made := rs.made.Load(); made != nil {
		for _, c := range *made {
			if addr := c.listening.Load(); addr != nil {
				addrs = append(addrs, *addr)
			}
		}
	}
	return addrs
}

// start launches every replica, the first first.
func (rs *replicaSet) start() {
	for _, c := range rs.members {
		c.launch("127.0.0.1:0")
	}
}

// clusterStatus is GET /api/v2/admin/cluster.
type clusterStatus struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Term     uint64 `json:"term"`
	Leader   string `json:"leader"`
	Applied  uint64 `json:"appliedIndex"`
	Replicas []struct {
		ID      string  `json:"id"`
		Address string  `json:"address"`
		State   *string `json:"state"`
		Applied *uint64 `json:"appliedIndex"`
	} `json:"replicas"`
}

// status asks a running replica how it sees the set.
func (c *coordinator) status() (clusterStatus, bool) {
	req, _ := http.NewRequest(http.MethodGet, c.url+"/api/v2/admin/cluster", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return clusterStatus{}, false
	}
	defer resp.Body.Close()
	var s clusterStatus
	return s, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&s) == nil
}

// running are the replicas whose process runs.
func (rs *replicaSet) running() []*coordinator {
	var up []*coordinator
	for _, c := range rs.members {
		if c.cmd != nil {
			up = append(up, c)
		}
	}
	return up
}

// leading reports, read under the board's lock, whether the replica runs the leader's duties.
func (c *coordinator) leading() bool {
	for _, states := range c.duties {
		if states["leading"] && !states["following"] {
			return true
		}
	}
	return false
}

// leader waits until a running replica runs the leader's duties, and returns it.
func (rs *replicaSet) leader() *coordinator {
	rs.t.Helper()
	deadline := time.After(waitLimit)
	for {
		var cases []reflect.SelectCase
		for _, c := range rs.running() {
			ok, changed := c.Check(c.leading)
			if ok {
				return c
			}
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(changed)})
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)})
		if chosen, _, _ := reflect.Select(cases); chosen == len(cases)-1 {
			rs.t.Fatalf("no replica leads within %s", waitLimit)
		}
	}
}

// settle makes every running replica apply the same writes: reads on each catch up with the
// leader; with no write meanwhile their applied indexes agree. It returns the index.
func (rs *replicaSet) settle(cl *client) uint64 {
	rs.t.Helper()
	for range 20 {
		indexes := map[uint64]bool{}
		for _, c := range rs.running() {
			(&client{c: c, token: cl.token}).must(http.MethodGet, "/api/v2/jobs?limit=1", nil, http.StatusOK, nil)
		}
		for _, c := range rs.running() {
			s, _ := c.status()
			indexes[s.Applied] = true
		}
		if len(indexes) == 1 {
			for i := range indexes {
				return i
			}
		}
	}
	rs.t.Fatal("the replicas' applied indexes do not agree")
	return 0
}

// storeContents reads every bucket of a stopped replica's store.
func storeContents(t *testing.T, c *coordinator) map[string]string {
	db, err := bolt.Open(filepath.Join(c.dataDir(), "framefarm.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				out[string(name)+"/"+string(k)] = string(v)
				return nil
			})
		})
	})
	return out
}

// TestReplicasKeepEveryAcknowledgedJob: clients spread creations with Idempotency-Keys over three
// replicas while the leader is SIGKILLed and restarted again and again; every creation is sent
// again with its key until it is acknowledged. Afterwards every acknowledged job is on every
// replica, one per key, and the replicas' stores are equal.
func TestReplicasKeepEveryAcknowledgedJob(t *testing.T) {
	rs, _, acme, tplID := startedReplicaSet(t, testTimings)

	// The clients' addresses: a replica restarts on its own (its process is written meanwhile).
	var urls []string
	for _, c := range rs.members {
		urls = append(urls, c.url)
	}
	creations := startKeyedCreations(t, 4, "", acme.token, tplID, func(client, i, try int) string { return urls[(client+i+try)%len(urls)] })
	const kills = 5
	for range kills {
		for range 50 { // some creations acknowledged under this leader
			select {
			case <-creations.progress:
			case <-time.After(waitLimit):
				t.Fatal("the clients acknowledged nothing for " + waitLimit.String())
			}
		}
		victim := rs.leader()
		victim.kill()
		next := rs.leader()
		if next == victim {
			t.Fatal("the killed replica still leads")
		}
		victim.restart()
	}
	acknowledged := creations.finish()
	if t.Failed() {
		return
	}
	t.Logf("%d jobs acknowledged over %d leader kills", len(acknowledged), kills)

	for _, c := range rs.members {
		for key, id := range acknowledged {
			if status, _, _ := (&client{c: c, token: acme.token}).call(http.MethodGet, "/api/v2/jobs/"+id, nil); status != http.StatusOK {
				t.Fatalf("replica %s answers %d for job %s (key %s)", c.addr, status, id, key)
			}
		}
		var page []map[string]any
		(&client{c: c, token: acme.token}).must(http.MethodGet, fmt.Sprintf("/api/v2/jobs?limit=%d", len(acknowledged)+10), nil, http.StatusOK, &page)
		if len(page) != len(acknowledged) {
			t.Fatalf("replica %s lists %d jobs for %d keys", c.addr, len(page), len(acknowledged))
		}
	}
	index := rs.settle(acme)
	out, err := framefarm("ha", "status", "--url", rs.members[1].url, "--admin-token", adminToken)
	states := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 6 && f[4] == fmt.Sprint(index) {
			states[f[3]]++
		}
	}
	if err != nil || states["leader"] != 1 || states["follower"] != 2 {
		t.Fatalf("ha status (applied index %d): %v\n%s", index, err, out)
	}
	final := rs.leader()
	series := final.metrics()
	if series[`framefarm_replica_state{state="leader"}`] != 1 || series["framefarm_replica_applied_index"] != float64(index) ||
		series["framefarm_replica_commit_seconds_count"] == 0 || series["framefarm_replica_apply_seconds_count"] == 0 {
		t.Fatalf("the leader's replica metrics: %v", series)
	}
	changes := 0.0
	for _, c := range rs.members {
		changes += c.metrics()["framefarm_replica_leader_changes_total"]
	}
	if changes == 0 {
		t.Fatal("no replica counted a change of leader over the kills")
	}
	for _, c := range rs.members {
		c.kill()
	}
	first := storeContents(t, rs.members[0])
	for _, c := range rs.members[1:] {
		if other := storeContents(t, c); !reflect.DeepEqual(first, other) {
			t.Fatalf("the stores of c1 and %s differ at applied index %d (%d and %d records)", c.addr, index, len(first), len(other))
		}
	}
}

// keyedCreations are clients creating jobs with Idempotency-Keys until finished, each creation
// sent again until it is acknowledged (through a replica that restarts, or a leader changing).
type keyedCreations struct {
	t            *testing.T
	stop         atomic.Bool
	clients      sync.WaitGroup
	mu           sync.Mutex
	acknowledged map[string]string // key -> job id
	// progress receives a value per acknowledged creation.
	progress chan struct{}
}

// startKeyedCreations starts n clients; url gives the address a try goes to.
func startKeyedCreations(t *testing.T, n int, prefix, token, tplID string, url func(client, i, try int) string) *keyedCreations {
	k := &keyedCreations{t: t, acknowledged: map[string]string{}, progress: make(chan struct{}, 1<<16)}
	body, _ := json.Marshal(renderJob(tplID))
	for client := range n {
		k.clients.Go(func() {
			for i := 0; !k.stop.Load(); i++ {
				if !k.create(fmt.Sprintf("%sclient%d-job%d", prefix, client, i), token, body, func(try int) string { return url(client, i, try) }) {
					return
				}
			}
		})
	}
	return k
}

// create sends one creation until it is acknowledged; false when it never is, or is refused.
func (k *keyedCreations) create(key, token string, body []byte, url func(try int) string) bool {
	for try := range 500 {
		status, answer := postWithKey(url(try)+"/api/v2/jobs", token, key, body)
		switch status {
		case http.StatusCreated, http.StatusOK:
			var cr created
			json.Unmarshal(answer, &cr)
			k.mu.Lock()
			if prev, ok := k.acknowledged[key]; ok && prev != cr.ID {
				k.t.Errorf("key %s acknowledged as %s and as %s", key, prev, cr.ID)
			}
			k.acknowledged[key] = cr.ID
			k.mu.Unlock()
			k.progress <- struct{}{}
			return true
		case 0, http.StatusServiceUnavailable, http.StatusBadGateway: // not reached, or between leaders
			time.Sleep(20 * time.Millisecond)
		default:
			k.t.Errorf("%s: %d %s", key, status, answer)
			return false
		}
	}
	k.t.Errorf("%s was never acknowledged", key)
	return false
}

// finish stops the clients and returns what was acknowledged, by key.
func (k *keyedCreations) finish() map[string]string {
	k.stop.Store(true)
	k.clients.Wait()
	return k.acknowledged
}

// postWithKey creates with an Idempotency-Key; status 0 when the replica cannot be reached.
func postWithKey(url, token, key string, body []byte) (int, []byte) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

// TestAWipedReplicaCatchesUpFromASnapshot: a follower killed and wiped, its records and log
// gone, starts empty and receives every record in a snapshot of the leader's store (its log no
// longer reaches back that far), then follows the writes after it.
func TestAWipedReplicaCatchesUpFromASnapshot(t *testing.T) {
	rs, leader, acme, tplID := startedReplicaSet(t, testTimings+"snapshot_threshold = 16\ntrailing_logs = 4\nsnapshot_interval = \"50ms\"\n")
	var wiped *coordinator
	for _, c := range rs.members {
		if c != leader {
			wiped = c
		}
	}
	before := acme.createJobs(tplID, 30)
	wiped.kill()
	// Stopped, a replica's records are read but not written outside the replicas.
	if out, err := framefarm("token", "create", "--data-dir", wiped.dataDir(), "--team", "sideways"); err == nil || !strings.Contains(string(out), "is a replica's") {
		t.Fatalf("a token written into a stopped replica's records: %v\n%s", err, out)
	}
	if out, err := framefarm("token", "list", "--data-dir", wiped.dataDir()); err != nil || !strings.Contains(string(out), "acme") {
		t.Fatalf("token list on a stopped replica: %v\n%s", err, out)
	}
	if err := os.RemoveAll(wiped.dataDir()); err != nil {
		t.Fatal(err)
	}
	after := acme.createJobs(tplID, 60) // more than the trailing log: the wiped replica needs a snapshot
	wiped.restart()
	onWiped := &client{c: wiped, token: acme.token}
	for _, id := range append(before, after...) {
		if j := onWiped.job(id); j.ID != id {
			t.Fatalf("the wiped replica shows %+v for %s", j, id)
		}
	}
	if wiped.stderr.waitFor(waitLimit, "restored the records from another replica's snapshot") == "" {
		t.Fatal("the wiped replica caught up without a snapshot: its log cannot reach back that far")
	}
	later := acme.createJobs(tplID, 1)
	if j := onWiped.job(later[0]); j.ID != later[0] {
		t.Fatal("the wiped replica does not follow the writes after the snapshot")
	}
}

// TestALeaderWhoseMachineStoppedRebuildsItsStore: the leader's machine stops (SIGKILL, then its
// store as a power cut could leave it: marked by another boot, its pages garbled): restarted, it
// sets the store aside and rebuilds it from its snapshot and log, every acknowledged job in it.
func TestALeaderWhoseMachineStoppedRebuildsItsStore(t *testing.T) {
	rs, leader, acme, tplID := startedReplicaSet(t, testTimings+"snapshot_threshold = 16\ntrailing_logs = 4\nsnapshot_interval = \"50ms\"\n")
	ids := acme.createJobs(tplID, 60)
	leader.kill()
	store := filepath.Join(leader.dataDir(), "framefarm.db")
	if _, err := os.Stat(store + ".unsynced"); err != nil {
		t.Fatalf("the replica's store was not marked as written unsynced: %v", err)
	}
	os.WriteFile(store+".unsynced", []byte("a boot before the power cut\n"), 0o600)
	f, err := os.OpenFile(store, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt(bytes.Repeat([]byte{0xA5}, 256<<10), 0)
	f.Close()
	ids = append(ids, (&client{c: rs.leader(), token: acme.token}).createJobs(tplID, 5)...)
	leader.restart()
	if leader.stderr.waitFor(waitLimit, "moved aside and is rebuilt") == "" {
		t.Fatal("the torn store was not set aside")
	}
	onIt := &client{c: leader, token: acme.token}
	for _, id := range ids {
		if j := onIt.job(id); j.ID != id {
			t.Fatalf("the rebuilt replica shows %+v for %s", j, id)
		}
	}
	index := rs.settle(acme)
	for _, c := range rs.members {
		c.kill()
	}
	if first, rebuilt := storeContents(t, rs.members[0]), storeContents(t, leader); !reflect.DeepEqual(first, rebuilt) {
		t.Fatalf("the rebuilt store differs from c1's at applied index %d (%d and %d records)", index, len(rebuilt), len(first))
	}
}

// TestALoneCoordinatorBecomesTheFirstReplica: the data folder of a coordinator that ran alone
// becomes the first of three replicas; the two others start empty and hold its teams, tokens,
// templates and jobs; its tokens work on every replica, and writes go on.
func TestALoneCoordinatorBecomesTheFirstReplica(t *testing.T) {
	rs := newReplicaSet(t, 3, testTimings)
	lone := startCoordinator(t, options{slots: 0, config: rs.shared})
	acme := lone.team("acme")
	tplID := acme.uploadTemplate(inspection())
	jobs := acme.createJobs(tplID, 5)
	acme.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "S3_KEY", "value": "hunter2"}, http.StatusCreated, nil)
	lone.stop()
	if err := os.Rename(lone.dataDir(), rs.members[0].dataDir()); err != nil {
		t.Fatal(err)
	}

	rs.start()
	rs.leader()
	for _, c := range rs.members[1:] {
		on := &client{c: c, token: acme.token}
		for _, id := range jobs {
			if j := on.job(id); j.ID != id || j.Status != "queued" {
				t.Fatalf("replica %s shows %+v for %s", c.addr, j, id)
			}
		}
		var tpl templateAnswer
		on.must(http.MethodGet, "/api/v2/templates/"+tplID, nil, http.StatusOK, &tpl)
		if tpl.Status != "uploaded" {
			t.Fatalf("replica %s shows the template %s", c.addr, tpl.Status)
		}
		var secrets []map[string]any
		on.must(http.MethodGet, "/api/v2/secrets", nil, http.StatusOK, &secrets)
		if len(secrets) != 1 {
			t.Fatalf("replica %s shows %d secrets", c.addr, len(secrets))
		}
	}
	more := (&client{c: rs.members[2], token: acme.token}).createJobs(tplID, 1)
	if j := (&client{c: rs.members[1], token: acme.token}).job(more[0]); j.ID != more[0] {
		t.Fatal("a job created through one replica is not read on another")
	}
}

// startNode starts a render node process that joins the farm through every replica's gossip
// address, so it finds whichever leads.
func (rs *replicaSet) startNode(id string) *renderNode {
	leader, n := rs.newNode(id)
	return leader.runNode(n)
}

// newNode prepares a render node that joins through every replica's gossip address, and
// returns it with the leader that waits for it.
func (rs *replicaSet) newNode(id string) (*coordinator, *renderNode) {
	var seeds []string
	for _, c := range rs.members {
		seeds = append(seeds, c.gossip)
	}
	leader := rs.leader()
	return leader, leader.newNode(rs.t.TempDir(), id, 1, "--id", id, "--join", strings.Join(seeds, ","))
}

// TestAFailoverLosesNoRender: the leader is SIGKILLed while two nodes render, whose renders end
// then; the nodes follow the next leader with their uploads and results, and every job ends
// exactly once, its output whole, the renders in flight at the failover finishing as their
// first attempt; each job's webhook is delivered (at least once, under one X-Webhook-Id).
func TestAFailoverLosesNoRender(t *testing.T) {
	rs := newReplicaSet(t, 3, testTimings)
	rs.start()
	first := rs.leader()
	control := rs.members[0].control // the nodes' renderer asks the first member's control
	rs.startNode("n1")
	rs.startNode("n2")
	acme := first.team("acme")
	tplID := acme.uploadTemplate(inspection())
	hooks := newWebhookReceiver(t)
	var ids []string
	for range 6 {
		b := renderJob(tplID)
		b["webhook"] = map[string]any{"url": hooks.url}
		var cr created
		acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &cr)
		ids = append(ids, cr.ID)
	}
	inFlight := []*renderCall{control.next(t), control.next(t)}
	farmAdmin := localAdminToken(t, first)
	first.kill()
	// Their renders end at once: their outputs go up, and their results out, while the
	// replicas choose the next leader.
	for _, call := range inFlight {
		call.answer(renderReply{Result: "finish"})
	}
	next := rs.leader()
	// The next leader reaches the nodes it knows of rather than wait for them to find it.
	next.stderr.waitFor(waitLimit, "reached the render nodes the farm knows of")
	if line := next.stderr.lineWith("reached the render nodes the farm knows of"); !strings.Contains(line, "known=2 answered=2") {
		t.Fatalf("the next leader did not reach both nodes: %q", line)
	}
	// The old leader's machine's admin token is the farm's: it works on the next leader.
	(&client{c: next, token: farmAdmin}).must(http.MethodGet, "/api/v2/nodes", nil, http.StatusOK, nil)
	control.answerAll(finishAll)
	on := &client{c: next, token: acme.token}
	for _, id := range ids {
		next.waitJob(id, "finished")
	}
	for _, call := range inFlight {
		if j := on.job(call.JobID); j.Attempts != 1 {
			t.Fatalf("job %s, rendering at the failover, took %d attempts:\n%s", call.JobID, j.Attempts, on.logs(call.JobID))
		}
		if logs := on.logs(call.JobID); !strings.Contains(logs, "carried on across a failover") {
			t.Fatalf("the log of job %s, rendering at the failover, does not say it carried on:\n%s", call.JobID, logs)
		}
	}
	for _, id := range ids {
		if out := on.renderOutput(id); out.JobID != id {
			t.Fatalf("output of %s: %+v", id, out)
		}
	}
	delivered := map[string]bool{}
	for len(delivered) < len(ids) {
		select {
		case hook := <-hooks.received:
			var body struct{ ID string }
			json.Unmarshal(hook.Body, &body)
			if hook.Header.Get("X-Webhook-Id") == "" {
				t.Fatalf("a webhook without X-Webhook-Id: %s", hook.Body)
			}
			delivered[body.ID] = true
		case <-time.After(waitLimit):
			t.Fatalf("webhooks delivered for %d of %d jobs", len(delivered), len(ids))
		}
	}
	for _, id := range ids {
		if !delivered[id] {
			t.Fatalf("no webhook for job %s", id)
		}
	}
}

// TestAPausedLeaderActsNoMore: the leader SIGSTOPped past the election timeout while jobs wait;
// another leads and renders them. A follower's event stream and a write it was handing to the
// paused leader end as soon as another leads (they would wait out their timeouts, an hour for
// the stream). SIGCONTed, the old leader drops its duties and acknowledges
// nothing itself: a creation sent to it at once is refused or carried out by the new leader, and
// no job is dispatched twice.
func TestAPausedLeaderActsNoMore(t *testing.T) {
	rs := newReplicaSet(t, 3, testTimings)
	rs.start()
	paused := rs.leader()
	rs.startNode("n1")
	acme := paused.team("acme")
	tplID := acme.uploadTemplate(inspection())
	control := rs.members[0].control
	control.answerAll(finishAll)

	// A follower's event stream and write go on to the leader; once another leads, the
	// follower ends both rather than let them wait on the paused one.
	var follower *coordinator
	for _, c := range rs.members {
		if c != paused {
			follower = c
		}
	}
	stream := (&client{c: follower, token: acme.token}).events()
	if status, answer := postWithKey(follower.url+"/api/v2/jobs", acme.token, "before-the-pause", mustJSON(t, renderJob(tplID))); status != http.StatusCreated {
		t.Fatalf("a creation sent to a follower: %d %s", status, answer) // it opened the relay to the leader
	}
	paused.cmd.Process.Signal(syscall.SIGSTOP)
	written := make(chan int, 1)
	go func() {
		status, _ := postWithKey(follower.url+"/api/v2/jobs", acme.token, "during-the-pause", mustJSON(t, renderJob(tplID)))
		written <- status
	}()
	pausedCmd := paused.cmd
	paused.cmd = nil // not among the running: it cannot answer
	next := rs.leader()
	stream.ends()
	if status := <-written; status != http.StatusCreated && status != http.StatusServiceUnavailable {
		t.Fatalf("a creation sent to a follower as the leader paused: %d (0: no answer in time)", status)
	}
	on := &client{c: next, token: acme.token}
	ids := on.createJobs(tplID, 4)
	for _, id := range ids {
		next.waitJob(id, "finished")
	}

	paused.cmd = pausedCmd
	pausedCmd.Process.Signal(syscall.SIGCONT)
	status, answer := postWithKey(paused.url+"/api/v2/jobs", acme.token, "after-the-pause", mustJSON(t, renderJob(tplID)))
	switch status {
	case http.StatusCreated:
		var cr created
		json.Unmarshal(answer, &cr)
		next.waitJob(cr.ID, "finished") // carried out by the new leader
		ids = append(ids, cr.ID)
	case http.StatusServiceUnavailable:
	default:
		t.Fatalf("a creation sent to the woken leader: %d %s", status, answer)
	}
	paused.waitUntil("the woken leader dropping its duties", func() bool { return !paused.leading() })
	for _, id := range ids {
		if j := on.job(id); j.Status != "finished" || j.Attempts != 1 {
			t.Fatalf("job %s: %s after %d attempts:\n%s", id, j.Status, j.Attempts, on.logs(id))
		}
		if n := strings.Count(on.logs(id), "dispatched to node"); n != 1 {
			t.Fatalf("job %s was dispatched %d times:\n%s", id, n, on.logs(id))
		}
	}
}

// localAdminToken is the farm admin's token as `framefarm token admin` prints it on the
// machine of c.
func localAdminToken(t *testing.T, c *coordinator) string {
	t.Helper()
	out, err := framefarm("token", "admin", "--data-dir", c.dataDir())
	if err != nil {
		t.Fatalf("token admin: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if token, ok := strings.CutPrefix(strings.TrimSpace(line), "ffl_"); ok {
			return "ffl_" + token
		}
	}
	t.Fatalf("token admin printed no token:\n%s", out)
	return ""
}

func mustJSON(t *testing.T, v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestEveryReplicaServesWritesAndLiveViews: a follower streams a team's events as the leader's
// actors make them, and answers its health and metrics itself; writes sent to followers, small
// (relayed) or large (by HTTP), are carried out by the leader and read on the other follower.
func TestEveryReplicaServesWritesAndLiveViews(t *testing.T) {
	rs := newReplicaSet(t, 3, testTimings)
	rs.start()
	leader := rs.leader()
	var followers []*coordinator
	for _, c := range rs.members {
		if c != leader {
			followers = append(followers, c)
		}
	}
	acme := leader.team("acme")
	tplID := acme.uploadTemplate(inspection())
	events := (&client{c: followers[0], token: acme.token}).events()
	ids := (&client{c: followers[1], token: acme.token}).createJobs(tplID, 1)
	if ev := events.next(func(ev streamedEvent) bool { return ev.ID == ids[0] }); ev.Status != "queued" {
		t.Fatalf("the follower streamed %+v", ev)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if status, _ := get(t, followers[0].url+path); status != http.StatusOK {
			t.Fatalf("%s on a follower: %d", path, status)
		}
	}
	jobs := make([]map[string]any, 1000)
	for i := range jobs {
		jobs[i] = renderJob(tplID)
	}
	if body, _ := json.Marshal(map[string]any{"jobs": jobs}); len(body) <= relay.MaxBody {
		t.Fatalf("a batch of %d bytes is relayed: it tests no write handed on by HTTP", len(body))
	}
	var batch struct {
		Jobs []created `json:"jobs"`
	}
	(&client{c: followers[0], token: acme.token}).must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": jobs}, http.StatusCreated, &batch)
	if len(batch.Jobs) != len(jobs) {
		t.Fatalf("the batch made %d jobs", len(batch.Jobs))
	}
	for _, id := range []string{ids[0], batch.Jobs[len(jobs)-1].ID} {
		(&client{c: followers[0], token: acme.token}).must(http.MethodGet, "/api/v2/jobs/"+id, nil, http.StatusOK, nil)
		(&client{c: followers[1], token: acme.token}).must(http.MethodGet, "/api/v2/jobs/"+id, nil, http.StatusOK, nil)
	}

	// The farm admin's token as `framefarm token admin` prints it on a follower's machine (no
	// admin_token configured in its stead) opens what the Farm screen reads on every replica:
	// the leader's own routes, handed on by followers, keep their admin identity.
	farmAdmin := localAdminToken(t, followers[1])
	if other := localAdminToken(t, leader); other != farmAdmin {
		t.Fatalf("two replicas print two admin tokens: %s and %s", farmAdmin, other)
	}
	for _, c := range rs.members {
		admin := &client{c: c, token: farmAdmin}
		for _, path := range []string{"/api/v2/nodes", "/api/v2/admin/history", "/api/v2/admin/cluster", "/api/v2/admin/tokens"} {
			admin.must(http.MethodGet, path, nil, http.StatusOK, nil)
		}
	}
	// Admin writes handed on by a follower are the admin's: a token revoked, a job changed
	// (its log names the admin).
	throughFollower := &client{c: followers[0], token: farmAdmin}
	var vouched struct {
		ID string `json:"id"`
	}
	throughFollower.must(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": "vouched"}, http.StatusCreated, &vouched)
	throughFollower.must(http.MethodDelete, "/api/v2/admin/tokens/"+vouched.ID, nil, http.StatusOK, nil)
	throughFollower.must(http.MethodPatch, "/api/v2/admin/jobs/"+ids[0], map[string]any{"priority": 3}, http.StatusOK, nil)
	// What the leader answers from a write's result reaches the follower's client: the team as
	// changed, the limit deleted.
	var changed api.TeamView
	throughFollower.must(http.MethodPatch, "/api/v2/admin/teams/acme", map[string]any{"weight": 2}, http.StatusOK, &changed)
	if changed.Name != "acme" || changed.Policy.Weight != 2 {
		t.Fatalf("the team as changed through a follower: %+v", changed)
	}
	throughFollower.must(http.MethodPut, "/api/v2/admin/limits/lic", map[string]any{"count": 1}, http.StatusOK, nil)
	throughFollower.must(http.MethodDelete, "/api/v2/admin/limits/lic", nil, http.StatusNoContent, nil)
	if log := acme.logs(ids[0]); !strings.Contains(log, "the farm's admin (token ") || strings.Contains(log, "team acme (token") {
		t.Fatalf("the admin's change through a follower is logged as another's:\n%s", log)
	}

	// The dashboard's Farm screen, served by a follower, shows the replicas and which leads.
	tab := browserTab(t)
	browse(t, tab, "the farm on a follower",
		chromedp.Navigate(followers[1].url+"/ui/#token="+farmAdmin),
		chromedp.WaitVisible(`//h1[starts-with(normalize-space(.), "Farm")]`),
		chromedp.WaitVisible(`h1 .live.on`),
		chromedp.WaitVisible(`tr[data-replica] .badge[data-status="leader"]`))
	rows := value(t, tab, "replica rows", chromedp.Evaluate[int](`document.querySelectorAll("tr[data-replica]").length`))
	followerBadges := value(t, tab, "followers", chromedp.Evaluate[int](`document.querySelectorAll('tr[data-replica] .badge[data-status="follower"]').length`))
	if rows != 3 || followerBadges != 2 {
		t.Fatalf("the Farm screen shows %d replicas, %d of them followers", rows, followerBadges)
	}
	screenshot(t, tab, "farm-replicas")
}

// TestTheSetOfReplicasChanges: a replica lost for good is removed by the leader after
// remove_dead_after; a new one joins with `ha join`, starting from an empty folder, and holds the
// records; `ha remove` takes a follower out.
func TestTheSetOfReplicasChanges(t *testing.T) {
	const extra = testTimings + "remove_dead_after = \"2s\"\n"
	rs, leader, acme, tplID := startedReplicaSet(t, extra)
	ids := acme.createJobs(tplID, 3)

	var lost *coordinator
	for _, c := range rs.members {
		if c != leader {
			lost = c
		}
	}
	lost.kill()
	if leader.stderr.waitFor(waitLimit, "removed a replica no heartbeat has reached since") == "" {
		t.Fatal("the leader did not remove the dead replica")
	}

	var peers []string
	for _, s := range mustStatus(t, leader).Replicas {
		peers = append(peers, s.ID+"="+s.Address)
	}
	joinAddr := porttest.FreeAddr(t)
	peers = append(peers, "c4="+joinAddr)
	// A replica whose public URL is not the others' refuses to start, naming both.
	stray := newCoordinator(t, options{cluster: true, pki: rs.pki, publicURL: "http://127.0.0.1:1", config: rs.shared + haTable("c4", peers, extra)})
	out, err := framefarm("serve", "--config", filepath.Join(stray.dir, "framefarm.toml"), "--data-dir", stray.dataDir(), "--listen", "127.0.0.1:0", "--local-slots", "0")
	if err == nil || !strings.Contains(string(out), `server.public_url is "http://127.0.0.1:1" here, "`+rs.balancer.url+`" on replica`) {
		t.Fatalf("a replica with another public URL: %v\n%s", err, out)
	}
	joined := rs.join("c4", joinAddr, peers, extra, leader)
	on := &client{c: joined, token: acme.token}
	for _, id := range ids {
		if j := on.job(id); j.ID != id {
			t.Fatalf("the joined replica shows %+v", j)
		}
	}

	var follower *coordinator
	for _, c := range rs.members {
		if c != leader && c != lost {
			follower = c
		}
	}
	followerID := ""
	if s, ok := follower.status(); ok {
		followerID = s.ID
	}
	if out, err := framefarm("ha", "remove", followerID, "--url", joined.url, "--admin-token", adminToken); err != nil {
		t.Fatalf("ha remove: %v\n%s", err, out)
	}
	var left []string
	for _, s := range mustStatus(t, leader).Replicas {
		left = append(left, s.ID)
	}
	if len(left) != 2 || slices.Contains(left, followerID) || !slices.Contains(left, "c4") {
		t.Fatalf("the set after the changes: %v", left)
	}
	more := on.createJobs(tplID, 1)
	if j := (&client{c: leader, token: acme.token}).job(more[0]); j.ID != more[0] {
		t.Fatal("the two replicas left do not write")
	}
}

// TestASurvivorRecoversTheFarm: two of three replicas are gone for good; on the third, stopped,
// `framefarm ha recover` makes a set of one with every acknowledged write, which serves writes
// once started and takes a new replica in.
func TestASurvivorRecoversTheFarm(t *testing.T) {
	rs, leader, acme, tplID := startedReplicaSet(t, testTimings)
	ids := acme.createJobs(tplID, 20)
	rs.settle(acme)
	// A backup asked of a follower is the leader's, at one index of the replicas' log.
	for _, c := range rs.members {
		if c == leader {
			continue
		}
		out, err := framefarm("backup", "--url", c.url, "--admin-token", adminToken, "--out", filepath.Join(t.TempDir(), "farm.tar"))
		if err != nil || !strings.Contains(string(out), "at the replicas' index") || !strings.Contains(string(out), ": 20 jobs") {
			t.Fatalf("backup through a follower: %v\n%s", err, out)
		}
		break
	}

	var survivor *coordinator
	for _, c := range rs.members {
		if c != leader && survivor == nil {
			survivor = c
			continue
		}
		c.kill()
	}
	survivor.stop()
	config := filepath.Join(survivor.dir, "framefarm.toml")
	out, err := framefarm("ha", "recover", "--config", config, "--data-dir", survivor.dataDir())
	if err != nil || !strings.Contains(string(out), "is a set of one") {
		t.Fatalf("ha recover: %v\n%s", err, out)
	}
	t.Logf("ha recover: %s", out)
	started := time.Now()
	survivor.launch("127.0.0.1:0")
	if rs.leader() != survivor {
		t.Fatal("the survivor does not lead")
	}
	t.Logf("the survivor leads alone %s after its start", time.Since(started).Round(time.Millisecond))
	on := &client{c: survivor, token: acme.token}
	for _, id := range ids {
		if j := on.job(id); j.ID != id {
			t.Fatalf("job %s after the recovery: %+v", id, j)
		}
	}
	more := on.createJobs(tplID, 2)

	// A new replica joins the set of one, and holds what it held.
	alone := mustStatus(t, survivor)
	if len(alone.Replicas) != 1 || alone.Replicas[0].ID != alone.ID {
		t.Fatalf("the set after the recovery: %+v", alone)
	}
	peers := []string{alone.ID + "=" + alone.Replicas[0].Address}
	joinAddr := porttest.FreeAddr(t)
	peers = append(peers, "c4="+joinAddr)
	joined := rs.join("c4", joinAddr, peers, testTimings, survivor)
	for _, id := range append(ids, more...) {
		if j := (&client{c: joined, token: acme.token}).job(id); j.ID != id {
			t.Fatalf("the joined replica shows %+v for %s", j, id)
		}
	}
}

// join starts replica id at addr from an empty folder, peers in its [ha] table (extra added),
// and adds it to the set through via (framefarm ha join).
func (rs *replicaSet) join(id, addr string, peers []string, extra string, via *coordinator) *coordinator {
	rs.t.Helper()
	joined := newCoordinator(rs.t, options{cluster: true, pki: rs.pki, logLevel: "info", publicURL: rs.balancer.url, config: rs.shared + haTable(id, peers, extra)})
	joined.launch("127.0.0.1:0")
	if out, err := framefarm("ha", "join", "--id", id, "--address", addr, "--url", via.url, "--admin-token", adminToken); err != nil {
		rs.t.Fatalf("ha join: %v\n%s", err, out)
	}
	return joined
}

func mustStatus(t testing.TB, c *coordinator) clusterStatus {
	t.Helper()
	s, ok := c.status()
	if !ok {
		t.Fatalf("no status from %s", c.addr)
	}
	return s
}

// withoutQuorum stops two of three replicas (the leader, killed; a follower, paused as a frozen
// machine is) and times, on the one left, what a client sees: a read, a write (each a 503 the
// client may send again), and the status of the set (answered, the two others out of reach).
func withoutQuorum(t testing.TB, rs *replicaSet, token string) (left *coordinator, read, write, status time.Duration) {
	t.Helper()
	leader := rs.leader()
	for _, c := range rs.members {
		switch {
		case c == leader:
			c.kill()
		case left == nil:
			left = c
		default:
			c.cmd.Process.Signal(syscall.SIGSTOP) // killed at the test's end, paused or not
		}
	}
	cl := &client{c: left, token: token}
	timed := func(method, path string, body any, want int) time.Duration {
		started := time.Now()
		got, answer, _ := cl.call(method, path, body)
		took := time.Since(started)
		if got != want {
			t.Fatalf("%s %s without a quorum: %d, want %d: %s", method, path, got, want, answer)
		}
		if want == http.StatusServiceUnavailable && !strings.Contains(string(answer), `"code":"unavailable"`) {
			t.Fatalf("%s %s without a quorum: %s", method, path, answer)
		}
		return took
	}
	read = timed(http.MethodGet, "/api/v2/jobs", nil, http.StatusServiceUnavailable)
	write = timed(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "x"}, http.StatusServiceUnavailable)
	admin := &client{c: left, token: adminToken}
	started := time.Now()
	s := mustStatus(t, left)
	status = time.Since(started)
	reached := 0
	for _, r := range s.Replicas {
		if r.State != nil {
			reached++
		}
	}
	if len(s.Replicas) != 3 || reached != 1 {
		t.Fatalf("the status without a quorum shows %d replicas, %d reached: %+v", len(s.Replicas), reached, s)
	}
	admin.must(http.MethodGet, "/api/v2/admin/cluster", nil, http.StatusOK, nil)
	return left, read, write, status
}

// TestAReplicaWithoutAQuorumAnswers: with two of three replicas gone, the one left answers a read
// and a write 503 (unavailable; send it again), after waiting for a leader at most the documented
// 5 s, and shows the status of the set, the two others out of reach. A stale read (?stale) it
// answers from its records only while its lease from the last leader holds (a revocation the
// others acknowledge meanwhile must hold on it too): past it, 503 saying so.
func TestAReplicaWithoutAQuorumAnswers(t *testing.T) {
	rs := newReplicaSet(t, 3, testTimings)
	rs.start()
	leader := rs.leader()
	acme := leader.team("acme")
	job := acme.createJobs(acme.uploadTemplate(inspection()), 1)[0]
	for _, c := range rs.members {
		on := &client{c: c, token: acme.token}
		on.must(http.MethodGet, "/api/v2/jobs/"+job, nil, http.StatusOK, nil) // caught up, it holds the job
		on.must(http.MethodGet, "/api/v2/jobs/"+job+"?stale", nil, http.StatusOK, nil)
	}
	left, read, write, status := withoutQuorum(t, rs, acme.token)
	t.Logf("without a quorum: a read answered 503 in %s, a write in %s, the status in %s", read, write, status)
	got, answer, _ := (&client{c: left, token: acme.token}).call(http.MethodGet, "/api/v2/jobs/"+job+"?stale", nil)
	if got != http.StatusServiceUnavailable || !strings.Contains(string(answer), "has not heard from the leader lately enough") {
		t.Fatalf("a stale read without a quorum, past its lease: %d %s", got, answer)
	}
}

// TestARevokedTokenReadsOnNoReplica: a token revoked through the leader, the revoke
// acknowledged, is refused at once by every replica, on stale reads (?stale, answered from a
// follower's own records) as on the others, round after round.
func TestARevokedTokenReadsOnNoReplica(t *testing.T) {
	rs, leader, acme, _ := startedReplicaSet(t, testTimings)
	admin := &client{c: leader, token: adminToken}
	var followers []*coordinator
	for _, c := range rs.members {
		if c != leader {
			followers = append(followers, c)
		}
	}
	for round := range 10 {
		var made struct {
			ID    string `json:"id"`
			Token string `json:"token"`
		}
		admin.must(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": "acme", "role": "viewer"}, http.StatusCreated, &made)
		for _, f := range followers {
			reader := &client{c: f, token: made.Token}
			reader.must(http.MethodGet, "/api/v2/templates", nil, http.StatusOK, nil) // caught up: it knows the token
			reader.must(http.MethodGet, "/api/v2/templates?stale", nil, http.StatusOK, nil)
		}
		admin.must(http.MethodDelete, "/api/v2/admin/tokens/"+made.ID, nil, http.StatusOK, nil)
		for _, f := range followers {
			for _, path := range []string{"/api/v2/templates?stale", "/api/v2/jobs?stale", "/api/v2/templates"} {
				if got, body, _ := (&client{c: f, token: made.Token}).call(http.MethodGet, path, nil); got == http.StatusOK {
					t.Fatalf("round %d: replica at %s answered %s with the token revoked before: %.200s", round, f.url, path, body)
				}
			}
		}
	}
	acme.must(http.MethodGet, "/api/v2/templates?stale", nil, http.StatusOK, nil) // other tokens read on
}

// TestAFollowerAnswersABrokenBodyAsTheLeaderWould: a write whose chunked body is malformed,
// sent to a follower (which hands it on) or to the leader, is answered 400, the client's fault,
// and never 5xx as if the leader could not be reached.
func TestAFollowerAnswersABrokenBodyAsTheLeaderWould(t *testing.T) {
	rs, _, acme, _ := startedReplicaSet(t, testTimings)
	for _, c := range rs.members {
		head := "POST /api/v2/templates HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + acme.token +
			"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
		answers, err := exchangeRaw(c.addr, variant{name: "broken chunks", head: head, body: "zz\r\n{}\r\n0\r\n\r\n"}, http.MethodPost, false)
		if err != nil || len(answers) != 1 {
			t.Fatalf("replica at %s: %v", c.url, err)
		}
		if a := answers[0]; a.status != http.StatusBadRequest || !strings.Contains(string(a.body), "could not be read") {
			t.Fatalf("replica at %s answered broken chunks %d: %s", c.url, a.status, a.body)
		}
	}
}
