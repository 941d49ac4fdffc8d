package inspect

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framefarm/framefarm/renderer"
)

const fixtures = "../testdata/fixtures"

// layer is a compact expectation: "name:type" or "name:type:text".
func layers(c renderer.Composition) []string {
	out := []string{}
	for _, l := range c.Layers {
		s := l.Name + ":" + l.Type
		if l.Text != "" {
			s += ":" + l.Text
		}
		out = append(out, s)
	}
	return out
}

type wantComp struct {
	name     string
	w, h     int
	fps      float64
	duration float64
	layers   []string
}

func checkComps(t *testing.T, in *renderer.Inspection, want []wantComp) {
	t.Helper()
	if len(in.Compositions) != len(want) {
		t.Fatalf("%d compositions, want %d: %+v", len(in.Compositions), len(want), in.Compositions)
	}
	for i, w := range want {
		c := in.Compositions[i]
		got := layers(c)
		if c.Name != w.name || c.Width != w.w || c.Height != w.h || c.FPS != w.fps || c.Duration != w.duration || strings.Join(got, "|") != strings.Join(w.layers, "|") {
			t.Errorf("composition %d: %q %dx%d @%v %vs %v\nwant %q %dx%d @%v %vs %v", i, c.Name, c.Width, c.Height, c.FPS, c.Duration, got,
				w.name, w.w, w.h, w.fps, w.duration, w.layers)
		}
	}
}

func inspectFile(t *testing.T, templateType, p string) (*renderer.Inspection, error) {
	t.Helper()
	return Inspector{}.Inspect(context.Background(), templateType, p)
}

// TestAfterEffectsFixtures checks each project against its description in LICENSES.txt.
func TestAfterEffectsFixtures(t *testing.T) {
	cases := map[string][]wantComp{
		"boltframe_BPC-8.aep":   {},
		"boltframe_ExEn-js.aep": {},
		"boltframe_Item-01.aep": {
			{"Comp 01", 351, 856, 21, 31, []string{"Null 1:null", "Shape Layer 1:shape"}},
			{"Comp 02", 452, 639, 29.97, 71.338, []string{}},
		},
		"nexrender_1layer.aep":  {{"testcomp1", 1920, 1080, 60, 30, []string{"<empty text layer>:text"}}},
		"nexrender_1layer.aepx": {{"testcomp1", 1920, 1080, 60, 30, []string{"<empty text layer>:text"}}},
		"nexrender_test.aepx":   {},
		"nexrender_empty.aepx":  {},
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			in, err := inspectFile(t, renderer.TemplateAEP, filepath.Join(fixtures, "templates", name))
			if err != nil {
				t.Fatal(err)
			}
			checkComps(t, in, want)
			if strings.Join(in.Engines, ",") != "ae2026,ae2025" {
				t.Errorf("engines %v", in.Engines)
			}
		})
	}
}

