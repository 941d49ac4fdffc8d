// Package workfiles holds the file chores of a render's working folder that every engine has:
// copying a staged file into place and zipping a folder into one output.
package workfiles

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Copy copies src to a new file dst of at most limit bytes (limit <= 0: no limit).
func Copy(src, dst string, limit int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	var r io.Reader = in
	if limit > 0 {
		r = io.LimitReader(in, limit+1)
	}
	n, err := io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && limit > 0 && n > limit {
		err = fmt.Errorf("%s is larger than the %d bytes allowed", filepath.Base(src), limit)
	}
	return err
}

// Zip writes every file under dir into a zip at out, named by their paths relative to dir, in
// lexical order. Store suits content that is compressed already (PNG, JPEG frames).
func Zip(dir, out string, method uint16) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	files := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: filepath.ToSlash(rel), Method: method})
		if err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		files++
		_, err = io.Copy(w, src)
		return err
	})
	if err != nil {
		return err
	}
	if files == 0 {
		return errors.New("there is nothing to zip")
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// Find lists the files under dir whose extension is one of exts (lower case, with the dot),
// whatever the case of their names.
func Find(dir string, exts ...string) []string {
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && slices.Contains(exts, strings.ToLower(filepath.Ext(p))) {
			found = append(found, p)
		}
		return nil
	})
	return found
}
