// Package membershiptest helps tests run cluster members on loopback.
package membershiptest

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address whose port was free for both TCP and UDP (memberlist
// listens on both) at the time of asking.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if pc, err := net.ListenPacket("udp", addr); err == nil {
			pc.Close()
			return addr
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return ""
}
