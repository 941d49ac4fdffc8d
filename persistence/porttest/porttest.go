// Package porttest gives tests free loopback addresses for the servers they start (SeaweedFS,
// cluster members, coordinators). It sits on the persistence floor, the lowest that needs it, so
// the tests of every room above may use it.
package porttest

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// lowestPort is the bottom of the range FreeAddr picks from; the top is the kernel's first
// ephemeral port.
const lowestPort = 10000

var (
	givenMu sync.Mutex
	given   = map[int]bool{}
)

// FreeAddr returns a loopback address whose port was free for both TCP and UDP (a cluster
// member's memberlist listens on both) at the time of asking. The port lies below the kernel's ephemeral range, so
// no listener on port 0 and no outgoing connection can take it between the asking and the
// member's bind (a coordinator's HTTP listener on 127.0.0.1:0 once did).
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Free is FreeAddr for callers without a test (a TestMain).
func Free() (string, error) {
	port, err := freeRun(1)
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), err
}

// FreeRange returns the first of n consecutive loopback ports, each free as FreeAddr's is: for
// a program that lays its ports out one after the other (framefarm ha init).
func FreeRange(t testing.TB, n int) int {
	t.Helper()
	port, err := freeRun(n)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func freeRun(n int) (int, error) {
	top := firstEphemeralPort()
	givenMu.Lock()
	defer givenMu.Unlock()
	for range 200 {
		first := lowestPort + rand.IntN(top-lowestPort-n)
		if !allFree(first, n) {
			continue
		}
		for port := first; port < first+n; port++ {
			given[port] = true
		}
		return first, nil
	}
	return 0, errors.New("no ports free for both TCP and UDP")
}

// allFree reports whether ports first to first+n-1 are free for TCP and UDP and not given out.
func allFree(first, n int) bool {
	for port := first; port < first+n; port++ {
		if given[port] {
			return false
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		ln.Close()
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		pc.Close()
	}
	return true
}

// firstEphemeralPort reads the bottom of the range the kernel hands out for port 0 and
// outgoing connections (Linux's default, 32768, when it cannot be read).
func firstEphemeralPort() int {
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if fields := strings.Fields(string(b)); len(fields) == 2 {
			if low, err := strconv.Atoi(fields[0]); err == nil && low > lowestPort+1000 {
				return low
			}
		}
	}
	return 32768
}
