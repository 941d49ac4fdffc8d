package node

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/framefarm/framefarm/cluster/protocol"
)

// thisMachine describes the machine the node runs on; the memory is read where the system shows
// it in /proc/meminfo (Linux), and left out elsewhere.
func thisMachine() *protocol.Machine {
	m := &protocol.Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return m
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "MemTotal:"); ok {
			if kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64); err == nil {
				m.MemoryBytes = kib << 10
			}
			break
		}
	}
	return m
}
