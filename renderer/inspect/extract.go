package inspect

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
)

// ExtractProject unpacks a template file into dir, an existing empty folder, for a render, and
// returns the project file inside it: an .aep or .aepx copied as is, the project of a zip with
// its footage and fonts around it, or the After Effects project inside a mogrt's
// project.aegraphic. What the file holds decides, not what it was declared as.
func ExtractProject(file, dir string, limits Limits) (string, ProjectKind, error) {
	limits = limits.withDefaults()
	format, err := Sniff(file)
	if err != nil {
		return "", "", err
	}
	switch format {
	case FormatAEP, FormatAEPX:
		dst := filepath.Join(dir, "template."+string(format))
		return dst, ProjectAfterEffects, copyCapped(file, dst, limits.MaxProjectBytes)
	case FormatMogrt:
		a, err := OpenArchive(file, limits)
		if err != nil {
			return "", "", err
		}
		defer a.Close()
		for _, f := range a.Entries() {
			if path.Base(f.Name) != "project.aegraphic" {
				continue
			}
			graphic, err := a.Read(f, limits.MaxTotalBytes)
			if err != nil {
				return "", "", err
			}
			inner, err := archiveFromBytes(graphic, limits)
			if err != nil {
				return "", "", fmt.Errorf("project.aegraphic: %w", err)
			}
			return extractArchive(inner, dir)
		}
		return "", "", errors.New("the mogrt holds no project.aegraphic, so no After Effects project")
	default:
		a, err := OpenArchive(file, limits)
		if err != nil {
			return "", "", err
		}
		defer a.Close()
		return extractArchive(a, dir)
	}
}

func extractArchive(a *Archive, dir string) (string, ProjectKind, error) {
	entry, kind, _, err := a.Project()
	if err != nil {
		return "", "", err
	}
	if err := a.ExtractTo(dir); err != nil {
		return "", "", err
	}
	return filepath.Join(dir, filepath.FromSlash(path.Clean(entry.Name))), kind, nil
}

func copyCapped(src, dst string, limit int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(in, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > limit {
		err = fmt.Errorf("the project is larger than the %d bytes allowed", limit)
	}
	return err
}
