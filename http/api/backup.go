package api

import (
	"bufio"
	"io"
	"net/http"

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
	log, backup := s.log, s.Backup
	r.ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		m, err := backup(w)
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
