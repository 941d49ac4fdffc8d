// Package outbound is the HTTP client for requests to addresses users chose: webhooks, template
// and asset downloads, output uploads to their buckets. Unless allowed, it refuses to connect to
// loopback, private, link-local and other internal addresses. The check runs on the address
// actually dialled, after DNS resolution, so a name that resolves (or re-resolves) to an internal
// address is refused too.
package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"syscall"
	"time"
)

// ErrPrivateAddress is returned when a request would reach an internal address.
var ErrPrivateAddress = errors.New("private, loopback and link-local addresses are not allowed (set allow_private_urls to permit them)")

// Options configure a client.
type Options struct {
	// AllowPrivate lets requests reach internal addresses (an on-premises farm).
	AllowPrivate bool
	// Timeout bounds a whole request, body included (0: none; use a context instead).
	Timeout time.Duration
	// FollowRedirects follows up to 5 redirects; otherwise a 3xx answer is returned as is.
	FollowRedirects bool
}

// NewClient returns a client that enforces opts.
func NewClient(opts Options) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !opts.AllowPrivate {
		dialer.Control = refusePrivate
	}
	transport := &http.Transport{
		Proxy:                 nil, // an environment proxy would bypass the address check
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
	client := &http.Client{Transport: plainTransport{transport}, Timeout: opts.Timeout}
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !opts.FollowRedirects {
			return http.ErrUseLastResponse
		}
		if len(via) >= 5 {
			return errors.New("stopped after 5 redirects")
		}
		return nil
	}
	return client
}

func refusePrivate(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("cannot check address %q: %w", host, err)
	}
	if Internal(addr) {
		return fmt.Errorf("refusing to connect to %s: %w", addr, ErrPrivateAddress)
	}
	return nil
}

// notPublic are the ranges, besides those netip names, of no public unicast host: IPv4's shared
// address space (carrier NAT), "this network", the IETF's protocol assignments, benchmarking,
// the reserved block and broadcast; IPv6's discard prefix, documentation, and the deprecated
// site-local addresses.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("0.0.0.0/8"), netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"), netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("100::/64"), netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("fec0::/10"),
}

// IPv6 addresses that carry an IPv4 address, which is where they lead: NAT64's (the well-known
// prefix and the local-use one), IPv4-compatible ones (::a.b.c.d), and 6to4's.
var (
	nat64       = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}
	compatible  = netip.MustParsePrefix("::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	teredoRange = netip.MustParsePrefix("2001::/32")
)

// Internal reports whether addr is not a public unicast address, or is an IPv6 address that
// leads to an IPv4 one that is not (NAT64, IPv4-compatible, 6to4).
func Internal(addr netip.Addr) bool {
	addr = addr.Unmap()
	if addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
		addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() ||
		slices.ContainsFunc(notPublic, func(p netip.Prefix) bool { return p.Contains(addr) }) {
		return true
	}
	if embedded, ok := embeddedIPv4(addr); ok {
		return Internal(embedded)
	}
	return false
}

// embeddedIPv4 is the IPv4 address an IPv6 one leads to, when it carries one. A Teredo address's
// is obscured, and a relay reaches whatever it names: it reads as the unspecified address, and
// is refused.
func embeddedIPv4(addr netip.Addr) (netip.Addr, bool) {
	if !addr.Is6() {
		return netip.Addr{}, false
	}
	b := addr.As16()
	switch {
	case slices.ContainsFunc(nat64, func(p netip.Prefix) bool { return p.Contains(addr) }), compatible.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	case teredoRange.Contains(addr):
		return netip.IPv4Unspecified(), true
	}
	return netip.Addr{}, false
}

// plainTransport says why a request failed in plain words: Go's network errors name the resolver
// the farm uses and the system call that failed, which tell a user nothing of their URL and an
// attacker something of the farm's network.
type plainTransport struct{ next http.RoundTripper }

func (t plainTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, plainError{err}
	}
	return resp, nil
}

// plainError is a failed request's error, said plainly; errors.Is and errors.As still reach the
// cause.
type plainError struct{ err error }

func (e plainError) Unwrap() error { return e.err }

func (e plainError) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.err, &t) && t.Timeout()
}

func (e plainError) Error() string {
	var dns *net.DNSError
	switch {
	case errors.Is(e.err, ErrPrivateAddress):
		return e.err.Error()
	case errors.As(e.err, &dns) && dns.IsNotFound:
		return fmt.Sprintf("the host %s was not found", dns.Name)
	case errors.As(e.err, &dns) && dns.IsTimeout:
		return fmt.Sprintf("looking up the host %s took too long", dns.Name)
	case errors.As(e.err, &dns):
		return fmt.Sprintf("the host %s could not be looked up", dns.Name)
	case errors.Is(e.err, syscall.ECONNREFUSED):
		return "the server refused the connection"
	case errors.Is(e.err, syscall.ECONNRESET), errors.Is(e.err, io.EOF), errors.Is(e.err, io.ErrUnexpectedEOF):
		return "the server closed the connection"
	case errors.Is(e.err, context.Canceled):
		return "the request was cancelled"
	case errors.Is(e.err, context.DeadlineExceeded), e.Timeout():
		return "the server did not answer in time"
	}
	return e.err.Error()
}