func TestAEPXEqualsItsBinaryTwin(t *testing.T) {
	bin, err := inspectFile(t, renderer.TemplateAEP, filepath.Join(fixtures, "templates", "nexrender_1layer.aep"))
	if err != nil {
		t.Fatal(err)
	}
	xml, err := inspectFile(t, renderer.TemplateAEP, filepath.Join(fixtures, "templates", "nexrender_1layer.aepx"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(bin)
	b, _ := json.Marshal(xml)
	if !bytes.Equal(a, b) {
		t.Fatalf("aep %s\naepx %s", a, b)
	}
}

func TestMogrtFixtures(t *testing.T) {
	in, err := inspectFile(t, renderer.TemplateMogrt, filepath.Join(fixtures, "templates", "vonstring_ae.mogrt"))
	if err != nil {
		t.Fatal(err)
	}
	checkComps(t, in, []wantComp{{"Comp 1", 1080, 1080, 25, 20, []string{"Null 1:null", "foo!:text:foo!"}}})
	m := in.Mogrt
	if m == nil || m.Name != "Testo" || m.AuthorApp != "aefx" || m.Composition != "Comp 1" || m.Width != 1080 || m.Height != 1080 || m.FPS != 25 || m.Duration != 20 {
		t.Fatalf("mogrt %+v", m)
	}
	var types, names []string
	for _, c := range m.Controls {
		types, names = append(types, c.Type), append(names, c.Name)
	}
	if strings.Join(types, ",") != "text,dropdown,checkbox,point,angle,color,slider,scale,slider" {
		t.Errorf("control types %v", types)
	}
	if names[0] != "Text" || string(m.Controls[0].Default) != `"foo!"` || len(m.Controls[1].Options) != 2 || string(m.Controls[1].Options[0]) != `"lada"` {
		t.Errorf("controls %+v", m.Controls[:2])
	}
	if m.Controls[6].Min == nil || *m.Controls[6].Max != 100 || strings.Join(m.Fonts, ",") != "TV2SansDisplay-Bold" || strings.Join(in.Fonts, ",") != "TV2SansDisplay-Bold" {
		t.Errorf("slider %+v, fonts %v / %v", m.Controls[6], m.Fonts, in.Fonts)
	}

	_, err = inspectFile(t, renderer.TemplateMogrt, filepath.Join(fixtures, "templates", "vonstring_premiere.mogrt"))
	if err == nil || !strings.Contains(err.Error(), "Premiere Pro") || !strings.Contains(err.Error(), "cannot render") {
		t.Fatalf("Premiere mogrt: %v", err)
	}
}

// zipOf builds a zip from files (name -> content).
func zipOf(t testing.TB, files map[string][]byte) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, data := range files {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(data)
	}
	zw.Close()
	p := filepath.Join(t.TempDir(), "t.zip")
	os.WriteFile(p, buf.Bytes(), 0o600)
	return p
}

// dirFiles reads a fixture folder into zip entries under prefix.
func dirFiles(t testing.TB, dir, prefix string) map[string][]byte {
	files := map[string][]byte{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files[prefix+filepath.ToSlash(rel)], _ = os.ReadFile(p)
		}
		return nil
	})
	return files
}

func TestLottieFixtures(t *testing.T) {
	footage := dirFiles(t, filepath.Join(fixtures, "lottie", "footage"), "")
	footage["__MACOSX/._data.json"] = []byte("resource fork")
	in, err := inspectFile(t, renderer.TemplateZip, zipOf(t, footage))
	if err != nil {
		t.Fatal(err)
	}
	checkComps(t, in, []wantComp{{"720x1280", 720, 1280, 30, 12, []string{
		"<empty text layer>:text", "openweathermap-api.json:footage", "Tempreture:text:Tempreture", "Status:text:Status",
		"City:text:City", "Deep Red Solid 2:solid", "profile.jpg:image", "test.jpg:image"}}})
	if strings.Join(in.Fonts, ",") != "Arial,Futura PT" || strings.Join(in.Engines, ",") != "lottie" {
		t.Errorf("fonts %v engines %v", in.Fonts, in.Engines)
	}

	centered, _ := os.ReadFile(filepath.Join(fixtures, "lottie", "CenteredText.json"))
	in, err = inspectFile(t, renderer.TemplateZip, zipOf(t, map[string][]byte{"CenteredText.json": centered}))
	if err != nil {
		t.Fatal(err)
	}
	checkComps(t, in, []wantComp{{"Text", 375, 375, 29.97, 6.039, []string{"Text:text:Hello World"}}})
	// The same export as Bodymovin writes it, one JSON file (a byte-order mark before it, as a
	// Windows editor may write): a template of type json, extracted as the Lottie engine reads it.
	plain := filepath.Join(t.TempDir(), "CenteredText.json")
	os.WriteFile(plain, append([]byte("\xef\xbb\xbf\n"), centered...), 0o600)
	if format, err := Sniff(plain); err != nil || format != FormatJSON || !MatchesType(renderer.TemplateJSON, format) || MatchesType(renderer.TemplateZip, format) {
		t.Fatalf("a Bodymovin export sniffs as %q (%v)", format, err)
	}
	if in, err = inspectFile(t, renderer.TemplateJSON, plain); err != nil {
		t.Fatal(err)
	}
	checkComps(t, in, []wantComp{{"Text", 375, 375, 29.97, 6.039, []string{"Text:text:Hello World"}}})
	if anim, kind, err := ExtractProject(plain, t.TempDir(), Limits{}); err != nil || kind != ProjectLottie || filepath.Base(anim) != "data.json" {
		t.Fatalf("extracted %s as %s: %v", anim, kind, err)
	}

	in, err = inspectFile(t, renderer.TemplateZip, filepath.Join(fixtures, "lottie", "EmbeddedFont.zip"))
	if err != nil {
		t.Fatal(err)
	}
	checkComps(t, in, []wantComp{{"Name", 150, 150, 29.97, 2.035, []string{"NAME:text:NAME"}}})
	if strings.Join(in.Fonts, ",") != "Comic Neue" {
		t.Errorf("fonts %v", in.Fonts)
	}
	// The font it uses is the one it brings: its file's name, family and PostScript name.
	if strings.Join(in.BundledFonts, ",") != "Comic Neue,ComicNeue" {
		t.Errorf("bundled fonts %v", in.BundledFonts)
	}

	in, err = inspectFile(t, renderer.TemplateZip, zipOf(t, dirFiles(t, filepath.Join(fixtures, "lottie", "synthetic"), "kenburns/")))
	if err != nil {
		t.Fatal(err)
	}
	checkComps(t, in, []wantComp{{"kenburns", 1920, 1080, 30, 10, []string{"Title:text:Placeholder Title", "Bar:solid", "Photo:image"}}})
}

