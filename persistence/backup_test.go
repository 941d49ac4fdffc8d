package persistence

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	m, err := s.WriteBackup(&out, "v-test", testNow, func() ([]BackupFile, error) {
		return []BackupFile{{Name: "objects/templates/t1", Size: 10, Path: file}, {Name: "gone", Size: 3, Path: file + ".gone"}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Counts.Teams != 1 || m.Counts.Tokens != 1 || m.AppliedIndex != 4711 || m.Release != "v-test" {
		t.Fatalf("manifest %+v", m)
	}
	return out.Bytes()
}

// A backup restores the records and files into an empty folder, which starts a log of its own.
func TestABackupRestoresTheRecordsAndFiles(t *testing.T) {
	backup := backupOf(t)
	dir := filepath.Join(t.TempDir(), "new")
	m, err := RestoreBackup(bytes.NewReader(backup), dir)
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
	if s.Meta("kept") != "1" || s.AppliedIndex() != 0 {
		t.Fatalf("restored store: kept=%q, applied index %d", s.Meta("kept"), s.AppliedIndex())
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
	if _, err := RestoreBackup(bytes.NewReader(backup), dir); err == nil {
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
		_, err := RestoreBackup(bytes.NewReader(c.raw), dir)
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
		if _, err := RestoreBackup(bytes.NewReader(raw), filepath.Join(t.TempDir(), "farm")); err != nil && !strings.Contains(err.Error(), "store") {
			t.Fatalf("a backup that verifies does not restore: %v", err)
		}
	})
}
