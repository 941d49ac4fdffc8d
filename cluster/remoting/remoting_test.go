package remoting

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/framefarm/framefarm/cluster/protocol"
)

// writeCert writes a certificate for 127.0.0.1 signed by ca (self-signed when ca is nil) and
// returns its certificate, key and the files.
func writeCert(t *testing.T, dir, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, TLS) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	parent, signer := tpl, key
	if ca == nil {
		tpl.IsCA, tpl.BasicConstraintsValid = true, true
	} else {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	keyDER, _ := x509.MarshalECPrivateKey(key)
	files := TLS{CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
	os.WriteFile(files.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(files.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	return cert, key, files
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}

// TestMutualTLS: members holding certificates of the cluster's CA exchange envelopes; one with
// a certificate of another CA gets nothing through.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, caFiles := writeCert(t, dir, "ca", nil, nil)
	_, _, a := writeCert(t, dir, "a", ca, caKey)
	_, _, b := writeCert(t, dir, "b", ca, caKey)
	otherCA, otherKey, _ := writeCert(t, dir, "other-ca", nil, nil)
	_, _, intruder := writeCert(t, dir, "intruder", otherCA, otherKey)
	a.CAFile, b.CAFile, intruder.CAFile = caFiles.CertFile, caFiles.CertFile, caFiles.CertFile

	server := newSystem()
	rs, addr, err := Start(server, "127.0.0.1:0", "", a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Shutdown(false) })
	answer := actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*protocol.Envelope); ok {
			ctx.Respond(protocol.Wrap(&protocol.FinalAck{JobID: "j", Attempt: 1}))
		}
	})
	if _, err := server.Root.SpawnNamed(answer, "echo"); err != nil {
		t.Fatal(err)
	}
	echo := actor.NewPID(addr, "echo")

	// Each member is its own process, as in a farm (Proto.Actor's remote sets gRPC's global
	// logger at every start, which is a data race within one process).
	if out := askFrom(t, b, echo, 20*time.Second); out != "answered j" {
		t.Fatalf("a member of the cluster: %s", out)
	}
	if out := askFrom(t, intruder, echo, 2*time.Second); out != "unanswered" {
		t.Fatalf("a member with a foreign certificate: %s", out)
	}
}

const (
	envMember = "REMOTING_TEST_MEMBER"
	envTarget = "REMOTING_TEST_TARGET"
	envWait   = "REMOTING_TEST_WAIT"
)

func TestMain(m *testing.M) {
	if os.Getenv(envMember) != "" {
		os.Exit(member())
	}
	os.Exit(m.Run())
}

// askFrom runs this test binary as a member with the given certificate, asking target once.
func askFrom(t *testing.T, files TLS, target *actor.PID, wait time.Duration) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	spec, _ := json.Marshal(files)
	cmd.Env = append(os.Environ(), envMember+"="+string(spec), envTarget+"="+target.Address+"/"+target.Id, envWait+"="+wait.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("member process: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// member is the child process: start with the TLS files, ask the target, print the answer.
func member() int {
	var files TLS
	if err := json.Unmarshal([]byte(os.Getenv(envMember)), &files); err != nil {
		fmt.Println(err)
		return 1
	}
	addr, id, _ := strings.Cut(os.Getenv(envTarget), "/")
	wait, _ := time.ParseDuration(os.Getenv(envWait))
	system := newSystem()
	r, _, err := Start(system, "127.0.0.1:0", "", files)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer r.Shutdown(false)
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
	if _, _, err := Start(newSystem(), "127.0.0.1:0", "", TLS{CertFile: "x"}); err == nil {
		t.Fatal("a partial TLS configuration was accepted")
	}
	if _, _, err := Start(newSystem(), "nonsense", "", TLS{}); err == nil {
		t.Fatal("a bad address was accepted")
	}
}
