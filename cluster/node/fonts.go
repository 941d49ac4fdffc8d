package node

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/renderer/fontfile"
)

// systemFontDirs are where the machine keeps the fonts its programs (After Effects, the Lottie
// engine's text) find by name.
func systemFontDirs() []string {
	home, _ := os.UserHomeDir()
	switch runtime.GOOS {
	case "windows":
		return []string{filepath.Join(os.Getenv("WINDIR"), "Fonts"), filepath.Join(os.Getenv("LOCALAPPDATA"), "Microsoft", "Windows", "Fonts")}
	case "darwin":
		return []string{"/System/Library/Fonts", "/Library/Fonts", filepath.Join(home, "Library", "Fonts")}
	}
	return []string{"/usr/share/fonts", "/usr/local/share/fonts", filepath.Join(home, ".fonts"), filepath.Join(home, ".local", "share", "fonts")}
}

// installedFonts names the fonts installed in dirs, by the family and PostScript names their
// files give, sorted, at most protocol.MaxHelloFonts: what the node tells the coordinator, so
// that a job whose template uses one is not told it is missing.
func installedFonts(dirs []string) []string {
	var names []string
	for _, dir := range dirs {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || len(names) >= 2*protocol.MaxHelloFonts {
				return nil
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".ttf", ".otf", ".ttc":
			default:
				return nil
			}
			f, err := os.Open(p)
			if err != nil {
				return nil
			}
			defer f.Close()
			info, err := f.Stat()
			if err != nil {
				return nil
			}
			if n, err := fontfile.NamesAt(f, info.Size()); err == nil {
				for _, name := range []string{n.Family, n.PostScript} {
					if name != "" && len(name) <= protocol.MaxFontName {
						names = append(names, name)
					}
				}
			}
			return nil
		})
	}
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	return names[:min(len(names), protocol.MaxHelloFonts)]
}
