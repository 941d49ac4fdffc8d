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

// A backup of a farm is a tar stream, its entries in this order: manifest.json (what it holds,
// each entry after it by name and size), framefarm.db (the store as one read transaction saw
// it, at one applied index on a replica), the files the caller adds (keys, the objects of a
// folder backend), then SHA256SUMS, the digest of every entry before it. A restore takes only
// plain files of the names a backup writes, each of the size its manifest says, each digest
// listed once; it refuses a stream that ends before its SHA256SUMS or whose digests differ
// (damaged), and one of a later format. Format 1 (before the manifest listed the entries) is
// restored by the names alone.
const backupFormat = 2

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
	// Entries are those after the manifest but its digests, each with its size (a file gone by
	// the time it was to be copied is absent from the stream).
	Entries []BackupEntry `json:"entries,omitempty"`
	// AdminTokens are the hashes (SHA-256, hex) of the farm's own admin tokens that a restored
	// farm goes on taking: a coordinator's made at random in its data folder, which the backup
	// does not carry itself.
	AdminTokens []string `json:"adminTokens,omitempty"`
}

// BackupEntry is an entry of a backup as its manifest lists it.
type BackupEntry struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// BackupOptions describe a backup: the release and time it is made by, the files it carries
// besides the store (read once its transaction began), and the admin tokens it keeps.
type BackupOptions struct {
	Release     string
	Now         time.Time
	Files       func() ([]BackupFile, error)
	AdminTokens []string
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
// while writes go on, then the files o.Files lists, once that transaction began (so every file
// its records name is there, unless deleted since). A file gone by the time it is copied is left
// out. The records are first copied to a file beside the store, at the disk's pace: the
// transaction ends then, before the backup's reader takes them at its own (a read transaction
// held open keeps a write that grows the store waiting).
func (s *Store) WriteBackup(w io.Writer, o BackupOptions) (BackupManifest, error) {
	db := s.db.Load()
	tx, err := db.Begin(false)
	if err != nil {
		return BackupManifest{}, err
	}
	defer tx.Rollback()
	m := BackupManifest{Format: backupFormat, Release: o.Release, CreatedAt: o.Now.UTC(), Counts: backupCounts(&txn{tx: tx, cache: s.cache}),
		AdminTokens: o.AdminTokens}
	if raw := tx.Bucket(bucketMeta).Get([]byte(metaAppliedIndex)); raw != nil {
		m.AppliedIndex, _ = strconv.ParseUint(string(raw), 10, 64)
	}
	list, err := o.Files()
	if err != nil {
		return m, err
	}
	copied, err := os.CreateTemp(filepath.Dir(db.Path()), ".backup-*.db")
	if err != nil {
		return m, err
	}
	defer os.Remove(copied.Name())
	defer copied.Close()
	size, err := tx.WriteTo(copied)
	if err == nil {
		_, err = copied.Seek(0, io.SeekStart)
	}
	if err != nil {
		return m, fmt.Errorf("backup of the records: %w", err)
	}
	tx.Rollback()
	m.Entries = append(m.Entries, BackupEntry{Name: backupStore, Size: size})
	for _, f := range list {
		m.Entries = append(m.Entries, BackupEntry{Name: f.Name, Size: f.Size})
	}
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return m, err
	}
	b := &backupWriter{tw: tar.NewWriter(w), at: o.Now}
	err = b.addBytes(backupManifest, manifest)
	if err == nil {
		err = b.add(backupStore, size, func(w io.Writer) error {
			n, err := io.Copy(w, io.LimitReader(copied, size))
			if err == nil && n != size {
				err = fmt.Errorf("the records' copy holds %d bytes of %d", n, size)
			}
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
// becomes dir/framefarm.db, every other entry goes under dir by its name, which allowed must
// accept (the names of the files the caller's backups carry). The records no longer say which
// replicated log they followed, so the store starts a farm of its own, or a new set of replicas
// as its first peer; they keep the admin tokens the manifest names (KeptAdminTokens). A backup
// that is damaged, holds an entry no backup writes, or is of a later format, leaves nothing in
// dir.
func RestoreBackup(r io.Reader, dir string, allowed func(name string) bool) (BackupManifest, error) {
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
	m, names, err := extractBackup(bufio.NewReaderSize(r, 1<<20), staging, allowed)
	if err != nil {
		return m, err
	}
	if err := prepareRestored(filepath.Join(staging, backupStore), m.AdminTokens); err != nil {
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

// maxBackupEntries bounds the entries a manifest may list.
const maxBackupEntries = 100_000_000

// extractBackup writes a backup's entries under staging and checks them against its manifest
// and its digests; it returns the manifest and the entries' names (manifest and digests left
// out). Only plain files are taken, each of a name allowed (the store's, or one the caller's
// backups carry), once, no larger than the manifest says (of format 1, by the names alone).
func extractBackup(r io.Reader, staging string, allowed func(string) bool) (BackupManifest, []string, error) {
	var m BackupManifest
	tr := tar.NewReader(r)
	digests := map[string]string{}
	var sizes map[string]int64 // from the manifest (format 2)
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
		case name == backupSums && len(digests) > 0:
			if err := checkDigests(tr, digests); err != nil {
				return m, nil, err
			}
			if _, err := tr.Next(); !errors.Is(err, io.EOF) {
				return m, nil, fmt.Errorf("%w: it goes on after its %s", ErrDamagedBackup, backupSums)
			}
			return m, names, nil
		case hdr.Typeflag != tar.TypeReg || sparse(hdr) || digests[name] != "" || !backupName(name) ||
			len(digests) > 0 && name != backupStore && !allowed(name):
			return m, nil, fmt.Errorf("%w: an entry %q that no backup holds", ErrDamagedBackup, name)
		case sizes != nil && !sizeListed(sizes, name, hdr.Size):
			return m, nil, fmt.Errorf("%w: an entry %q of %d bytes that its %s does not list so", ErrDamagedBackup, name, hdr.Size, backupManifest)
		}
		h := sha256.New()
		if name == backupManifest {
			raw, err := io.ReadAll(io.TeeReader(io.LimitReader(tr, 64<<20), h))
			if err != nil || json.Unmarshal(raw, &m) != nil || m.Format < 1 || len(m.Entries) > maxBackupEntries {
				return m, nil, fmt.Errorf("%w: its %s cannot be read", ErrDamagedBackup, backupManifest)
			}
			if m.Format > backupFormat {
				return m, nil, fmt.Errorf("this backup is of format %d, written by framefarm %s, later than this release reads (%d): restore it with that release or a later one", m.Format, m.Release, backupFormat)
			}
			if m.Format >= 2 {
				sizes = make(map[string]int64, len(m.Entries))
				for _, e := range m.Entries {
					if _, twice := sizes[e.Name]; twice || e.Size < 0 {
						return m, nil, fmt.Errorf("%w: its %s lists %q twice, or with no size", ErrDamagedBackup, backupManifest, e.Name)
					}
					sizes[e.Name] = e.Size
				}
			}
		} else if err := writeEntry(stagedPath(staging, name), io.TeeReader(io.LimitReader(tr, hdr.Size), h)); err != nil {
			return m, nil, fmt.Errorf("%w: %s: %w", ErrDamagedBackup, name, err)
		} else {
			names = append(names, name)
		}
		digests[name] = hex.EncodeToString(h.Sum(nil))
	}
}

// backupName reports whether name could be an entry's: a clean, relative, slash-separated path
// of plain characters that stays in its folder on this system (no backslash, which Windows reads
// as a separator, no drive, no "..").
func backupName(name string) bool {
	if name == "" || len(name) > 1024 || name != path.Clean(name) || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") ||
		strings.HasPrefix(name, ".restoring-") || strings.ContainsAny(name, "\\\x00") || !filepath.IsLocal(filepath.FromSlash(name)) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// sparse reports whether a tar entry is a sparse file, whose holes a reader fills: its size
// says nothing of what the stream holds.
func sparse(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// sizeListed reports whether the manifest lists an entry of that name and size.
func sizeListed(sizes map[string]int64, name string, size int64) bool {
	listed, ok := sizes[name]
	return ok && listed == size
}

// VerifyBackup reads a backup through and checks it against its digests, writing nothing.
func VerifyBackup(r io.Reader) (BackupManifest, error) {
	m, _, err := extractBackup(bufio.NewReaderSize(r, 1<<20), "", func(string) bool { return true })
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

// checkDigests reads SHA256SUMS and holds every entry read to it: each listed once, with its
// digest.
func checkDigests(r io.Reader, got map[string]string) error {
	raw, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDamagedBackup, err)
	}
	listed := make(map[string]bool, len(got))
	for line := range strings.Lines(string(raw)) {
		sum, name, ok := strings.Cut(strings.TrimSuffix(line, "\n"), "  ")
		if !ok || got[name] != sum {
			return fmt.Errorf("%w: %s differs from what its %s says", ErrDamagedBackup, name, backupSums)
		}
		if listed[name] {
			return fmt.Errorf("%w: its %s lists %s twice", ErrDamagedBackup, backupSums, name)
		}
		listed[name] = true
	}
	if len(listed) != len(got) {
		return fmt.Errorf("%w: its %s lists %d entries of %d", ErrDamagedBackup, backupSums, len(listed), len(got))
	}
	return nil
}

// metaKeptAdminTokens holds the hashes of the admin tokens a restored farm goes on taking,
// comma-separated.
const metaKeptAdminTokens = "kept_admin_tokens"

// prepareRestored makes a restored store a farm's of its own: it takes out the index of the
// replicated log it followed (a new farm, or a new set of replicas, starts a log of its own),
// and records the admin tokens it keeps.
func prepareRestored(file string, adminTokens []string) error {
	for _, t := range adminTokens {
		if len(t) != 64 || strings.Trim(t, "0123456789abcdef") != "" {
			return fmt.Errorf("an admin token's hash %q is not a SHA-256", t)
		}
	}
	db, err := bolt.Open(file, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return errors.New("it has no meta bucket")
		}
		if err := meta.Delete([]byte(metaAppliedIndex)); err != nil {
			return err
		}
		if len(adminTokens) == 0 {
			return nil
		}
		return meta.Put([]byte(metaKeptAdminTokens), []byte(strings.Join(adminTokens, ",")))
	})
	return errors.Join(err, db.Close())
}

// AdminTokenHash is the hash of an admin token as a backup keeps it.
func AdminTokenHash(token string) string {
	h := HashToken(token)
	return hex.EncodeToString(h[:])
}

// KeptAdminTokens are the hashes (SHA-256, hex) of the admin tokens the farm took before it was
// restored from a backup, which it goes on taking.
func (s *Store) KeptAdminTokens() []string {
	if v := s.Meta(metaKeptAdminTokens); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}
