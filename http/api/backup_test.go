package api

import (
	"bytes"
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
)

// A backup goes out at its pace: a write that puts the stream ahead of its rate waits until the
// clock has caught up with what was sent.
func TestABackupIsSentAtItsPace(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	var out bytes.Buffer
	p := newPacedWriter(&out, clk, 1000)
	p.Write(make([]byte, 5)) // 5 ms ahead: within the slack, no wait
	wrote := make(chan struct{})
	go func() {
		p.Write(make([]byte, 1995)) // 2,000 bytes at 1,000 a second are due at 2 s
		close(wrote)
	}()
	if armed := <-clk.Armed; armed != 2*time.Second {
		t.Fatalf("the writer waits %s, want 2s", armed)
	}
	clk.Advance(1999 * time.Millisecond)
	select {
	case <-wrote:
		t.Fatal("the write returned before its time")
	default:
	}
	clk.Advance(time.Millisecond)
	<-wrote
	if out.Len() != 2000 {
		t.Fatalf("%d bytes written", out.Len())
	}
}
