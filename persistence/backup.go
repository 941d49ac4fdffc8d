package persistence

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A backup of a farm is a tar stream, its entries in this order: manifest.json (what it holds),
// framefarm.db (the store as one read transaction saw it, at one applied index on a replica),
// the files the caller adds (keys, the objects of a folder backend), then SHA256SUMS, the digest
// of every entry before it. A restore refuses a stream that ends before its SHA256SUMS or whose
// digests differ (damaged), and one of a later format.
const backupFormat = 1

const (
	backupManifest = "manifest.json"
	backupStore    = "framefarm.db"
	backupSums     = "SHA256SUMS"
)

// BackupManifest says what a backup holds.
type BackupManifest struct {
	Format int `json:"format"`
	// Release is the framefarm build that wrote it.
	Release   string    `json:"release"`
	CreatedAt time.Time `json:"createdAt"`
	// AppliedIndex is the replicated log's index the records hold (0: a farm that runs alone).
	AppliedIndex uint64       `json:"appliedIndex,omitempty"`
	Counts       BackupCounts `json:"counts"`
}

// BackupCounts are the records a backup holds, by kind (jobs include split jobs' chunks).
type BackupCounts struct {
	Jobs      int `json:"jobs"`
	Batches   int `json:"batches"`
	Templates int `json:"templates"`
	Teams     int `json:"teams"`
	Tokens    int `json:"tokens"`
	Secrets   int `json:"secrets"`
	Fonts     int `json:"fonts"`
}

// BackupFile is a file a backup carries besides the store: its name in the backup (relative,
// slash-separated, as the restore puts it under the data folder), its size, and its path.
type BackupFile struct {
	Name string
	Size int64
	Path string
}

// ErrDamagedBackup is a backup that cannot be restored as it is: cut short, altered, or not a
// backup at all.
var ErrDamagedBackup = errors.New("the backup is damaged")

// WriteBackup writes a backup of the store to w: the records as one read transaction sees them
// while writes go on, then the files files lists, once that transaction began (so every file its
// records name is there, unless deleted since). A file gone by the time it is copied is left out.
func (s *Store) WriteBackup(w io.Writer, release string, now time.Time, files func() ([]BackupFile, error)) (BackupManifest, error) {
	tx, err := s.db.Load().Begin(false)
	if err != nil {
		return BackupManifest{}, err
	}
	defer tx.Rollback()
	m := BackupManifest{Format: backupFormat, Release: release, CreatedAt: now.UTC(), Counts: backupCounts(&txn{tx: tx, cache: s.cache})}
	if raw := tx.Bucket(bucketMeta).Get([]byte(metaAppliedIndex)); raw != nil {
		m.AppliedIndex, _ = strconv.ParseUint(string(raw), 10, 64)
	}
	list, err := files()
	if err != nil {
		return m, err
	}
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	b := &backupWriter{tw: tar.NewWriter(w), at: now}
	err = b.addBytes(backupManifest, manifest)
	if err == nil {
		err = b.add(backupStore, tx.Size(), func(w io.Writer) error {
			_, err := tx.WriteTo(w)
			return err
		})
	}
	for _, f := range list {
		if err != nil {
			break
		}
		err = b.addFile(f)
	}
	if err == nil {
		err = b.addBytes(backupSums, b.sums.Bytes())
	}
	if err == nil {
		err = b.tw.Close()
	}
	return m, err
}

// backupCounts counts the records a backup holds.
func backupCounts(t *txn) BackupCounts {
	keys := func(name []byte) int {
		if b := t.tx.Bucket(name); b != nil {
			return b.Stats().KeyN
		}
		return 0
	}
	c := BackupCounts{Batches: keys(bucketBatches), Templates: keys(bucketTemplates), Teams: keys(bucketTeams),
		Tokens: keys(bucketTokens), Secrets: keys(bucketSecrets), Fonts: keys(bucketFonts)}
	for _, n := range t.JobCountsByState() {
		c.Jobs += n
	}
	return c
}

type backupWriter struct {
	tw   *tar.Writer
	at   time.Time
	sums bytes.Buffer
}

// add writes an entry of size bytes, which write writes, and notes its digest.
func (b *backupWriter) add(name string, size int64, write func(io.Writer) error) error {
	if err := b.tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: size, ModTime: b.at, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	h := sha256.New()
	if err := write(io.MultiWriter(b.tw, h)); err != nil {
		return fmt.Errorf("backup of %s: %w", name, err)
	}
	fmt.Fprintf(&b.sums, "%x  %s\n", h.Sum(nil), name)
	return nil
}

func (b *backupWriter) addBytes(name string, raw []byte) error {
	return b.add(name, int64(len(raw)), func(w io.Writer) error {
		_, err := w.Write(raw)
		return err
	})
}

func (b *backupWriter) addFile(f BackupFile) error {
	file, err := os.Open(f.Path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // deleted since it was listed: nothing refers to it any more
	}
	if err != nil {
		return err
	}
	defer file.Close()
	return b.add(f.Name, f.Size, func(w io.Writer) error {
		n, err := io.Copy(w, io.LimitReader(file, f.Size))
		if err == nil && n != f.Size {
			err = fmt.Errorf("the file shrank from %d to %d bytes while it was copied", f.Size, n)
		}
		return err
	})
}

