package replicas

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/remoting"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/porttest"
)

// set is replicas of one test, each with its store, and what they tell of their leadership.
type set struct {
	t      testing.TB
	peers  []Peer
	dirs   map[string]string
	server *tls.Config
	client *tls.Config
	// ca signed the replicas' certificates.
	ca      *certs.Authority
	members map[string]*member
	changes chan change
	// heartbeat and lease are the replicas' timings (short unless a test needs them longer).
	heartbeat, lease time.Duration
	// clock times how long followers hold entries (the system's unless set). They hold them an
	// hour: what a test reads on one must not wait for the hold to end.
	clock clock.Clock
}

type member struct {
	replica *Replica
	store   *persistence.Store
}

type change struct {
	id      string
	leading bool
}

func newSet(t testing.TB, ids ...string) *set {
	dir := t.TempDir()
	ca, err := certs.NewAuthority("replicas-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _, _ := ca.PEM()
	certPEM, keyPEM, err := ca.Issue(certs.Identity{Role: certs.RoleCoordinator}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files := remoting.TLS{CertFile: filepath.Join(dir, "c.pem"), KeyFile: filepath.Join(dir, "c-key.pem"), CAFile: filepath.Join(dir, "ca.pem")}
	os.WriteFile(files.CertFile, certPEM, 0o600)
	os.WriteFile(files.KeyFile, keyPEM, 0o600)
	os.WriteFile(files.CAFile, caPEM, 0o600)
	server, client, _, err := files.Configs(certs.RoleCoordinator, certs.RoleCoordinator)
	if err != nil {
		t.Fatal(err)
	}
	s := &set{t: t, dirs: map[string]string{}, server: server, client: client, ca: ca, members: map[string]*member{}, changes: make(chan change, 64),
		heartbeat: 300 * time.Millisecond, lease: 150 * time.Millisecond}
	for _, id := range ids {
		s.peers = append(s.peers, Peer{ID: id, Addr: porttest.FreeAddr(t)})
		s.dirs[id] = filepath.Join(dir, id)
	}
	return s
}

// open opens a replica's store (which may hold records already) without starting it.
func (s *set) open(id string) *persistence.Store {
	store, err := persistence.Open(filepath.Join(s.dirs[id], "framefarm.db"), persistence.Options{Replica: true})
	if err != nil {
		s.t.Fatal(err)
	}
	return store
}

// start starts replica id on its store.
func (s *set) start(id string, store *persistence.Store) *member {
	s.t.Helper()
	m, err := s.startAlone(id, store)
	if err != nil {
		s.t.Fatal(err)
	}
	s.add(id, m)
	return m
}

// add makes a started replica one of the set's members, stopped when the test ends.
func (s *set) add(id string, m *member) {
	s.members[id] = m
	s.t.Cleanup(func() { s.stop(id) })
}

// startAlone starts replica id on its store, not yet one of the set's members: replicas started
// at once, each from a goroutine of its own, are added after.
func (s *set) startAlone(id string, store *persistence.Store) (*member, error) {
	var addr string
	for _, p := range s.peers {
		if p.ID == id {
			addr = p.Addr
		}
	}
	r, err := Start(Config{ID: id, Bind: addr, Peers: s.peers, Dir: filepath.Join(s.dirs[id], "raft"), ServerTLS: s.server, ClientTLS: s.client,
		Store: store, Logger: slog.New(slog.DiscardHandler), HeartbeatTimeout: s.heartbeat, LeaderLease: s.lease,
		SnapshotThreshold: 8, TrailingLogs: 4, Clock: s.clock, ApplyHold: time.Hour,
		Fail: func(err error) { s.t.Errorf("replica %s failed: %v", id, err); runtime.Goexit() }})
	if err != nil {
		return nil, err
	}
	store.Replicate(r)
	go func() {
		for leading := range r.Leadership() {
			s.changes <- change{id, leading}
		}
	}()
	return &member{replica: r, store: store}, nil
}

// stop shuts a replica down and closes its store, as a machine lost would.
func (s *set) stop(id string) {
	m := s.members[id]
	if m == nil {
		return
	}
	delete(s.members, id)
	m.replica.Shutdown()
	m.store.Close()
}

// leader waits until a running replica tells it leads, and returns it.
func (s *set) leader() (string, *member) {
	s.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		for id, m := range s.members {
			if m.replica.Leading() {
				return id, m
			}
		}
		select {
		case <-s.changes:
		case <-deadline:
			s.t.Fatal("no replica leads")
		}
	}
}

// write sets name=value through the leader, as a client's write would, retrying while the
// replicas choose a leader.
func (s *set) write(name, value string) {
	s.t.Helper()
	for range 50 {
		_, m := s.leader()
		err := m.store.Apply(&persistence.SetMeta{Name: name, Value: value})
		if err == nil {
			return
		}
		if !errors.Is(err, ErrUnavailable) {
			s.t.Fatal(err)
		}
	}
	s.t.Fatalf("%s was never written", name)
}

// read reads name on a replica after catching up with the leader.
func (s *set) read(id, name string) string {
	s.t.Helper()
	if err := s.members[id].replica.CatchUp(time.Now().Add(20 * time.Second)); err != nil {
		s.t.Fatalf("replica %s catching up: %v (leader %v)", id, err, fmt.Sprint(s.members[id].replica.Leader()))
	}
	return s.members[id].store.Meta(name)
}

// TestReplicasAgreeAndOutliveTheirLeader: three replicas start empty; what the leader writes is
// read on every replica at once after it is acknowledged; a follower cannot write; the leader
// lost, another leads and writes go on; the lost one, started again, catches up; one wiped and
// started empty receives a snapshot.
func TestReplicasAgreeAndOutliveTheirLeader(t *testing.T) {
	s := newSet(t, "c1", "c2", "c3")
	for _, id := range []string{"c1", "c2", "c3"} {
		s.start(id, s.open(id))
	}
	for i := range 20 {
		s.write(fmt.Sprint("k", i), fmt.Sprint("v", i))
		for id := range s.members {
			if got := s.read(id, fmt.Sprint("k", i)); got != fmt.Sprint("v", i) {
				t.Fatalf("replica %s read k%d=%q right after it was acknowledged", id, i, got)
			}
		}
	}
	first, _ := s.leader()
	for id, m := range s.members {
		if id != first {
			if err := m.store.Apply(&persistence.SetMeta{Name: "x", Value: "y"}); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("a follower's own write: %v", err)
			}
			break
		}
	}

	s.stop(first)
	s.write("after", "failover")
	second, _ := s.leader()
	if second == first {
		t.Fatal("the stopped replica still leads")
	}
	s.start(first, s.open(first))
	if got := s.read(first, "after"); got != "failover" {
		t.Fatalf("the restarted replica read %q", got)
	}

	// A follower wiped, its records and log gone, receives the whole store in a snapshot.
	var wiped string
	for id := range s.members {
		if id != second {
			wiped = id
		}
	}
	s.stop(wiped)
	for i := range 12 {
		s.write(fmt.Sprint("later", i), "x")
	}
	_, leader := s.leader()
	if err := leader.replica.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(s.dirs[wiped])
	s.start(wiped, s.open(wiped))
	for _, name := range []string{"k0", "k19", "after", "later11"} {
		if got := s.read(wiped, name); got == "" {
			t.Fatalf("the wiped replica has no %s after catching up", name)
		}
	}
}

