package inspect

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/fontfile"
)

// Inspector reads template files: After Effects projects (.aep, .aepx), zip archives holding one
// or a Lottie export, and motion graphics templates. It is pure Go and bounds what it reads.
type Inspector struct {
	Limits Limits
}

var _ renderer.Inspector = Inspector{}

// Inspect reads the template file at p, declared as templateType.
func (in Inspector) Inspect(ctx context.Context, templateType, p string) (inspection *renderer.Inspection, err error) {
	// Files come from strangers and the parsers are fuzzed, not proven: a fault one of them still
	// hides fails that template, never the process inspecting it.
	defer func() {
		if r := recover(); r != nil {
			inspection, err = nil, fmt.Errorf("the file could not be read: the inspector failed on it (%v)", r)
		}
	}()
	inspection, err = in.inspect(ctx, p)
	if err != nil {
		return nil, err
	}
	inspection.Version = renderer.InspectionVersion
	return inspection, nil
}

func (in Inspector) inspect(ctx context.Context, p string) (*renderer.Inspection, error) {
	limits := in.Limits.withDefaults()
	format, err := Sniff(p)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch format {
	case FormatAEPX:
		f, err := openCapped(p, limits.MaxProjectBytes)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return inspectAEPX(f)
	case FormatAEP:
		data, err := readCapped(p, limits.MaxProjectBytes)
		if err != nil {
			return nil, err
		}
		return inspectAEPBytes(data)
	case FormatMogrt:
		a, err := OpenArchive(p, limits)
		if err != nil {
			return nil, err
		}
		defer a.Close()
		return inspectMogrt(a)
	case FormatJSON:
		data, err := readCapped(p, limits.MaxProjectBytes)
		if err != nil {
			return nil, err
		}
		return inspectLottie(data)
	default:
		a, err := OpenArchive(p, limits)
		if err != nil {
			return nil, err
		}
		defer a.Close()
		_, kind, data, err := a.Project()
		if err != nil {
			return nil, err
		}
		inspect := inspectAEPBytes
		if kind == ProjectLottie {
			inspect = inspectLottie
		}
		in, err := inspect(data)
		if err != nil {
			return nil, err
		}
		in.BundledFonts = bundledFonts(a)
		return in, nil
	}
}

// maxBundledFontBytes bounds a bundled font file read for its names; a larger one is known by
// its file name alone.
const maxBundledFontBytes = 16 << 20

// bundledFonts lists the names the archive's font files give: each file's name without its
// extension, and the family and PostScript names a TrueType file holds.
func bundledFonts(a *Archive) []string {
	var names []string
	add := func(name string) {
		if name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, f := range a.Entries() {
		ext := strings.ToLower(path.Ext(f.Name))
		if ext != ".ttf" && ext != ".otf" {
			continue
		}
		add(strings.TrimSuffix(path.Base(f.Name), path.Ext(f.Name)))
		if data, err := a.Read(f, maxBundledFontBytes); err == nil {
			if font, err := fontfile.Read(data); err == nil {
				add(font.Family)
				add(font.PostScript)
			}
		}
	}
	return names
}

// openCapped opens a project file no larger than limit.
func openCapped(p string, limit int64) (*os.File, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil && info.Size() > limit {
		err = fmt.Errorf("the project file is %d bytes, more than the %d allowed", info.Size(), limit)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func readCapped(p string, limit int64) ([]byte, error) {
	f, err := openCapped(p, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
