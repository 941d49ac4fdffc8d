// Package remoting starts Proto.Actor's remote endpoint (gRPC) for the coordinator and the
// render nodes, with mutual TLS when certificates are configured. Only protocol.Envelope
// crosses it (cluster/protocol), so peers of different versions never meet a message type
// their binary cannot decode.
package remoting

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// TLS names the PEM files of mutual TLS: this member's certificate and key, and the CA that
// signed every member's certificate. All empty: plain gRPC (a trusted network only).
type TLS struct {
	CertFile string `toml:"cert_file"`
	KeyFile  string `toml:"key_file"`
	CAFile   string `toml:"ca_file"`
}

// Enabled reports whether TLS is configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.CAFile != "" }

// Start serves system's actors on bind (host:port; port 0 picks one) and returns the address
// other members reach them at: advertise when set, else the bound address.
func Start(system *actor.ActorSystem, bind, advertise string, t TLS) (r *remote.Remote, addr string, err error) {
	host, portText, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, "", fmt.Errorf("actors address %q: %w", bind, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, "", fmt.Errorf("actors address %q: invalid port", bind)
	}
	opts := []remote.ConfigOption{remote.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))}
	if t.Enabled() {
		server, client, err := t.configs()
		if err != nil {
			return nil, "", err
		}
		opts = []remote.ConfigOption{
			remote.WithServerOptions(grpc.Creds(credentials.NewTLS(server))),
			remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(client))),
		}
	}
	if advertise != "" {
		opts = append(opts, remote.WithAdvertisedHost(advertise))
	}
	r = remote.NewRemote(system, remote.Configure(host, port, opts...))
	// Start panics when it cannot listen; that is a configuration error, returned as one.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("actors address %s: %v", bind, p)
		}
	}()
	r.Start()
	return r, system.ProcessRegistry.Address, nil
}

func (t TLS) configs() (server, client *tls.Config, err error) {
	if t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" {
		return nil, nil, errors.New("cluster TLS needs cert_file, key_file and ca_file")
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster TLS certificate: %w", err)
	}
	caPEM, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("cluster TLS CA %s holds no PEM certificate", t.CAFile)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	// Members are dialled by address; the certificate must name it (IP or DNS SAN).
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	return server, client, nil
}