// TestALeaderCutOffAnswersNoRead: a leader whose followers are gone believes it leads until its
// lease runs out, while the others could have elected another that acknowledges writes; a read
// on it does not answer from its records then, it waits and is refused. (The answer to a
// heartbeat in flight as the followers stopped may still count as a quorum's, once: they were
// there when they sent it, so no other leader can be elected for a heartbeat timeout after.)
func TestALeaderCutOffAnswersNoRead(t *testing.T) {
	s := newSet(t, "c1", "c2", "c3")
	s.heartbeat, s.lease = 6*time.Second, 3*time.Second // a lease long enough to read within it
	for _, id := range []string{"c1", "c2", "c3"} {
		s.start(id, s.open(id))
	}
	s.write("k", "v")
	id, leader := s.leader()
	for _, other := range []string{"c1", "c2", "c3"} {
		if other != id {
			s.stop(other)
		}
	}
	for attempt := 1; ; attempt++ {
		leader.replica.reads.verified.Store(0) // its last check of a quorum is past
		if !leader.replica.Leading() {
			t.Fatal("the leader stepped down before its lease ran out")
		}
		err := leader.replica.CatchUp(time.Now().Add(2 * time.Second))
		if errors.Is(err, ErrUnavailable) {
			return
		}
		if attempt == 2 {
			t.Fatalf("a leader cut off from the others caught up twice: %v", err)
		}
	}
}

