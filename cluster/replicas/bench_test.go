package replicas

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/framefarm/framefarm/persistence"
)

// BenchmarkReplicatedWrite: small writes through the leader of three replicas in this process
// (each answered once two of them hold it in their log on disk and the leader applied it), by 1,
// 16 and 64 writers at once; reported: writes a second and the mean time a write takes.
func BenchmarkReplicatedWrite(b *testing.B) {
	s := newSet(b, "a", "b", "c")
	s.heartbeat, s.lease = 800*time.Millisecond, 500*time.Millisecond // the production timings
	for _, id := range []string{"a", "b", "c"} {
		s.start(id, s.open(id))
	}
	_, leader := s.leader()
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("c=%d", writers), func(b *testing.B) {
			each := 2048 / writers
			var wg sync.WaitGroup
			started := time.Now()
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						if err := leader.store.Apply(&persistence.SetMeta{Name: fmt.Sprint("w", w, "-", i%8), Value: "v"}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(started)
			b.ReportMetric(float64(each*writers)/elapsed.Seconds(), "writes/s")
			b.ReportMetric(float64(elapsed.Microseconds())/float64(each)/1000, "ms/write")
		})
	}
}
