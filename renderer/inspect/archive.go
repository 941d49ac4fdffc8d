package inspect

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Limits bound what inspection and extraction accept from one file.
type Limits struct {
	// MaxEntries caps the entries of an archive [10000].
	MaxEntries int
	// MaxTotalBytes caps the uncompressed size of an archive [4 GiB].
	MaxTotalBytes int64
	// MaxRatio is the compression ratio above which a large entry counts as a zip bomb [200].
	MaxRatio int64
	// MaxProjectBytes caps a project or Lottie file read into memory [128 MiB]: inspection holds
	// it whole while it parses, with a few inspections at once.
	MaxProjectBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = 10000
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = 4 << 30
	}
	if l.MaxRatio <= 0 {
		l.MaxRatio = 200
	}
	if l.MaxProjectBytes <= 0 {
		l.MaxProjectBytes = 128 << 20
	}
	return l
}

// bombFloor is the size from which a high compression ratio makes an entry suspect.
const bombFloor = 16 << 20

// Archive is a zip checked entry by entry before anything is read from it.
type Archive struct {
	files  []*zip.File
	limits Limits
	closer io.Closer
}

// OpenArchive opens a zip file and checks its entries.
func OpenArchive(p string, limits Limits) (*Archive, error) {
	zr, err := zip.OpenReader(p)
	if err != nil {
		return nil, fmt.Errorf("the zip archive cannot be read: %w", err)
	}
	a, err := checkArchive(&zr.Reader, limits)
	if err != nil {
		zr.Close()
		return nil, err
	}
	a.closer = zr
	return a, nil
}

// archiveFromBytes checks a zip held in memory (a zip inside a zip).
func archiveFromBytes(b []byte, limits Limits) (*Archive, error) {
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, fmt.Errorf("the zip archive cannot be read: %w", err)
	}
	return checkArchive(zr, limits)
}

func checkArchive(zr *zip.Reader, limits Limits) (*Archive, error) {
	limits = limits.withDefaults()
	if len(zr.File) > limits.MaxEntries {
		return nil, fmt.Errorf("the zip archive has %d entries, more than the %d allowed", len(zr.File), limits.MaxEntries)
	}
	var total uint64
	for _, f := range zr.File {
		if err := checkEntryName(f.Name); err != nil {
			return nil, err
		}
		if f.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("the zip archive entry %q is a symbolic link, which is not allowed", f.Name)
		}
		if f.UncompressedSize64 > bombFloor && f.UncompressedSize64/max(f.CompressedSize64, 1) > uint64(limits.MaxRatio) {
			return nil, fmt.Errorf("the zip archive entry %q expands %d times (a zip bomb?)", f.Name, f.UncompressedSize64/max(f.CompressedSize64, 1))
		}
		if total += f.UncompressedSize64; total > uint64(limits.MaxTotalBytes) {
			return nil, fmt.Errorf("the zip archive expands to more than the %d bytes allowed", limits.MaxTotalBytes)
		}
	}
	return &Archive{files: zr.File, limits: limits}, nil
}

// checkEntryName refuses entries that would land outside the extraction folder (zip slip).
func checkEntryName(name string) error {
	clean := strings.ReplaceAll(name, "\\", "/")
	switch {
	case name == "" || strings.ContainsRune(name, 0):
		return errors.New("the zip archive has an entry without a usable name")
	case strings.HasPrefix(clean, "/") || (len(clean) > 1 && clean[1] == ':'):
		return fmt.Errorf("the zip archive entry %q has an absolute path, which is not allowed", name)
	}
	for _, part := range strings.Split(clean, "/") {
		if part == ".." {
			return fmt.Errorf("the zip archive entry %q climbs out of the archive (..), which is not allowed", name)
		}
	}
	return nil
}

// Close releases the archive.
func (a *Archive) Close() error {
	if a.closer != nil {
		return a.closer.Close()
	}
	return nil
}