// TestARequestWaitsForTheReplicasToKnowALeader: a replica that knows no leader yet makes a
// request for the leader wait until the replicas have one, and refuses it only past its deadline.
func TestARequestWaitsForTheReplicasToKnowALeader(t *testing.T) {
	s := newSet(t, "c1", "c2", "c3")
	// Elections slow enough that a loaded machine does not hold a second one before the end.
	s.heartbeat, s.lease = 2*time.Second, time.Second
	waiting := s.start("c2", s.open("c2"))
	if _, err := waiting.replica.AwaitLeader(time.Now()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a leader before any replica could lead: %v", err)
	}
	found := make(chan string, 1)
	go func() {
		addr, _ := waiting.replica.AwaitLeader(time.Now().Add(20 * time.Second))
		found <- addr
	}()
	s.start("c1", s.open("c1"))
	s.start("c3", s.open("c3"))
	_, leader := s.leader()
	addr := <-found
	if addr == "" {
		t.Fatal("the waiting request never learned of the leader")
	}
	if _, known := leader.replica.Leader(); addr != known {
		t.Fatalf("the request was sent to %s, the leader is at %s", addr, known)
	}
}

// TestAReplicaWhoseMachineStoppedRebuildsItsStore: a replica's store, written without waiting
// for the disk, is found torn after its machine stopped (marked by another boot, its pages
// garbled); it is set aside, and the replica rebuilds it from its snapshot and the log after it.
func TestAReplicaWhoseMachineStoppedRebuildsItsStore(t *testing.T) {
	s := newSet(t, "c1", "c2", "c3")
	for _, id := range []string{"c1", "c2", "c3"} {
		s.start(id, s.open(id))
	}
	for i := range 30 { // snapshots every 8 entries: the log alone no longer reaches back
		s.write(fmt.Sprint("k", i), fmt.Sprint("v", i))
	}
	lost, _ := s.leader()
	s.stop(lost)
	store := filepath.Join(s.dirs[lost], "framefarm.db")
	os.WriteFile(store+".unsynced", []byte("a boot before the machine stopped\n"), 0o600)
	garbled := make([]byte, 64<<10)
	for i := range garbled {
		garbled[i] = byte(i * 7)
	}
	if err := os.WriteFile(store, garbled, 0o600); err != nil {
		t.Fatal(err)
	}
	s.write("while", "away")
	m := s.start(lost, s.open(lost))
	if m.store.SetAside() == "" {
		t.Fatal("the torn store was not set aside")
	}
	for _, name := range []string{"k0", "k17", "k29", "while"} {
		if got := s.read(lost, name); got == "" {
			t.Fatalf("the rebuilt store has no %s", name)
		}
	}
	s.write("after", "rebuilding")
	if got := s.read(lost, "after"); got != "rebuilding" {
		t.Fatalf("the rebuilt replica does not follow the writes: %q", got)
	}
}

// TestAStoreOfRecordsSeedsTheReplicas: the first replica starts a new set from the records of a
// coordinator that ran alone; the others start empty and hold them once they join. A replica
// other than the first refuses to start a new set from records of its own.
func TestAStoreOfRecordsSeedsTheReplicas(t *testing.T) {
	s := newSet(t, "c1", "c2", "c3")
	alone := s.open("c1")
	acme := persistence.NewIDs().New(time.Now())
	if err := alone.Apply(&persistence.IssueToken{At: time.Now(), TeamName: "acme", NewTeamID: acme,
		WebhookSecret: "s", TokenHash: [32]byte{7}}); err != nil {
		t.Fatal(err)
	}
	if err := alone.Apply(&persistence.SetMeta{Name: "before", Value: "replicas"}); err != nil {
		t.Fatal(err)
	}

	other := s.open("c2")
	other.Apply(&persistence.IssueToken{At: time.Now(), TeamName: "rival", NewTeamID: persistence.NewIDs().New(time.Now()), WebhookSecret: "s"})
	_, err := Start(Config{ID: "c2", Bind: s.peers[1].Addr, Peers: s.peers, Dir: filepath.Join(s.dirs["c2"], "raft"), Store: other,
		ServerTLS: s.server, ClientTLS: s.client, Logger: slog.New(slog.DiscardHandler), Fail: func(error) {}})
	if err == nil || errors.Is(err, ErrNoTLS) {
		t.Fatal("a replica other than the first started a new set from its own records")
	}
	other.Close()
	os.RemoveAll(s.dirs["c2"])

	s.start("c1", alone)
	s.start("c2", s.open("c2"))
	s.start("c3", s.open("c3"))
	for _, id := range []string{"c2", "c3"} {
		if got := s.read(id, "before"); got != "replicas" {
			t.Fatalf("replica %s read %q of the seed's records", id, got)
		}
		if team, err := s.members[id].store.Team(acme); err != nil || team.Name != "acme" {
			t.Fatalf("replica %s: %+v, %v", id, team, err)
		}
	}
}

