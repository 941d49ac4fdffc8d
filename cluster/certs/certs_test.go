package certs

import (
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func parse(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestIssuedCertificatesNameTheirRole: a certificate names exactly the identity it was issued
// for, chains to its CA, and the CA survives being written and read back.
func TestIssuedCertificatesNameTheirRole(t *testing.T) {
	ca, err := NewAuthority("farm", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPEM, keyPEM, _ := ca.PEM()
	os.WriteFile(filepath.Join(dir, "ca.pem"), certPEM, 0o600)
	os.WriteFile(filepath.Join(dir, "ca-key.pem"), keyPEM, 0o600)
	loaded, err := LoadAuthority(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for _, want := range []Identity{{Role: RoleCoordinator}, {Role: RoleNode}, {Role: RoleNode, NodeID: "render-02"}} {
		issued, _, err := loaded.Issue(want, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cert := parse(t, issued)
		got, err := IdentityOf(cert)
		if err != nil || got.Role != want.Role || got.NodeID != want.NodeID || got.Fingerprint == "" {
			t.Fatalf("%v: read back %+v, %v", want, got, err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Fatalf("%v: %v", want, err)
		}
	}
	for name, bad := range map[string]Identity{
		"a coordinator with a node id": {Role: RoleCoordinator, NodeID: "x"},
		"a bad node id":                {Role: RoleNode, NodeID: "../x"},
		"an unknown role":              {Role: "admin"},
	} {
		if _, _, err := ca.Issue(bad, time.Hour); err == nil {
			t.Errorf("%s was issued", name)
		}
	}
}

// TestIdentityOfRefusesWhatIsNotOneFarmIdentity: no farm URI, two of them, or an unknown one.
func TestIdentityOfRefusesWhatIsNotOneFarmIdentity(t *testing.T) {
	u := func(s string) *url.URL { v, _ := url.Parse(s); return v }
	for name, uris := range map[string][]*url.URL{
		"none":          nil,
		"another tool":  {u("spiffe://farm/node")},
		"two":           {u("framefarm://coordinator"), u("framefarm://node")},
		"unknown role":  {u("framefarm://admin")},
		"bad node id":   {u("framefarm://node/a%2Fb")},
		"coordinator/x": {u("framefarm://coordinator/x")},
	} {
		if _, err := IdentityOf(&x509.Certificate{URIs: uris}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
