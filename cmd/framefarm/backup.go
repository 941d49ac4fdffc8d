package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
)

// backedUpKeys are the keys a backup carries from the data folder, when the folder holds them.
var backedUpKeys = []string{"secrets.key", "url-signing.key"}

// objectsInBackup is the folder of a backup, and of a data folder, that holds the objects of a
// folder backend.
const objectsInBackup = "objects/"

// inBackups reports whether a backup of a farm carries a file of that name: a key of the data
// folder, or an object (what a restore takes besides the store).
func inBackups(name string) bool {
	if key, ok := strings.CutPrefix(name, objectsInBackup); ok {
		return blobs.CheckKey(key) == nil
	}
	return slices.Contains(backedUpKeys, name)
}

// backupFiles are the files a backup of this farm carries besides its records: the keys kept in
// the data folder (those the configuration gives are the operator's to keep), and the objects
// of a folder backend (a bucket is backed up as a bucket is).
func (f *farm) backupFiles() ([]persistence.BackupFile, error) {
	var out []persistence.BackupFile
	for _, key := range backedUpKeys {
		path := filepath.Join(f.cfg.Server.DataDir, key)
		info, err := os.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist): // the configuration gives it
		case err != nil:
			return nil, err
		default:
			out = append(out, persistence.BackupFile{Name: key, Size: info.Size(), Path: path})
		}
	}
	local, inFolder := f.objects.store.(*blobs.Store)
	if !inFolder {
		return out, nil
	}
	err := local.Walk("", func(key string, size int64) error {
		path, err := local.Path(key)
		if err == nil {
			out = append(out, persistence.BackupFile{Name: objectsInBackup + key, Size: size, Path: path})
		}
		return err
	})
	return out, err
}

// backupCommand runs `framefarm backup`: it saves a backup of a running farm (any replica's URL
// gives the leader's) to a file, checked against its digests before it takes the file's name.
func backupCommand(args []string, stdout io.Writer) error {
	fs := commandFlags("backup")
	admin := addAdminFlags(fs)
	out := fs.String("out", "", "the file to write (required)")
	if err := parseFlags(fs, stdout, args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() != 0 {
		return errors.New("usage: framefarm backup --out FILE [--url URL] [--admin-token TOKEN]")
	}
	base, token, err := admin.resolve()
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimRight(base, "/")+"/api/v2/admin/backup", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return fmt.Errorf("GET /api/v2/admin/backup: %s: %s", resp.Status, strings.TrimSpace(string(answer)))
	}
	partial := *out + ".partial"
	file, err := os.OpenFile(partial, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(partial)
	// The backup is checked against its digests as it arrives.
	check, checking := io.Pipe()
	verified := make(chan error, 1)
	var m persistence.BackupManifest
	go func() {
		var err error
		if m, err = persistence.VerifyBackup(check); err == nil {
			_, err = io.Copy(io.Discard, check) // the stream's end, after the archive's
		}
		check.CloseWithError(err)
		verified <- err
	}()
	_, err = io.Copy(io.MultiWriter(&syncingWriter{f: file}, checking), resp.Body)
	checking.CloseWithError(err)
	if err = errors.Join(err, <-verified, file.Sync(), file.Close()); err != nil {
		return err
	}
	if err := os.Rename(partial, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %s\n", *out, describeBackup(m))
	return nil
}

// restoreCommand runs `framefarm restore`: a new farm (or a new set of replicas' first peer)
// from a backup, in an empty data folder.
func restoreCommand(args []string, stdout io.Writer) error {
	fs := commandFlags("restore")
	dataDir := fs.String("data-dir", "", "the new farm's data folder, empty (required)")
	if err := parseFlags(fs, stdout, args); err != nil {
		return err
	}
	if *dataDir == "" || fs.NArg() != 1 {
		return errors.New("usage: framefarm restore --data-dir DIR FILE")
	}
	file, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer file.Close()
	m, err := persistence.RestoreBackup(file, *dataDir, inBackups)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored into %s: %s\nstart it with framefarm serve --data-dir %s (its configuration as the farm's was)\n", *dataDir, describeBackup(m), *dataDir)
	return nil
}

func describeBackup(m persistence.BackupManifest) string {
	c := m.Counts
	at := ""
	if m.AppliedIndex > 0 {
		at = fmt.Sprintf(" at the replicas' index %d", m.AppliedIndex)
	}
	return fmt.Sprintf("a backup by framefarm %s of %s%s: %d jobs, %d batches, %d templates, %d teams, %d tokens, %d secrets, %d fonts",
		m.Release, m.CreatedAt.Format("2006-01-02 15:04:05 UTC"), at, c.Jobs, c.Batches, c.Templates, c.Teams, c.Tokens, c.Secrets, c.Fonts)
}

// syncingWriter writes a file to disk as it goes, every syncEvery bytes: a backup written on the
// farm's own machine never leaves the whole backup's pages for the disk at once, which the
// store's next commit would wait behind.
type syncingWriter struct {
	f       *os.File
	pending int
}

const syncEvery = 4 << 20

func (w *syncingWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	if w.pending += n; err == nil && w.pending >= syncEvery {
		w.pending, err = 0, w.f.Sync()
	}
	return n, err
}