// TestADialEndsWithItsContext: a replica paused or cut off accepts connections and never
// answers them; a dial to it ends as soon as its context does, long before its timeout.
func TestADialEndsWithItsContext(t *testing.T) {
	s := newSet(t)
	m, err := newMux(porttest.FreeAddr(t), "", s.server, s.client, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		conn, err := silent.Accept()
		if err != nil {
			return
		}
		conn.Read(make([]byte, 1)) // the dialler's first handshake message: the dial waits on it
		accepted <- conn
	}()
	ctx, cancel := context.WithCancel(context.Background())
	dialed := make(chan error, 1)
	go func() {
		conn, err := m.dial(ctx, silent.Addr().String(), kindRelay, time.Hour)
		if conn != nil {
			conn.Close()
		}
		dialed <- err
	}()
	select {
	case conn := <-accepted:
		defer conn.Close()
	case <-time.After(time.Minute):
		t.Fatal("the dial never reached the listener")
	}
	cancel()
	select {
	case err := <-dialed:
		if err == nil {
			t.Fatal("a dial to a replica that never answered succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("the dial went on after its context ended")
	}
}

// TestAQuestionToALeaderThatNoLongerLeadsEndsAtOnce: a read's question waits on a leader that
// takes it and never answers (paused, or cut off); once the replica learns that another leads,
// the question fails at once rather than at its timeout, and the next goes to the new leader.
func TestAQuestionToALeaderThatNoLongerLeadsEndsAtOnce(t *testing.T) {
	listen := func(serve func(net.Conn)) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { conn.Close() })
				go serve(conn)
			}
		}()
		return l.Addr().String()
	}
	asked := make(chan struct{}, 1)
	paused := listen(func(conn net.Conn) {
		conn.Read(make([]byte, 1))
		asked <- struct{}{}
	})
	elected := listen(func(conn net.Conn) {
		for {
			if _, err := conn.Read(make([]byte, 1)); err != nil {
				return
			}
			conn.Write([]byte{1, 0, 0, 0, 0, 0, 0, 0, 7})
		}
	})
	var leader atomic.Value
	leader.Store(paused)
	a := &asker{timeout: time.Hour, leader: func() string { return leader.Load().(string) },
		dial: func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}}
	answered := make(chan error, 1)
	go func() {
		_, err := a.await(time.Now().Add(time.Hour))
		answered <- err
	}()
	select {
	case <-asked:
	case <-time.After(time.Minute):
		t.Fatal("the question never reached the leader")
	}
	leader.Store(elected)
	a.leaderChanged()
	select {
	case err := <-answered:
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("the question to the paused leader: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the question went on waiting for a leader that no longer leads")
	}
	if index, err := a.await(time.Now().Add(time.Hour)); err != nil || index != 7 {
		t.Fatalf("the question to the new leader: %d, %v", index, err)
	}
}

// TestAReplicaAskedWhileItStartsSaysItDoesNotLead: the port serves from before raft exists (the
// replicas agree on their settings first); a question about the leadership reaching it then is
// answered "not the leader", not a crash.
func TestAReplicaAskedWhileItStartsSaysItDoesNotLead(t *testing.T) {
	r := &Replica{}
	r.reads = &readIndexer{r: r, epoch: time.Now()}
	here, there := net.Pipe()
	go r.reads.serve(here)
	defer there.Close()
	there.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := there.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	var reply [9]byte
	if _, err := readFull(there, reply[:]); err != nil || reply[0] != 0 {
		t.Fatalf("answered %v (%v), want not the leader", reply, err)
	}
}

