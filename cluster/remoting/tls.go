package remoting

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/framefarm/framefarm/cluster/certs"
	"github.com/framefarm/framefarm/cluster/protocol"
)

// TLS names the PEM files of mutual TLS: this member's certificate and key, and the farm's CA
// (`framefarm cluster tls` makes all three).
type TLS struct {
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	CAFile   string `toml:"ca_file"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.CAFile != "" }

// Configs builds both sides' TLS: each presents this member's certificate, which must name the
// role self, and accepts only a peer whose certificate the farm's CA signed and names the role
// accept. Roles, not addresses, identify members, so the dialled address need not be in the
// certificate.
func (t TLS) Configs(self, accept certs.Role) (server, client *tls.Config, identity certs.Identity, err error) {
	if t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" {
		return nil, nil, identity, errors.New("cluster TLS needs cert_file, key_file and ca_file")
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, nil, identity, fmt.Errorf("cluster TLS certificate: %w", err)
	}
	cas, err := certs.ReadCertificates(t.CAFile)
	if err != nil {
		return nil, nil, identity, fmt.Errorf("cluster TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, nil, identity, fmt.Errorf("cluster TLS certificate: %w", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, nil, identity, fmt.Errorf("cluster TLS certificate %s is not signed by the CA in %s: %w", t.CertFile, t.CAFile, err)
	}
	if identity, err = certs.IdentityOf(leaf); err != nil {
		return nil, nil, identity, fmt.Errorf("cluster TLS certificate %s: %w", t.CertFile, err)
	}
	if identity.Role != self {
		return nil, nil, identity, fmt.Errorf("cluster TLS certificate %s is a %s's; this member is a %s (make one with `framefarm cluster tls cert create`)",
			t.CertFile, identity.Role, self)
	}
	verify := func(usage x509.ExtKeyUsage) func(tls.ConnectionState) error {
		return func(cs tls.ConnectionState) error { return verifyPeer(cs, pool, usage, accept) }
	}
	server = &tls.Config{
		Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13,
		// Chains are verified in VerifyConnection, which also checks the role.
		ClientAuth:       tls.RequireAnyClientCert,
		VerifyConnection: verify(x509.ExtKeyUsageClientAuth),
	}
	client = &tls.Config{
		Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13,
		// The standard check would compare the dialled address with the certificate's names;
		// VerifyConnection checks the chain and the role instead.
		InsecureSkipVerify: true,
		VerifyConnection:   verify(x509.ExtKeyUsageServerAuth),
	}
	return server, client, identity, nil
}

// refusingCredentials tells the guard of every incoming connection whose handshake failed (gRPC
// itself says nothing of them), so an operator sees who knocked with what.
type refusingCredentials struct {
	credentials.TransportCredentials
	g *guard
}

func (c refusingCredentials) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.g.refuse(protocol.Peer{Addr: conn.RemoteAddr().String()}, fmt.Errorf("TLS handshake: %w", err))
	}
	return out, info, err
}

func (c refusingCredentials) Clone() credentials.TransportCredentials {
	return refusingCredentials{TransportCredentials: c.TransportCredentials.Clone(), g: c.g}
}

// verifyPeer checks a peer's chain against the farm's CA and the role its certificate names.
func verifyPeer(cs tls.ConnectionState, roots *x509.CertPool, usage x509.ExtKeyUsage, accept certs.Role) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the peer showed no certificate")
	}
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return fmt.Errorf("certificate %q: %w", leaf.Subject.CommonName, err)
	}
	id, err := certs.IdentityOf(leaf)
	if err != nil {
		return err
	}
	if id.Role != accept {
		return fmt.Errorf("certificate %q names a %s; only a %s may connect here", leaf.Subject.CommonName, id.Role, accept)
	}
	return nil
}
