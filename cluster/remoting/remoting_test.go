package remoting

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/protocol"
)

// farmCA makes a CA in dir and returns it with the file of its certificate.
func farmCA(t *testing.T, dir, name string) (*certs.Authority, string) {
	t.Helper()
	ca, err := certs.NewAuthority(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name+".pem")
	if err := os.WriteFile(file, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, file
}

// issue writes a certificate for id signed by ca and returns the TLS files of its holder.
func issue(t *testing.T, dir string, ca *certs.Authority, caFile string, id certs.Identity) TLS {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(id, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, fmt.Sprintf("%s-%s-%d", id.Role, id.NodeID, time.Now().UnixNano()))
	files := TLS{CertFile: name + ".pem", KeyFile: name + "-key.pem", CAFile: caFile}
	os.WriteFile(files.CertFile, certPEM, 0o600)
	os.WriteFile(files.KeyFile, keyPEM, 0o600)
	return files
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}

// TestMutualTLS: a node holding a certificate of the farm's CA reaches the coordinator; one with
// a certificate of another CA, and one whose certificate is a coordinator's, get nothing
// through.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caFile := farmCA(t, dir, "farm")
	other, otherFile := farmCA(t, dir, "other")
	coordinator := issue(t, dir, ca, caFile, certs.Identity{Role: certs.RoleCoordinator})
	node := issue(t, dir, ca, caFile, certs.Identity{Role: certs.RoleNode, NodeID: "n1"})
	intruder := issue(t, dir, other, otherFile, certs.Identity{Role: certs.RoleNode, NodeID: "n1"})
	impostor := issue(t, dir, ca, caFile, certs.Identity{Role: certs.RoleCoordinator})

	// Each member is its own process, as in a farm.
	addr, identity, _, _, _ := echoServer(t, Options{TLS: coordinator, Self: certs.RoleCoordinator, Accept: certs.RoleNode})
	if identity != "coordinator" {
		t.Fatalf("the endpoint's identity: %q", identity)
	}
	echo := actor.NewPID(addr, "echo")
	if out := askFrom(t, member{TLS: node, Self: certs.RoleNode, Accept: certs.RoleCoordinator}, echo, 20*time.Second); out != "answered node/n1" {
		t.Fatalf("a node of the farm: %s", out)
	}
	if out := askFrom(t, member{TLS: intruder, Self: certs.RoleNode, Accept: certs.RoleCoordinator}, echo, 2*time.Second); out != "unanswered" {
		t.Fatalf("a node with a foreign certificate: %s", out)
	}
	if out := askFrom(t, member{TLS: impostor, Self: certs.RoleCoordinator, Accept: certs.RoleCoordinator}, echo, 2*time.Second); out != "unanswered" {
		t.Fatalf("a second coordinator: %s", out)
	}
}

const (
	envMember = "REMOTING_TEST_MEMBER"
	envTarget = "REMOTING_TEST_TARGET"
	envWait   = "REMOTING_TEST_WAIT"
)

func TestMain(m *testing.M) {
	if os.Getenv(envMember) != "" {
		os.Exit(runMember())
	}
	if os.Getenv(envServe) != "" {
		os.Exit(serveEcho())
	}
	os.Exit(m.Run())
}

type member struct {
	TLS          TLS
	Self, Accept certs.Role
}

// askFrom runs this test binary as a member with the given certificate, asking target once.
func askFrom(t *testing.T, m member, target *actor.PID, wait time.Duration) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	spec, _ := json.Marshal(m)
	cmd.Env = append(os.Environ(), envMember+"="+string(spec), envTarget+"="+target.Address+"/"+target.Id, envWait+"="+wait.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("member process: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// runMember is the child process: start with the TLS files, ask the target, print the answer.
func runMember() int {
	var m member
	if err := json.Unmarshal([]byte(os.Getenv(envMember)), &m); err != nil {
		fmt.Println(err)
		return 1
	}
	addr, id, _ := strings.Cut(os.Getenv(envTarget), "/")
	wait, _ := time.ParseDuration(os.Getenv(envWait))
	system := newSystem()
	e, err := Start(system, Options{Bind: "127.0.0.1:0", TLS: m.TLS, Self: m.Self, Accept: m.Accept})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer e.Shutdown(false)
	res, err := system.Root.RequestFuture(actor.NewPID(addr, id), protocol.Wrap(&protocol.Bye{Sender: protocol.Sender{NodeID: "b"}}), wait).Result()
	if err != nil {
		fmt.Println("unanswered")
		return 0
	}
	msg, err := protocol.Open(res.(*protocol.Envelope))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("answered", msg.(*protocol.FinalAck).JobID)
	return 0
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	ca, caFile := farmCA(t, dir, "farm")
	node := issue(t, dir, ca, caFile, certs.Identity{Role: certs.RoleNode})
	_, otherFile := farmCA(t, dir, "other")
	for name, opts := range map[string]Options{
		"partial TLS":           {Bind: "127.0.0.1:0", TLS: TLS{CertFile: "x"}, Self: certs.RoleNode},
		"no TLS, not insecure":  {Bind: "127.0.0.1:0", Self: certs.RoleNode},
		"bad address":           {Bind: "nonsense", Insecure: true},
		"a node's certificate":  {Bind: "127.0.0.1:0", TLS: node, Self: certs.RoleCoordinator, Accept: certs.RoleNode},
		"another CA":            {Bind: "127.0.0.1:0", TLS: TLS{CertFile: node.CertFile, KeyFile: node.KeyFile, CAFile: otherFile}, Self: certs.RoleNode},
		"the key as the CA":     {Bind: "127.0.0.1:0", TLS: TLS{CertFile: node.CertFile, KeyFile: node.KeyFile, CAFile: node.KeyFile}, Self: certs.RoleNode},
		"a certificate missing": {Bind: "127.0.0.1:0", TLS: TLS{CertFile: filepath.Join(dir, "none"), KeyFile: node.KeyFile, CAFile: caFile}, Self: certs.RoleNode},
	} {
		if _, err := Start(newSystem(), opts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