func TestZipProjectChoice(t *testing.T) {
	aep, _ := os.ReadFile(filepath.Join(fixtures, "templates", "nexrender_1layer.aep"))
	empty, _ := os.ReadFile(filepath.Join(fixtures, "templates", "boltframe_BPC-8.aep"))
	lottie, _ := os.ReadFile(filepath.Join(fixtures, "lottie", "CenteredText.json"))
	// The shallowest project wins over deeper ones, auto-saves and resource forks are ignored,
	// and an After Effects project wins over a Lottie export.
	in, err := inspectFile(t, renderer.TemplateZip, zipOf(t, map[string][]byte{
		"deep/nested/project.aep":                 empty,
		"job/project.aep":                         aep,
		"job/Adobe After Effects Auto-Save/a.aep": empty,
		"__MACOSX/job/._project.aep":              []byte("fork"),
		"job/anim.json":                           lottie,
	}))
	if err != nil {
		t.Fatal(err)
	}
	checkComps(t, in, []wantComp{{"testcomp1", 1920, 1080, 60, 30, []string{"<empty text layer>:text"}}})
}

func TestHostileArchivesAreRefused(t *testing.T) {
	lottie, _ := os.ReadFile(filepath.Join(fixtures, "lottie", "CenteredText.json"))
	for name, files := range map[string]map[string][]byte{
		"zip slip":      {"../../etc/cron.d/x.json": lottie},
		"absolute path": {"/etc/passwd.json": lottie},
		"windows slip":  {"..\\..\\x.json": lottie},
		"no project":    {"readme.txt": []byte("hello")},
		"bad lottie":    {"data.json": []byte(`{"v":"5","fr":0,"w":10,"h":10,"layers":[],"ip":0,"op":1}`)},
	} {
		if _, err := inspectFile(t, renderer.TemplateZip, zipOf(t, files)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A zip bomb: a large entry that compresses extremely well.
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("bomb.json")
	w.Write(bytes.Repeat([]byte{' '}, 64<<20))
	zw.Close()
	p := filepath.Join(t.TempDir(), "bomb.zip")
	os.WriteFile(p, buf.Bytes(), 0o600)
	if _, err := inspectFile(t, renderer.TemplateZip, p); err == nil || !strings.Contains(err.Error(), "zip bomb") {
		t.Errorf("zip bomb: %v", err)
	}
	// Too many entries.
	many := map[string][]byte{}
	for i := range 50 {
		many[strings.Repeat("d/", i%5)+string(rune('a'+i%26))+strings.Repeat("x", i)+".txt"] = nil
	}
	if _, err := (Inspector{Limits: Limits{MaxEntries: 10}}).Inspect(context.Background(), renderer.TemplateZip, zipOf(t, many)); err == nil {
		t.Error("too many entries: accepted")
	}
	// A symbolic link entry.
	buf.Reset()
	zw = zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: "link.json"}
	h.SetMode(fs.ModeSymlink | 0o777)
	w, _ = zw.CreateHeader(h)
	w.Write([]byte("/etc/passwd"))
	zw.Close()
	os.WriteFile(p, buf.Bytes(), 0o600)
	if _, err := inspectFile(t, renderer.TemplateZip, p); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlink: %v", err)
	}
}

