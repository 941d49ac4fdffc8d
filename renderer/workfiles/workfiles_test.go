package workfiles

import (
	"archive/zip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopyCapsTheSize(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.WriteFile(src, []byte("0123456789"), 0o600)
	if err := Copy(src, filepath.Join(dir, "ok"), 10); err != nil {
		t.Fatal(err)
	}
	if err := Copy(src, filepath.Join(dir, "big"), 9); err == nil || !strings.Contains(err.Error(), "larger than the 9 bytes") {
		t.Fatalf("got %v", err)
	}
}

func TestZipKeepsRelativePathsInOrder(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.txt", "a/2.png", "a/1.png"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o700)
		os.WriteFile(filepath.Join(dir, name), []byte(name), 0o600)
	}
	out := filepath.Join(t.TempDir(), "out.zip")
	if err := Zip(dir, out, zip.Store); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.OpenReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "a/1.png,a/2.png,b.txt" {
		t.Fatalf("entries %v", names)
	}
	if err := Zip(t.TempDir(), out, zip.Store); err == nil {
		t.Fatal("an empty folder was zipped")
	}
}

func TestFindByExtension(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"fonts/A.TTF", "fonts/b.otf", "c.ttc", "readme.txt"} {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o700)
		os.WriteFile(filepath.Join(dir, name), nil, 0o600)
	}
	var got []string
	for _, p := range Find(dir, ".ttf", ".otf") {
		rel, _ := filepath.Rel(dir, p)
		got = append(got, filepath.ToSlash(rel))
	}
	if strings.Join(got, ",") != "fonts/A.TTF,fonts/b.otf" {
		t.Fatalf("found %v", got)
	}
}