// TestThreeReplicasStartedAtOnce: a new set of three started in the same moment, several
// times: every replica runs (a crash would end the test's process) and they choose a leader.
func TestThreeReplicasStartedAtOnce(t *testing.T) {
	for round := range 5 {
		s := newSet(t, "r1", "r2", "r3")
		type started struct {
			id  string
			m   *member
			err error
		}
		all := make(chan started, len(s.peers))
		for _, p := range s.peers {
			store := s.open(p.ID)
			go func() {
				m, err := s.startAlone(p.ID, store)
				if err != nil {
					store.Close()
				}
				all <- started{p.ID, m, err}
			}()
		}
		for range s.peers {
			st := <-all
			if st.err != nil {
				t.Errorf("round %d: replica %s: %v", round, st.id, st.err)
				continue
			}
			s.add(st.id, st.m)
		}
		if t.Failed() {
			t.FailNow()
		}
		s.leader()
		for _, p := range s.peers {
			s.stop(p.ID)
		}
	}
}

// TestARevocationSealedHoldsOnEveryFollower: followers answer stale reads under the leader's
// leases; once the leader sealed a revocation it applied, a follower allowed a stale read has
// applied it (here followers hold what they receive an hour: the lease makes them apply it).
func TestARevocationSealedHoldsOnEveryFollower(t *testing.T) {
	s := newSet(t, "r1", "r2", "r3")
	for _, p := range s.peers {
		s.start(p.ID, s.open(p.ID))
	}
	_, leader := s.leader()
	s.write("before", "1")
	var followers []*member
	for _, m := range s.members {
		if m != leader {
			followers = append(followers, m)
		}
	}
	for _, f := range followers {
		deadline := time.Now().Add(20 * time.Second)
		for f.replica.StaleReadable(time.Now().Add(time.Second)) != nil {
			if time.Now().After(deadline) {
				t.Fatal("a follower in touch with the leader holds no lease")
			}
			f.replica.leases.renewSoon()
			time.Sleep(20 * time.Millisecond)
		}
	}
	s.write("revoked", "1")
	index := leader.store.AppliedIndex()
	if err := leader.replica.SealRevocation(); err != nil {
		t.Fatal(err)
	}
	for _, f := range followers {
		if err := f.replica.StaleReadable(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatalf("a follower in touch: %v", err)
		}
		if got := f.store.AppliedIndex(); got < index {
			t.Fatalf("a follower allowed a stale read has applied %d, the revocation is at %d", got, index)
		}
	}
}

// TestAFollowerHurriesTheElectionOnlyWhenTheLeaderIsGone: a connection from the leader that
// ends while the leader answers changes nothing; once the leader is gone, a follower waits the
// shortest timeouts raft allows, and the usual ones again once another leads.
func TestAFollowerHurriesTheElectionOnlyWhenTheLeaderIsGone(t *testing.T) {
	s := newSet(t, "r1", "r2", "r3")
	for _, p := range s.peers {
		s.start(p.ID, s.open(p.ID))
	}
	s.write("settled", "1")
	for _, p := range s.peers {
		s.read(p.ID, "settled") // every replica in the set, holding what the leader wrote
	}
	leaderID, _ := s.leader()
	var follower *member
	for id, m := range s.members {
		if id != leaderID {
			follower = m
		}
	}
	timeout := func() time.Duration { return follower.replica.raft.ReloadableConfig().HeartbeatTimeout }
	if follower.replica.deaths.check() || timeout() != s.heartbeat {
		t.Fatalf("a follower whose leader answers hurried: heartbeat timeout %s", timeout())
	}
	s.stop(leaderID)
	if !follower.replica.deaths.check() || timeout() != s.lease {
		t.Fatalf("a follower whose leader is gone did not hurry: heartbeat timeout %s", timeout())
	}
	s.leader()
	deadline := time.Now().Add(20 * time.Second)
	for timeout() != s.heartbeat {
		if time.Now().After(deadline) {
			t.Fatalf("the heartbeat timeout is %s once another leads, not %s", timeout(), s.heartbeat)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