func TestDamagedProjectsGiveAPreciseError(t *testing.T) {
	aep, _ := os.ReadFile(filepath.Join(fixtures, "templates", "boltframe_Item-01.aep"))
	for name, data := range map[string][]byte{
		"truncated":         aep[:len(aep)/2],
		"no folder":         aep[:200],
		"corrupt list size": append(append([]byte{}, aep[:400]...), bytes.Repeat([]byte{0xff}, 64)...),
	} {
		_, err := inspectAEPBytes(data)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !strings.Contains(err.Error(), "project") {
			t.Errorf("%s: error %q does not say what is wrong", name, err)
		}
	}
}

func TestExtractStaysInsideItsFolder(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenArchive(zipOf(t, map[string][]byte{"a/b/c.txt": []byte("ok"), "__MACOSX/._c.txt": []byte("fork")}), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.ExtractTo(dir); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "a", "b", "c.txt")); err != nil || string(data) != "ok" {
		t.Fatalf("%q %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "__MACOSX")); err == nil {
		t.Fatal("an ignored entry was extracted")
	}
}

func FuzzParseRIFX(f *testing.F) {
	for _, name := range []string{"boltframe_Item-01.aep", "nexrender_1layer.aep", "boltframe_BPC-8.aep"} {
		data, _ := os.ReadFile(filepath.Join(fixtures, "templates", name))
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if root, err := parseRIFX(data); err == nil {
			inspectProject(root)
		}
	})
}

func FuzzParseAEPX(f *testing.F) {
	for _, name := range []string{"nexrender_1layer.aepx", "nexrender_test.aepx"} {
		data, _ := os.ReadFile(filepath.Join(fixtures, "templates", name))
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if root, err := parseAEPX(bytes.NewReader(data)); err == nil {
			inspectProject(root)
		}
	})
}

func FuzzTextDocument(f *testing.F) {
	f.Add([]byte(`/0 << /1 << /0 [ << /0 << /0 << /0 (\xfe\xff\x00A) >> >> >> ] >> >> /1 << /1 [ << /0 << /0 (\xfe\xff\x00h\x00i\x00\r) /6 << /0 [ << /0 << /0 << /6 << /0 0 >> >> >> >> ] >> >> >> ] >>`))
	f.Add([]byte(`/98 << /0 9 >> /1 [ ( ) ]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		textDocument(data)
	})
}

func FuzzLottie(f *testing.F) {
	for _, name := range []string{"lottie/CenteredText.json", "lottie/footage/data.json", "lottie/synthetic/kenburns.json", "../nested/nested.json"} {
		data, _ := os.ReadFile(filepath.Join(fixtures, name))
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := inspectLottie(data)
		if err == nil && (len(in.Compositions) == 0 || in.Compositions[0].Width < 1) {
			t.Fatalf("accepted a Lottie with %+v", in.Compositions)
		}
	})
}

func FuzzZipTemplate(f *testing.F) {
	for _, name := range []string{"lottie/EmbeddedFont.zip", "templates/vonstring_ae.mogrt", "templates/vonstring_premiere.mogrt"} {
		data, _ := os.ReadFile(filepath.Join(fixtures, name))
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := archiveFromBytes(data, Limits{MaxProjectBytes: 1 << 20, MaxTotalBytes: 8 << 20})
		if err != nil {
			return
		}
		if _, kind, project, err := a.Project(); err == nil {
			if kind == ProjectLottie {
				inspectLottie(project)
			} else {
				inspectAEPBytes(project)
			}
		}
		inspectMogrt(a)
	})
}

func TestExtractProject(t *testing.T) {
	cases := []struct {
		file, project string
		kind          ProjectKind
	}{
		{"templates/nexrender_1layer.aep", "template.aep", ProjectAfterEffects},
		{"templates/nexrender_test.aepx", "template.aepx", ProjectAfterEffects},
		{"templates/vonstring_ae.mogrt", "", ProjectAfterEffects},
		{"lottie/EmbeddedFont.zip", "name.json", ProjectLottie},
	}
	for _, c := range cases {
		dir := t.TempDir()
		p, kind, err := ExtractProject(filepath.Join(fixtures, c.file), dir, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if kind != c.kind || (c.project != "" && filepath.Base(p) != c.project) {
			t.Fatalf("%s: project %s, kind %s", c.file, p, kind)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if rel, err := filepath.Rel(dir, p); err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("%s: project %s outside %s", c.file, p, dir)
		}
	}
	if _, _, err := ExtractProject(filepath.Join(fixtures, "templates/vonstring_premiere.mogrt"), t.TempDir(), Limits{}); err == nil {
		t.Fatal("a Premiere mogrt gave an After Effects project")
	}
}
