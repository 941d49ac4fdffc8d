package outbound

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"syscall"
	"testing"
)

func TestRefusesLoopbackUnlessAllowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	_, err := NewClient(Options{}).Get(srv.URL)
	if !errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("guarded client reached loopback: %v", err)
	}
	resp, err := NewClient(Options{AllowPrivate: true}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestInternalAddresses(t *testing.T) {
	for addr, internal := range map[string]bool{
		"127.0.0.1": true, "10.1.2.3": true, "172.16.0.1": true, "192.168.1.1": true, "169.254.169.254": true,
		"100.64.0.1": true, "0.0.0.0": true, "::1": true, "fe80::1": true, "fc00::1": true, "::ffff:127.0.0.1": true,
		"8.8.8.8": false, "2001:4860:4860::8888": false, "93.184.216.34": false,
		// IPv6 that leads to IPv4: NAT64, IPv4-compatible, 6to4 (public where their IPv4 is),
		// and Teredo, whose IPv4 is obscured.
		"64:ff9b::7f00:1": true, "64:ff9b::a9fe:a9fe": true, "64:ff9b:1::a00:1": true, "64:ff9b::808:808": false,
		"::127.0.0.1": true, "::10.0.0.1": true, "::8.8.8.8": false,
		"2002:7f00:1::1": true, "2002:0a00:0001::": true, "2002:0808:0808::1": false, "2001:0:4136:e378::1": true,
		// Other ranges of no public host.
		"198.18.0.1": true, "192.0.0.8": true, "240.0.0.1": true, "255.255.255.255": true, "2001:db8::1": true,
		"100::1": true, "fec0::1": true, "ff02::1": true,
	} {
		if got := Internal(netip.MustParseAddr(addr)); got != internal {
			t.Errorf("Internal(%s) = %v, want %v", addr, got, internal)
		}
	}
}

func TestDoesNotFollowRedirectsByDefault(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	}))
	defer srv.Close()
	resp, err := NewClient(Options{AllowPrivate: true}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d, want the redirect itself", resp.StatusCode)
	}
}

// TestFailuresAreSaidPlainly: what a user reads of a failed request names their host, never the
// farm's resolver or a system call.
func TestFailuresAreSaidPlainly(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "cdn.example", Server: "10.0.0.2:53", IsNotFound: true}}, "the host cdn.example was not found"},
		{&net.DNSError{Err: "i/o timeout", Name: "cdn.example", Server: "10.0.0.2:53", IsTimeout: true}, "looking up the host cdn.example took too long"},
		{&net.DNSError{Err: "server misbehaving", Name: "cdn.example", Server: "10.0.0.2:53"}, "the host cdn.example could not be looked up"},
	} {
		got := plainError{tc.err}.Error()
		if got != tc.want || strings.Contains(got, "10.0.0.2") {
			t.Errorf("%v: %q, want %q", tc.err, got, tc.want)
		}
	}
	// A real refusal, through the client.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = NewClient(Options{AllowPrivate: true}).Get("http://" + addr + "/x")
	if err == nil || !strings.HasSuffix(err.Error(), ": the server refused the connection") || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a refused connection: %v", err)
	}
}
