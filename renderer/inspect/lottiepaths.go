package inspect

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// urlScheme matches the start of a URL, and of a Windows drive path ("C:").
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// LottieFilePath checks where a Lottie image asset or font points, its folder u joined with its
// file p: a data URI, or a path inside the template's folder. Absolute paths, paths that climb
// with "..", and URLs are refused: they would make a render node read its own files (or fetch
// others') into a team's output.
func LottieFilePath(u, p string) error {
	if strings.HasPrefix(p, "data:") {
		return nil
	}
	full := strings.ReplaceAll(u+p, `\`, "/")
	switch {
	case urlScheme.MatchString(full):
		return fmt.Errorf("%q is a URL or a drive path; files must be in the template (its zip) or embedded as data URIs", u+p)
	case strings.HasPrefix(full, "/"):
		return fmt.Errorf("%q is an absolute path; files must be in the template's folder", u+p)
	}
	for _, part := range strings.Split(full, "/") {
		if part == ".." {
			return fmt.Errorf("%q climbs out of the template's folder", u+p)
		}
	}
	return nil
}

// LottieFontPath checks a font's fPath: like an image's, except that web font URLs (http and
// https), which exports carry for players, are allowed; the engine never fetches them.
func LottieFontPath(fPath string) error {
	if fPath == "" || strings.HasPrefix(fPath, "https://") || strings.HasPrefix(fPath, "http://") {
		return nil
	}
	return LottieFilePath("", fPath)
}

// checkLottiePaths refuses an export whose images or fonts point outside its folder, naming the
// field at fault.
func checkLottiePaths(doc *LottieDoc) error {
	var errs []error
	for i, a := range doc.Assets {
		if a.Layers == nil && a.P != "" {
			if err := LottieFilePath(a.U, a.P); err != nil {
				errs = append(errs, fmt.Errorf("assets[%d] (id %q) u and p: %w", i, a.ID, err))
			}
		}
	}
	for i, f := range doc.Fonts.List {
		if err := LottieFontPath(f.FPath); err != nil {
			errs = append(errs, fmt.Errorf("fonts.list[%d].fPath: %w", i, err))
		}
	}
	return errors.Join(errs...)
}