// RestoreBackup reads a backup from r into dir, a data folder that holds no store: the store
// becomes dir/framefarm.db, every other entry goes under dir by its name. The records no longer
// say which replicated log they followed, so the store starts a farm of its own, or a new set of
// replicas as its first peer. A backup that is damaged, or of a later format, leaves nothing in
// dir.
func RestoreBackup(r io.Reader, dir string) (BackupManifest, error) {
	var m BackupManifest
	if _, err := os.Stat(filepath.Join(dir, backupStore)); err == nil {
		return m, fmt.Errorf("%s holds a store already: restore into an empty data folder", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return m, err
	}
	staging := filepath.Join(dir, ".restoring-"+rand.Text()[:8])
	if err := os.Mkdir(staging, 0o700); err != nil {
		return m, err
	}
	defer os.RemoveAll(staging)
	m, names, err := extractBackup(bufio.NewReaderSize(r, 1<<20), staging)
	if err != nil {
		return m, err
	}
	if err := forgetTheLog(filepath.Join(staging, backupStore)); err != nil {
		return m, fmt.Errorf("%w: its store: %w", ErrDamagedBackup, err)
	}
	for _, name := range names {
		to := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return m, err
		}
		if err := os.Rename(filepath.Join(staging, filepath.FromSlash(name)), to); err != nil {
			return m, err
		}
	}
	return m, nil
}

// extractBackup writes a backup's entries under staging and checks them against its digests;
// it returns the manifest and the entries' names (manifest and digests left out).
func extractBackup(r io.Reader, staging string) (BackupManifest, []string, error) {
	var m BackupManifest
	tr := tar.NewReader(r)
	digests := map[string]string{}
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return m, nil, fmt.Errorf("%w: it ends before its %s", ErrDamagedBackup, backupSums)
		}
		if err != nil {
			return m, nil, fmt.Errorf("%w: %w", ErrDamagedBackup, err)
		}
		name := hdr.Name
		switch {
		case len(digests) == 0 && name != backupManifest:
			return m, nil, fmt.Errorf("%w: it does not start with its %s", ErrDamagedBackup, backupManifest)
		case name == backupSums:
			if err := checkDigests(tr, digests); err != nil {
				return m, nil, err
			}
			if _, err := tr.Next(); !errors.Is(err, io.EOF) {
				return m, nil, fmt.Errorf("%w: it goes on after its %s", ErrDamagedBackup, backupSums)
			}
			return m, names, nil
		case hdr.Typeflag != tar.TypeReg || name != path.Clean(name) || path.IsAbs(name) || strings.HasPrefix(name, "../") ||
			strings.HasPrefix(name, ".restoring-") || digests[name] != "":
			return m, nil, fmt.Errorf("%w: an entry %q that no backup holds", ErrDamagedBackup, name)
		}
		h := sha256.New()
		if name == backupManifest {
			raw, err := io.ReadAll(io.TeeReader(io.LimitReader(tr, 1<<20), h))
			if err != nil || json.Unmarshal(raw, &m) != nil || m.Format < 1 {
				return m, nil, fmt.Errorf("%w: its %s cannot be read", ErrDamagedBackup, backupManifest)
			}
			if m.Format > backupFormat {
				return m, nil, fmt.Errorf("this backup is of format %d, written by framefarm %s, later than this release reads (%d): restore it with that release or a later one", m.Format, m.Release, backupFormat)
			}
		} else if err := writeEntry(stagedPath(staging, name), io.TeeReader(tr, h)); err != nil {
			return m, nil, fmt.Errorf("%w: %s: %w", ErrDamagedBackup, name, err)
		} else {
			names = append(names, name)
		}
		digests[name] = hex.EncodeToString(h.Sum(nil))
	}
}

// VerifyBackup reads a backup through and checks it against its digests, writing nothing.
func VerifyBackup(r io.Reader) (BackupManifest, error) {
	m, _, err := extractBackup(bufio.NewReaderSize(r, 1<<20), "")
	return m, err
}

// writeEntry writes an entry to its file; with no file (to ""), it only reads it through.
func writeEntry(to string, r io.Reader) error {
	if to == "" {
		_, err := io.Copy(io.Discard, r)
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Sync(), f.Close())
}

// stagedPath is where an entry is written under staging ("": nowhere).
func stagedPath(staging, name string) string {
	if staging == "" {
		return ""
	}
	return filepath.Join(staging, filepath.FromSlash(name))
}

// checkDigests reads SHA256SUMS and holds every entry read to it.
func checkDigests(r io.Reader, got map[string]string) error {
	raw, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDamagedBackup, err)
	}
	listed := 0
	for line := range strings.Lines(string(raw)) {
		sum, name, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "  ")
		if !ok || got[name] != sum {
			return fmt.Errorf("%w: %s differs from what its %s says", ErrDamagedBackup, name, backupSums)
		}
		listed++
	}
	if listed != len(got) {
		return fmt.Errorf("%w: its %s lists %d entries of %d", ErrDamagedBackup, backupSums, listed, len(got))
	}
	return nil
}

// forgetTheLog takes from a restored store the index of the replicated log it followed: a
// new farm, or a new set of replicas, starts a log of its own.
func forgetTheLog(file string) error {
	db, err := bolt.Open(file, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return errors.New("it has no meta bucket")
		}
		return meta.Delete([]byte(metaAppliedIndex))
	})
	return errors.Join(err, db.Close())
}
