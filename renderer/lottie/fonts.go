package lottie

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/fontfile"
	"github.com/framefarm/framefarm/renderer/workfiles"
)

// maxFontBytes caps a font file embedded into an animation.
const maxFontBytes = 40 << 20

// fontSet is the font files a render may use: those the template zip bundles and those of the
// team library the job names, keyed by renderer.FontKey of a family, PostScript or file name.
type fontSet map[string]string

func (f fontSet) add(path, fileName string) {
	data, err := os.ReadFile(path)
	if err != nil || len(data) > maxFontBytes {
		return
	}
	if names, err := fontfile.Read(data); err == nil {
		for _, name := range []string{names.Family, names.PostScript} {
			if name != "" {
				f[renderer.FontKey(name)] = path
			}
		}
	}
	f[renderer.FontKey(strings.TrimSuffix(fileName, filepath.Ext(fileName)))] = path
}

// collectFonts finds the template's bundled fonts (under dir) and the job's team fonts; team fonts
// win, the job named them.
func collectFonts(dir string, team []renderer.FontFile) fontSet {
	f := fontSet{}
	for _, p := range workfiles.Find(dir, ".ttf", ".otf") {
		f.add(p, filepath.Base(p))
	}
	for _, tf := range team {
		f.add(tf.Path, tf.FileName)
	}
	return f
}

// lookup finds the file of a fonts.list entry, by family, then by name.
func (f fontSet) lookup(entry map[string]any) string {
	for _, key := range []string{"fFamily", "fName"} {
		if v, _ := entry[key].(string); v != "" {
			if p, ok := f[renderer.FontKey(v)]; ok {
				return p
			}
		}
	}
	return ""
}

// supplied reports whether the font named fName in the animation has a file.
func (f fontSet) supplied(root map[string]any, fName string) bool {
	for _, e := range fontEntries(root) {
		if e["fName"] == fName {
			return f.lookup(e) != ""
		}
	}
	return false
}

func fontEntries(root map[string]any) []map[string]any {
	fonts, _ := root["fonts"].(map[string]any)
	list, _ := fonts["list"].([]any)
	var out []map[string]any
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func fontFamily(root map[string]any, fName string) string {
	for _, e := range fontEntries(root) {
		if e["fName"] == fName {
			family, _ := e["fFamily"].(string)
			return family
		}
	}
	return ""
}

// embedFonts inlines every font the animation uses that has a file, as a data: URI in
// fonts.list[].fPath: the way Skottie takes fonts. It returns the families it could not supply.
func embedFonts(root map[string]any, f fontSet) []string {
	var missing []string
	for _, e := range fontEntries(root) {
		p := f.lookup(e)
		if p == "" {
			family, _ := e["fFamily"].(string)
			missing = append(missing, family)
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		mime := "font/ttf"
		if strings.EqualFold(filepath.Ext(p), ".otf") {
			mime = "font/otf"
		}
		e["fPath"] = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)
	}
	return missing
}
