package api

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
)

// Backup writes a backup of the farm (persistence.WriteBackup) to w.
type Backup func(w io.Writer) (persistence.BackupManifest, error)

var errNoBackup = newError(http.StatusNotFound, codeNotFound, "this coordinator makes no backups")

// backup streams a backup of the farm (GET /api/v2/admin/backup): the leader's records at one
// moment while it serves, with the files it keeps in a folder. A backup cut short ends without
// its digests, and a restore refuses it.
func (s *Server) backup(r *request) {
	if s.Backup == nil {
		r.fail(errNoBackup)
		return
	}
	r.ctx.SetContentType("application/x-tar")
	r.ctx.Response.Header.Set("Content-Disposition", `attachment; filename="framefarm-backup.tar"`)
	r.ctx.Response.Header.Set("Cache-Control", "no-store")
	log, backup, clk := s.log, s.Backup, s.Clock
	r.ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		m, err := backup(newPacedWriter(w, clk, backupRate))
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			log.Error("a backup was cut short", "err", err)
			return
		}
		log.Info("sent a backup", "jobs", m.Counts.Jobs, "applied_index", m.AppliedIndex)
	})
}

// backupRate bounds how fast a backup is sent, in bytes a second: taking one leaves the farm's
// intake its pace on a small machine (BenchmarkMillionJobs, its backup stage, measures both).
const backupRate = 64 << 20

// pacedWriter writes no faster than rate bytes a second on average, waiting on its clock when it
// is ahead by more than paceSlack.
type pacedWriter struct {
	w     io.Writer
	clk   clock.Clock
	rate  float64
	start time.Time
	sent  int64
}

const paceSlack = 10 * time.Millisecond

func newPacedWriter(w io.Writer, clk clock.Clock, rate float64) *pacedWriter {
	return &pacedWriter{w: w, clk: clk, rate: rate, start: clk.Now()}
}

func (p *pacedWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.sent += int64(n)
	due := p.start.Add(time.Duration(float64(p.sent) / p.rate * float64(time.Second)))
	if wait := due.Sub(p.clk.Now()); err == nil && wait > paceSlack {
		clock.Sleep(context.Background(), p.clk, wait)
	}
	return n, err
}
