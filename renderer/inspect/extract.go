package inspect

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"

	"github.com/framefarm/framefarm/renderer/workfiles"
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
		return dst, ProjectAfterEffects, workfiles.Copy(file, dst, limits.MaxProjectBytes)
	case FormatJSON:
		dst := filepath.Join(dir, "data.json")
		return dst, ProjectLottie, workfiles.Copy(file, dst, limits.MaxProjectBytes)
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