// ignored are entries of tools, not of the project: macOS resource forks, auto-saves.
func ignored(name string) bool {
	name = strings.ReplaceAll(name, "\\", "/")
	base := path.Base(name)
	return strings.HasPrefix(name, "__MACOSX/") || strings.Contains(name, "/__MACOSX/") || strings.HasPrefix(base, "._") ||
		strings.Contains(name, "Auto-Save/") || strings.HasPrefix(base, ".")
}

// Entries lists the archive's usable files (not directories, not ignored ones).
func (a *Archive) Entries() []*zip.File {
	var out []*zip.File
	for _, f := range a.files {
		if !f.FileInfo().IsDir() && !ignored(f.Name) {
			out = append(out, f)
		}
	}
	return out
}

// Read reads an entry, enforcing its size whatever its header says.
func (a *Archive) Read(f *zip.File, limit int64) ([]byte, error) {
	if int64(f.UncompressedSize64) > limit {
		return nil, fmt.Errorf("%q is %d bytes, more than the %d allowed", f.Name, f.UncompressedSize64, limit)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%q cannot be read: %w", f.Name, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%q cannot be read: %w", f.Name, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%q expands past the %d bytes allowed", f.Name, limit)
	}
	return data, nil
}

// shallowestLargest orders candidates: fewest folders first, then largest.
func shallowestLargest(files []*zip.File) {
	sort.SliceStable(files, func(i, k int) bool {
		di, dk := strings.Count(files[i].Name, "/"), strings.Count(files[k].Name, "/")
		if di != dk {
			return di < dk
		}
		return files[i].UncompressedSize64 > files[k].UncompressedSize64
	})
}

// ProjectKind says what a zip template holds.
type ProjectKind string

// Project kinds of a zip template.
const (
	ProjectAfterEffects ProjectKind = "aep"
	ProjectLottie       ProjectKind = "lottie"
)

// Project finds the project of a zip template: an After Effects project (.aep or .aepx) if there is
// one, otherwise a Lottie JSON export; the shallowest, then the largest, wins.
func (a *Archive) Project() (*zip.File, ProjectKind, []byte, error) {
	var aeps, jsons []*zip.File
	for _, f := range a.Entries() {
		switch strings.ToLower(path.Ext(f.Name)) {
		case ".aep", ".aepx":
			aeps = append(aeps, f)
		case ".json":
			jsons = append(jsons, f)
		}
	}
	shallowestLargest(aeps)
	shallowestLargest(jsons)
	if len(aeps) > 0 {
		data, err := a.Read(aeps[0], a.limits.MaxProjectBytes)
		return aeps[0], ProjectAfterEffects, data, err
	}
	for _, f := range jsons {
		data, err := a.Read(f, a.limits.MaxProjectBytes)
		if err != nil {
			return nil, "", nil, err
		}
		if _, err := ParseLottie(data); err == nil {
			return f, ProjectLottie, data, nil
		}
	}
	return nil, "", nil, errors.New("the zip archive holds neither an After Effects project (.aep, .aepx) nor a Lottie (Bodymovin) JSON export")
}

// ExtractTo writes the archive's usable files under dir, which must exist.
func (a *Archive) ExtractTo(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var written int64
	for _, f := range a.Entries() {
		name := path.Clean(strings.ReplaceAll(f.Name, "\\", "/"))
		if err := root.MkdirAll(path.Dir(name), 0o700); err != nil {
			return fmt.Errorf("%q cannot be extracted: %w", f.Name, err)
		}
		out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("%q cannot be extracted: %w", f.Name, err)
		}
		n, err := a.copyEntry(out, f, a.limits.MaxTotalBytes-written)
		out.Close()
		if err != nil {
			return err
		}
		written += n
	}
	return nil
}

func (a *Archive) copyEntry(w io.Writer, f *zip.File, budget int64) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, fmt.Errorf("%q cannot be read: %w", f.Name, err)
	}
	defer rc.Close()
	n, err := io.Copy(w, io.LimitReader(rc, budget+1))
	if err != nil {
		return n, fmt.Errorf("%q cannot be extracted: %w", f.Name, err)
	}
	if n > budget {
		return n, fmt.Errorf("the zip archive expands past the %d bytes allowed", a.limits.MaxTotalBytes)
	}
	return n, nil
}
