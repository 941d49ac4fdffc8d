// Package certs is the farm's certificate authority: `framefarm cluster tls ca create` makes a
// CA, `framefarm cluster tls cert create` signs a coordinator's or a node's certificate with it,
// and the actors endpoint (cluster/remoting) reads a peer's role from the certificate it shows.
//
// A member is identified by its role, never by the address it is dialled at: each certificate
// carries one URI SAN, framefarm://coordinator, framefarm://node (any node id) or
// framefarm://node/ID (only node ID). So certificates need no IP addresses, and a node's
// certificate can never pass for the coordinator's.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// Role is what a member is in the farm.
type Role string

const (
	RoleCoordinator Role = "coordinator"
	RoleNode        Role = "node"
)

// Identity is who a certificate says its holder is.
type Identity struct {
	Role Role
	// NodeID binds a node certificate to one node id; empty, the certificate serves any node
	// (a fleet of identical machines, the benchmarks' simulated nodes).
	NodeID string
	// Fingerprint is the SHA-256 of the certificate, to tell two holders of one role apart.
	Fingerprint string
}

// String names the identity as logs show it.
func (i Identity) String() string {
	s := string(i.Role)
	if i.NodeID != "" {
		s += "/" + i.NodeID
	}
	return s
}

const uriScheme = "framefarm"

// NodeIDPattern is what a node id may be (the coordinator refuses others at hello).
var NodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// uri is the SAN that names an identity.
func (i Identity) uri() *url.URL {
	u := &url.URL{Scheme: uriScheme, Host: string(i.Role)}
	if i.NodeID != "" {
		u.Path = "/" + i.NodeID
	}
	return u
}

// IdentityOf reads the identity a certificate names; a certificate naming none, or more than
// one, is an error.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	var found []Identity
	for _, u := range cert.URIs {
		if u.Scheme != uriScheme {
			continue
		}
		id := Identity{Role: Role(u.Host), NodeID: strings.TrimPrefix(u.Path, "/")}
		switch {
		case id.Role == RoleCoordinator && id.NodeID == "":
		case id.Role == RoleNode && (id.NodeID == "" || NodeIDPattern.MatchString(id.NodeID)):
		default:
			return Identity{}, fmt.Errorf("certificate %q names an unknown farm identity %s", cert.Subject.CommonName, u)
		}
		found = append(found, id)
	}
	if len(found) != 1 {
		return Identity{}, fmt.Errorf("certificate %q names %d farm identities (framefarm://coordinator or framefarm://node[/ID]); make one with `framefarm cluster tls cert create`",
			cert.Subject.CommonName, len(found))
	}
	sum := sha256.Sum256(cert.Raw)
	found[0].Fingerprint = hex.EncodeToString(sum[:])
	return found[0], nil
}

// Authority signs the farm's certificates.
type Authority struct {
	Cert *x509.Certificate
	key  crypto.Signer
}

// NewAuthority makes a CA valid for validity.
func NewAuthority(name string, validity time.Duration) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"framefarm"}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, key: key}, nil
}

// LoadAuthority reads a CA written by WriteAuthority.
func LoadAuthority(certFile, keyFile string) (*Authority, error) {
	certs, err := ReadCertificates(certFile)
	if err != nil {
		return nil, err
	}
	if len(certs) != 1 || !certs[0].IsCA {
		return nil, fmt.Errorf("%s does not hold exactly one CA certificate", certFile)
	}
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM key", keyFile)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	key, ok := parsed.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: the key cannot sign", keyFile)
	}
	return &Authority{Cert: certs[0], key: key}, nil
}

// ReadCertificates reads every PEM certificate of a file.
func ReadCertificates(file string) ([]*x509.Certificate, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, raw = pem.Decode(raw)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, cert)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return out, nil
}

// Issue signs a certificate for an identity and returns it and its key, PEM-encoded. It names
// no address: members check each other's role, not the address they dialled.
func (a *Authority) Issue(id Identity, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	switch {
	case id.Role == RoleCoordinator && id.NodeID != "":
		return nil, nil, errors.New("a coordinator certificate names no node id")
	case id.Role == RoleNode && id.NodeID != "" && !NodeIDPattern.MatchString(id.NodeID):
		return nil, nil, fmt.Errorf("node id %q must be 1 to 128 letters, digits, dots, dashes or underscores", id.NodeID)
	case id.Role != RoleCoordinator && id.Role != RoleNode:
		return nil, nil, fmt.Errorf("unknown role %q", id.Role)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: id.String(), Organization: []string{"framefarm"}},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{id.uri()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, a.Cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemOf("CERTIFICATE", der), pemOf("PRIVATE KEY", keyDER), nil
}

// PEM returns the CA's certificate and key, PEM-encoded.
func (a *Authority) PEM() (certPEM, keyPEM []byte, err error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return nil, nil, err
	}
	return pemOf("CERTIFICATE", a.Cert.Raw), pemOf("PRIVATE KEY", keyDER), nil
}

func pemOf(kind string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on supported systems
	}
	return n
}
