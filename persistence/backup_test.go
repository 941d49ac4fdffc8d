package persistence

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// backupOf writes a backup of a store holding a team with a token, a meta value and the index
// of a replicated log, with one file beside it.
func backupOf(t testing.TB) []byte {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "framefarm.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, hash := NewToken()
	issue := &IssueToken{At: testNow, TeamName: "acme", NewTeamID: NewIDs().New(testNow), TokenHash: hash}
	if err := errors.Join(s.Apply(issue), s.Apply(&SetMeta{Name: "kept", Value: "1"}),
		s.Apply(&SetMeta{Name: metaAppliedIndex, Value: "4711"})); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tpl.zip")
	os.WriteFile(file, []byte("a template"), 0o600)
	var out bytes.Buffer
	m, err := s.WriteBackup(&out, BackupOptions{Release: "v-test", Now: testNow, AdminTokens: []string{AdminTokenHash("ffl_old")},
		Files: func() ([]BackupFile, error) {
			return []BackupFile{{Name: "objects/templates/t1", Size: 10, Path: file}, {Name: "gone", Size: 3, Path: file + ".gone"}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts.Teams != 1 || m.Counts.Tokens != 1 || m.AppliedIndex != 4711 || m.Release != "v-test" || len(m.Entries) != 3 {
		t.Fatalf("manifest %+v", m)
	}
	if entries, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".backup-*")); len(entries) != 0 {
		t.Fatalf("the records' copy is left behind: %v", entries)
	}
	return out.Bytes()
}

// anyFile takes every name a caller's backup might carry.
func anyFile(string) bool { return true }

// A backup restores the records and files into an empty folder, which starts a log of its own.
func TestABackupRestoresTheRecordsAndFiles(t *testing.T) {
	backup := backupOf(t)
	dir := filepath.Join(t.TempDir(), "new")
	m, err := RestoreBackup(bytes.NewReader(backup), dir, func(name string) bool { return name == "objects/templates/t1" })
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts.Teams != 1 {
		t.Fatalf("restored manifest %+v", m)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "objects", "templates", "t1")); err != nil || string(got) != "a template" {
		t.Fatalf("the file restored: %q, %v", got, err)
	}
	s := openTestStore(t, filepath.Join(dir, "framefarm.db"))
	if s.Meta("kept") != "1" || s.AppliedIndex() != 0 || !slices.Equal(s.KeptAdminTokens(), []string{AdminTokenHash("ffl_old")}) {
		t.Fatalf("restored store: kept=%q, applied index %d, admin tokens %q", s.Meta("kept"), s.AppliedIndex(), s.KeptAdminTokens())
	}
	if teams, err := s.Teams(); err != nil || len(teams) != 1 || teams[0].Name != "acme" {
		t.Fatalf("restored teams %+v, %v", teams, err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".restoring-") {
			t.Errorf("%s left behind", e.Name())
		}
	}
	if _, err := RestoreBackup(bytes.NewReader(backup), dir, anyFile); err == nil {
		t.Error("a restore over a store was taken")
	}
}

// A backup cut short, altered or of a later format is refused, and leaves nothing behind.
func TestADamagedBackupIsRefused(t *testing.T) {
	backup := backupOf(t)
	altered := bytes.Clone(backup)
	altered[len(altered)/2] ^= 0xff
	var later bytes.Buffer
	tw := tar.NewWriter(&later)
	manifest, _ := json.Marshal(BackupManifest{Format: backupFormat + 1, Release: "v-next"})
	tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o600, Size: int64(len(manifest)), Typeflag: tar.TypeReg})
	tw.Write(manifest)
	tw.Close()
	// An entry after the digests: the archive's two closing blocks taken off, another added.
	trailing := bytes.NewBuffer(bytes.Clone(backup[:len(backup)-1024]))
	tw = tar.NewWriter(trailing)
	tw.WriteHeader(&tar.Header{Name: "late", Mode: 0o600, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()
	for name, c := range map[string]struct {
		raw  []byte
		want string
	}{
		"cut short": {backup[:len(backup)*2/3], "damaged"},
		"altered":   {altered, "damaged"},
		"no backup": {[]byte("hello"), "damaged"},
		"later":     {later.Bytes(), "written by framefarm v-next"},
		"trailing":  {trailing.Bytes(), "goes on after"},
	} {
		dir := filepath.Join(t.TempDir(), "new")
		_, err := RestoreBackup(bytes.NewReader(c.raw), dir, anyFile)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s left %d entries", name, len(entries))
		}
		if _, err := VerifyBackup(bytes.NewReader(c.raw)); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
}

// FuzzVerifyBackup: no stream, however made, crashes the reading of a backup, and one that reads
// as whole restores.
func FuzzVerifyBackup(f *testing.F) {
	f.Add(backupOf(f))
	f.Add([]byte("not a backup"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if _, err := VerifyBackup(bytes.NewReader(raw)); err != nil {
			return
		}
		if _, err := RestoreBackup(bytes.NewReader(raw), filepath.Join(t.TempDir(), "farm"), anyFile); err != nil && !strings.Contains(err.Error(), "store") {
			t.Fatalf("a backup that verifies does not restore: %v", err)
		}
	})
}

// forged is a backup as an attacker may write one: the manifest listing entries, the entries
// (each a header and what follows it in the stream), and the digests of what sums says.
type forged struct {
	listed  []BackupEntry
	entries []forgedEntry
	// sums are the lines of SHA256SUMS; nil: one per entry, as a backup writes them.
	sums []string
	// raw is an entry as its bytes, after the others (which archive/tar cannot write).
	raw []byte
}

type forgedEntry struct {
	hdr  tar.Header
	data []byte
}

func (f forged) bytes(t *testing.T) []byte {
	t.Helper()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	manifest, _ := json.Marshal(BackupManifest{Format: backupFormat, Release: "forged", Entries: f.listed})
	sums := f.sums
	write := func(hdr tar.Header, data []byte) {
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
		if f.sums == nil {
			sums = append(sums, fmt.Sprintf("%x  %s", sha256.Sum256(data), hdr.Name))
		}
	}
	write(tar.Header{Name: "manifest.json", Mode: 0o600, Size: int64(len(manifest)), Typeflag: tar.TypeReg}, manifest)
	for _, e := range f.entries {
		write(e.hdr, e.data)
	}
	if f.raw != nil {
		tw.Flush()
		out.Write(f.raw)
	}
	body := strings.Join(sums, "\n") + "\n"
	tw.WriteHeader(&tar.Header{Name: "SHA256SUMS", Mode: 0o600, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write([]byte(body))
	tw.Close()
	return out.Bytes()
}

func plain(name string, data []byte) forgedEntry {
	return forgedEntry{hdr: tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), Typeflag: tar.TypeReg}, data: data}
}

// TestARestoreTakesOnlyWhatABackupWrites: a restore refuses a stream holding an entry no backup
// of the farm writes (a planted local-admin.json), a sparse entry (a small stream restored as a
// huge file), an entry of another size than its manifest lists, one its manifest does not list,
// digests listing an entry twice (and so another not at all), a name with a backslash or that
// leaves its folder; it leaves nothing behind. One that holds only what a backup writes is
// restored.
func TestARestoreTakesOnlyWhatABackupWrites(t *testing.T) {
	store, err := os.ReadFile(storeFileOf(t))
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	altered := bytes.Clone(key)
	altered[0] ^= 1
	listed := []BackupEntry{{Name: "framefarm.db", Size: int64(len(store))}, {Name: "url-signing.key", Size: int64(len(key))}}
	allowed := func(name string) bool { return name == "url-signing.key" || strings.HasPrefix(name, "objects/") }
	cases := map[string]struct {
		f    forged
		want string
	}{
		"a planted file": {forged{listed: append(listed, BackupEntry{Name: "local-admin.json", Size: 2}),
			entries: []forgedEntry{plain("framefarm.db", store), plain("local-admin.json", []byte("{}"))}}, `"local-admin.json" that no backup holds`},
		"a sparse entry": {forged{listed: append(slices.Clone(listed[:1]), BackupEntry{Name: "url-signing.key", Size: 1 << 30}),
			entries: []forgedEntry{plain("framefarm.db", store)}, raw: sparseEntry("url-signing.key", 1<<30, 1536)}, "that no backup holds"},
		"larger than listed": {forged{listed: listed,
			entries: []forgedEntry{plain("framefarm.db", store), plain("url-signing.key", append(key, 'x'))}}, "does not list so"},
		"not listed": {forged{listed: listed[:1],
			entries: []forgedEntry{plain("framefarm.db", store), plain("url-signing.key", key)}}, "does not list so"},
		"a digest listed twice": {forged{listed: listed,
			entries: []forgedEntry{plain("framefarm.db", store), plain("url-signing.key", altered)},
			sums: []string{fmt.Sprintf("%x  manifest.json", sha256.Sum256(nil)), fmt.Sprintf("%x  framefarm.db", sha256.Sum256(store)),
				fmt.Sprintf("%x  framefarm.db", sha256.Sum256(store))}}, "damaged"},
		"a backslash": {forged{listed: append(listed, BackupEntry{Name: `objects\..\..\evil`, Size: 1}),
			entries: []forgedEntry{plain("framefarm.db", store), plain(`objects\..\..\evil`, []byte("x"))}}, "that no backup holds"},
		"out of its folder": {forged{listed: append(listed, BackupEntry{Name: "objects/../../evil", Size: 1}),
			entries: []forgedEntry{plain("framefarm.db", store), plain("objects/../../evil", []byte("x"))}}, "that no backup holds"},
	}
	for name, c := range cases {
		dir := filepath.Join(t.TempDir(), "new")
		if _, err := RestoreBackup(bytes.NewReader(c.f.bytes(t)), dir, allowed); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%s left %d entries", name, len(entries))
		}
	}
	// The manifest digest of a forged backup is what it is: here every line is written.
	whole := forged{listed: listed, entries: []forgedEntry{plain("framefarm.db", store), plain("url-signing.key", key)}}
	dir := filepath.Join(t.TempDir(), "new")
	if _, err := RestoreBackup(bytes.NewReader(whole.bytes(t)), dir, allowed); err != nil {
		t.Fatalf("a backup of what backups write: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "url-signing.key")); !bytes.Equal(got, key) {
		t.Fatalf("restored key %q", got)
	}
}

// storeFileOf is the file of a store holding a team.
func storeFileOf(t *testing.T) string {
	file := filepath.Join(t.TempDir(), "framefarm.db")
	s, err := Open(file, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, hash := NewToken()
	if err := s.Apply(&IssueToken{At: testNow, TeamName: "acme", NewTeamID: NewIDs().New(testNow), TokenHash: hash}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return file
}

// TestABackupOfTheFirstFormatRestores: a backup written before the manifest listed its entries
// is restored by the names of its entries.
func TestABackupOfTheFirstFormatRestores(t *testing.T) {
	store, _ := os.ReadFile(storeFileOf(t))
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	var sums []string
	for _, e := range []forgedEntry{plain("manifest.json", []byte(`{"format":1,"release":"0.1.0"}`)), plain("framefarm.db", store), plain("secrets.key", []byte("k"))} {
		tw.WriteHeader(&e.hdr)
		tw.Write(e.data)
		sums = append(sums, fmt.Sprintf("%x  %s\n", sha256.Sum256(e.data), e.hdr.Name))
	}
	body := strings.Join(sums, "")
	tw.WriteHeader(&tar.Header{Name: "SHA256SUMS", Mode: 0o600, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write([]byte(body))
	tw.Close()
	dir := filepath.Join(t.TempDir(), "new")
	if _, err := RestoreBackup(bytes.NewReader(out.Bytes()), dir, func(name string) bool { return name == "secrets.key" }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "secrets.key")); string(got) != "k" {
		t.Fatalf("restored %q", got)
	}
}

// sparseEntry is a GNU sparse file of the PAX format 1.0 as tar writes one: a PAX header naming
// its size (realSize), then its map and the data bytes it holds, which a reader fills with holes
// up to realSize.
func sparseEntry(name string, realSize int64, data int) []byte {
	record := func(k, v string) string {
		for n := len(k) + len(v) + 3; ; n++ {
			if r := fmt.Sprintf("%d %s=%s\n", n, k, v); len(r) == n {
				return r
			}
		}
	}
	pax := record("GNU.sparse.major", "1") + record("GNU.sparse.minor", "0") + record("GNU.sparse.name", name) +
		record("GNU.sparse.realsize", fmt.Sprint(realSize))
	sparseMap := fmt.Sprintf("1\n0\n%d\n", data)
	body := append(padded([]byte(sparseMap)), make([]byte, data)...)
	var out []byte
	out = append(out, ustarHeader("PaxHeaders/"+name, 'x', int64(len(pax)))...)
	out = append(out, padded([]byte(pax))...)
	out = append(out, ustarHeader("GNUSparseFile.0/"+name, '0', int64(len(body)))...)
	return append(out, padded(body)...)
}

// ustarHeader is one header block.
func ustarHeader(name string, typeflag byte, size int64) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:108], "0000600\x00")
	copy(b[108:116], "0000000\x00")
	copy(b[116:124], "0000000\x00")
	copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	copy(b[136:148], fmt.Sprintf("%011o\x00", 0))
	b[156] = typeflag
	copy(b[257:265], "ustar\x0000")
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// padded is b filled to a whole number of blocks.
func padded(b []byte) []byte {
	return append(b, make([]byte, (512-len(b)%512)%512)...)
}

// TestABackupsSlowReaderHoldsUpNoWrite: while a backup's reader takes nothing more of it (a
// slow link), writes that grow the store past what it maps go on: the records were copied at
// the disk's pace, and the read transaction ended before the stream went out. Read at last, the
// backup is whole.
func TestABackupsSlowReaderHoldsUpNoWrite(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "framefarm.db"), Options{InitialMmapSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	grow := func(n int) error {
		for i := range n {
			if err := s.Apply(&SetMeta{Name: fmt.Sprintf("filler-%d-%d", n, i), Value: strings.Repeat("x", 64<<10)}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := grow(8); err != nil {
		t.Fatal(err)
	}
	reader, writer := io.Pipe()
	began, goOn := make(chan struct{}), make(chan struct{})
	var backup bytes.Buffer
	read := make(chan error, 1)
	go func() {
		_, err := io.CopyN(&backup, reader, 1) // the backup began; nothing more is read for now
		close(began)
		<-goOn
		if err == nil {
			_, err = io.Copy(&backup, reader)
		}
		read <- err
	}()
	backedUp := make(chan error, 1)
	go func() {
		_, err := s.WriteBackup(writer, BackupOptions{Release: "v-test", Now: testNow, Files: func() ([]BackupFile, error) { return nil, nil }})
		writer.CloseWithError(err)
		backedUp <- err
	}()
	<-began
	written := make(chan error, 1)
	go func() { written <- grow(64) }() // 4 MiB: past the first map's size
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		close(goOn) // so the store closes
		t.Fatal("writes that grow the store waited for the backup's reader")
	}
	close(goOn)
	if err := errors.Join(<-read, <-backedUp); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBackup(&backup); err != nil {
		t.Fatalf("the backup read at last: %v", err)
	}
}
