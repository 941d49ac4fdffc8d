package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/framefarm/framefarm/cluster/certs"
)

// CA file names `framefarm cluster tls` writes and reads (in --dir).
const (
	caCertFile = "farm-ca.pem"
	caKeyFile  = "farm-ca-key.pem"
)

// clusterCommand dispatches `framefarm cluster tls ca create` and `framefarm cluster tls cert
// create`: the farm's certificates, made the way Nomad's and Consul's `tls` commands make theirs.
func clusterCommand(args []string, stdout, stderr io.Writer) error {
	switch {
	case len(args) >= 3 && args[0] == "tls" && args[1] == "ca" && args[2] == "create":
		return createCA(args[3:], stdout, stderr)
	case len(args) >= 3 && args[0] == "tls" && args[1] == "cert" && args[2] == "create":
		return createCert(args[3:], stdout, stderr)
	}
	return errors.New("usage: framefarm cluster tls ca create [--dir DIR] [--days N]\n" +
		"       framefarm cluster tls cert create (--coordinator | --node ID | --any-node) [--dir DIR] [--days N]")
}

// createCA writes a new farm CA into --dir, refusing to replace one.
func createCA(args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("cluster tls ca create")
	dir := fs.String("dir", ".", "folder to write "+caCertFile+" and "+caKeyFile+" into")
	days := fs.Int("days", 3650, "days the CA is valid")
	if err := parseFlags(fs, stdout, args); err != nil {
		return err
	}
	if fs.NArg() > 0 || *days < 1 {
		return errors.New("usage: framefarm cluster tls ca create [--dir DIR] [--days N]")
	}
	ca, err := certs.NewAuthority("framefarm farm CA", time.Duration(*days)*24*time.Hour)
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := ca.PEM()
	if err != nil {
		return err
	}
	if err := writeNew(*dir, caCertFile, certPEM, caKeyFile, keyPEM); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (give it to every member) and %s (keep it secret, off the render nodes)\n",
		filepath.Join(*dir, caCertFile), filepath.Join(*dir, caKeyFile))
	return nil
}

// createCert signs a coordinator's or a node's certificate with the CA in --dir.
func createCert(args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("cluster tls cert create")
	dir := fs.String("dir", ".", "folder holding "+caCertFile+" and "+caKeyFile+", where the certificate is written")
	coordinator := fs.Bool("coordinator", false, "the coordinator's certificate")
	nodeID := fs.String("node", "", "a render node's certificate, for this node id only")
	anyNode := fs.Bool("any-node", false, "a render node certificate any node id may use (identical machines)")
	days := fs.Int("days", 730, "days the certificate is valid")
	if err := parseFlags(fs, stdout, args); err != nil {
		return err
	}
	chosen := 0
	for _, set := range []bool{*coordinator, *nodeID != "", *anyNode} {
		if set {
			chosen++
		}
	}
	if fs.NArg() > 0 || chosen != 1 || *days < 1 {
		return errors.New("usage: framefarm cluster tls cert create (--coordinator | --node ID | --any-node) [--dir DIR] [--days N]")
	}
	id, name := certs.Identity{Role: certs.RoleNode, NodeID: *nodeID}, "node"
	switch {
	case *coordinator:
		id, name = certs.Identity{Role: certs.RoleCoordinator}, "coordinator"
	case *nodeID != "":
		name = "node-" + *nodeID
	}
	ca, err := certs.LoadAuthority(filepath.Join(*dir, caCertFile), filepath.Join(*dir, caKeyFile))
	if err != nil {
		return fmt.Errorf("the farm CA (make it with framefarm cluster tls ca create): %w", err)
	}
	certPEM, keyPEM, err := ca.Issue(id, time.Duration(*days)*24*time.Hour)
	if err != nil {
		return err
	}
	certFile, keyFile := name+".pem", name+"-key.pem"
	if err := writeNew(*dir, certFile, certPEM, keyFile, keyPEM); err != nil {
		return err
	}
	certPath, keyPath, caPath := filepath.Join(*dir, certFile), filepath.Join(*dir, keyFile), filepath.Join(*dir, caCertFile)
	if *coordinator {
		fmt.Fprintf(stdout, "wrote %s and %s; in the coordinator's configuration:\n\n[cluster.tls]\ncert_file = %q\nkey_file = %q\nca_file = %q\n",
			certPath, keyPath, certPath, keyPath, caPath)
		return nil
	}
	fmt.Fprintf(stdout, "wrote %s and %s; copy them and %s to the node and start it with\n  --tls-cert %s --tls-key %s --tls-ca %s\n",
		certPath, keyPath, caPath, certFile, keyFile, caCertFile)
	return nil
}

// writeNew writes a certificate and its key into dir, the key readable by its owner only; it
// never replaces an existing file.
func writeNew(dir, certName string, certPEM []byte, keyName string, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, name := range []string{certName, keyName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%s already exists; remove it first to replace it", filepath.Join(dir, name))
		}
	}
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{keyName, keyPEM, 0o600}, {certName, certPEM, 0o644}} {
		out, err := os.OpenFile(filepath.Join(dir, f.name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
		if err != nil {
			return err
		}
		_, err = out.Write(f.data)
		if closeErr := out.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
