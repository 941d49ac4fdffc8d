package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/lottie"
)

// memoryCatalog is a team's library held in memory; the HTTP layer's catalog reads the store.
type memoryCatalog struct {
	templates map[string]*persistence.Template
	fonts     []string
	// library holds fonts with their names, beside those of fonts known by file name only.
	library []*persistence.Font
	secrets []string
	policy  persistence.TeamPolicy
	limits  []string
	// installed are the fonts every ready node of an engine has installed, by engine.
	installed map[string][]string
}

func (m memoryCatalog) Template(id string) (*persistence.Template, error) {
	if t, ok := m.templates[id]; ok {
		return t, nil
	}
	return nil, persistence.ErrNotFound
}
func (m memoryCatalog) FontExists(n string) bool {
	return slices.Contains(m.fonts, n) || slices.ContainsFunc(m.library, func(f *persistence.Font) bool { return f.FileName == n })
}
func (m memoryCatalog) Fonts() []*persistence.Font {
	all := slices.Clone(m.library)
	for _, n := range m.fonts {
		all = append(all, &persistence.Font{FileName: n})
	}
	return all
}
func (m memoryCatalog) SecretExists(n string) bool     { return slices.Contains(m.secrets, n) }
func (m memoryCatalog) Policy() persistence.TeamPolicy { return m.policy }
func (m memoryCatalog) LimitExists(n string) bool      { return slices.Contains(m.limits, n) }
func (m memoryCatalog) InstalledFont(engine, n string) bool {
	return slices.ContainsFunc(m.installed[engine], func(f string) bool { return renderer.FontKey(f) == renderer.FontKey(n) })
}

const (
	lottieID = "01JA0000000000000000000001"
	aeID     = "01JA0000000000000000000002"
	mogrtID  = "01JA0000000000000000000003"
	brokenID = "01JA0000000000000000000004"
	nestedID = "01JA0000000000000000000005"
)

// nestedComps: the text layer Title sits two compositions deep, Main -> Scene -> Card; Other
// is not nested in Main.
func nestedComps() []renderer.Composition {
	id := func(n int) *int { return &n }
	return []renderer.Composition{
		{ID: 1, Name: "Main", Layers: []renderer.Layer{{Name: "Scene", Type: "precomp", SourceCompID: id(2)}}},
		{ID: 2, Name: "Scene", Layers: []renderer.Layer{{Name: "Card", Type: "precomp", SourceCompID: id(3)}}},
		{ID: 3, Name: "Card", Layers: []renderer.Layer{{Name: "Title", Type: "text"}}},
		{ID: 4, Name: "Other", Layers: []renderer.Layer{{Name: "Title", Type: "text"}, {Name: "Logo", Type: "image"}}},
	}
}

func testCatalog() memoryCatalog {
	comps := []renderer.Composition{
		{Name: "main", FPS: 30, Duration: 10, Layers: []renderer.Layer{{Name: "Title", Type: "text"}, {Name: "Photo", Type: "image"}}},
		{Name: "end", Layers: []renderer.Layer{{Name: "Credits", Type: "text"}}},
	}
	tpl := func(id string, engines []string, mogrt *renderer.Mogrt) *persistence.Template {
		return &persistence.Template{ID: ulid.MustParse(id), Status: persistence.TemplateUploaded,
			Inspection: &renderer.Inspection{Compositions: comps, Engines: engines, Mogrt: mogrt}}
	}
	return memoryCatalog{
		templates: map[string]*persistence.Template{
			lottieID: tpl(lottieID, []string{"lottie"}, nil),
			aeID:     tpl(aeID, []string{"ae2026"}, nil),
			mogrtID: tpl(mogrtID, []string{"ae2026"}, &renderer.Mogrt{Composition: "end", Controls: []renderer.MogrtControl{
				{ID: "c1", Name: "Headline", Type: "text"}}}),
			brokenID: {ID: ulid.MustParse(brokenID), Status: persistence.TemplateError, Error: "bad file"},
			nestedID: {ID: ulid.MustParse(nestedID), Status: persistence.TemplateUploaded,
				Inspection: &renderer.Inspection{Compositions: nestedComps(), Engines: []string{"lottie"}}},
		},
		fonts:   []string{"Brand.ttf"},
		secrets: []string{"KEY"},
	}
}

// engines are the rules the composition root gives request checking: the Lottie engine's.
var engines = map[string]renderer.AssetRules{renderer.EngineLottie: lottie.AssetRules{}}

func parse(t *testing.T, body string) (*Job, *Error) {
	t.Helper()
	return ParseJob([]byte(body), testCatalog(), Limits{Engines: engines})
}

func TestAcceptsTheContractsForms(t *testing.T) {
	job, err := parse(t, `{
		"template": {"id": "`+aeID+`", "composition": "main"},
		"assets": [
			{"type": "text", "layerName": "Title", "value": "Hi ${secret.KEY}"},
			{"type": "data", "layerName": "Title", "property": "Opacity", "expression": "time*10"},
			{"type": "image", "layerName": "Credits", "composition": "end", "src": "https://cdn.example.com/a.png"},
			{"type": "script", "src": "https://cdn.example.com/a.jsx", "params": {"k": 1}},
			{"type": "function", "name": "nx:text-params-set", "params": {"layerName": ["Title", "Photo"], "fontSize": 3}},
			{"type": "static", "src": "https://cdn.example.com/data.csv"}
		],
		"fonts": ["Brand.ttf", "Other.ttf", "Brand.ttf"],
		"settings": {"type": "video", "frames": [0, 90], "codec": "prores_4444", "engine": "ae2025"},
		"tags": "a,b,a", "priority": -3
	}`)
	if err != nil {
		t.Fatal(err)
	}
	if job.Engine != "ae2025" || job.Spec.Settings.Codec != "video_prores_4444" || !job.Spec.Settings.Frames.Range {
		t.Fatalf("settings %+v engine %s", job.Spec.Settings, job.Engine)
	}
	if got := strings.Join(job.Tags, ","); got != "a,b" || job.Priority != -3 {
		t.Fatalf("tags %q priority %d", got, job.Priority)
	}
	if strings.Join(job.Spec.Fonts, ",") != "Brand.ttf,Other.ttf" || strings.Join(job.MissingFonts, ",") != "Other.ttf" {
		t.Fatalf("fonts %v missing %v", job.Spec.Fonts, job.MissingFonts)
	}
	if len(job.Spec.Assets) != 7 || job.Spec.Assets[4].Name != "nx:text-params-set" || job.Spec.Assets[5].Name != "nx:text-params-set" {
		t.Fatalf("assets %+v", job.Spec.Assets)
	}
	var p map[string]any
	json.Unmarshal(job.Spec.Assets[5].Params, &p)
	if p["layerName"] != "Photo" || p["fontSize"] != 3.0 {
		t.Fatalf("second expansion params %s", job.Spec.Assets[5].Params)
	}
}

// TestAJobNamesAFontByFamilyOrPostScriptName: a job's font may be named by its file name, its
// family or its PostScript name (case, spaces and hyphens aside), and is kept as its file name.
func TestAJobNamesAFontByFamilyOrPostScriptName(t *testing.T) {
	cat := testCatalog()
	cat.library = []*persistence.Font{{FileName: "arial.ttf", FamilyName: "Arial", PostScriptName: "ArialMT"},
		{FileName: "futura-pt.ttf", FamilyName: "Futura PT"}}
	job, err := ParseJob([]byte(`{"template": {"id": "`+aeID+`", "composition": "main"},
		"fonts": ["ArialMT", "futura pt", "arial", "arial.ttf", "Nowhere Sans"]}`), cat, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(job.Spec.Fonts, ","); got != "arial.ttf,futura-pt.ttf,Nowhere Sans" {
		t.Fatalf("fonts %q", got)
	}
	if got := strings.Join(job.MissingFonts, ","); got != "Nowhere Sans" {
		t.Fatalf("missing %q", got)
	}
}

// TestMissingFontsNameTheTemplatesOwnFonts: a template's font is provided by a library font of
// that family, PostScript name or file name, or by a font file the job names; the others are
// missing, after the job's own missing files.
func TestMissingFontsNameTheTemplatesOwnFonts(t *testing.T) {
	cat := testCatalog()
	cat.templates[aeID].Inspection.Fonts = []string{"ArialMT", "Futura PT", "Comic Neue", "Brand", "Montserrat-Bold", "ArialMT"}
	cat.library = []*persistence.Font{
		{FileName: "futura.ttf", FamilyName: "Futura PT"},
		{FileName: "arial.ttf", FamilyName: "Arial", PostScriptName: "ArialMT"},
	}
	job, err := ParseJob([]byte(`{"template": {"id": "`+aeID+`", "composition": "main"}, "fonts": ["comic_neue.ttf"]}`), cat, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(job.MissingFonts, ","); got != "comic_neue.ttf,Montserrat-Bold" {
		t.Fatalf("missing fonts %q", got)
	}
	// A font the template brings along is not missing.
	cat.templates[aeID].Inspection.BundledFonts = []string{"Montserrat Bold", "MontserratBold"}
	if job, _ := ParseJob([]byte(`{"template": {"id": "`+aeID+`", "composition": "main"}}`), cat, Limits{}); strings.Join(job.MissingFonts, ",") != "Comic Neue" {
		t.Fatalf("with Montserrat-Bold bundled: missing %v", job.MissingFonts)
	}
	// Nor one every node of the job's engine has installed (not one of another engine's nodes).
	cat.templates[aeID].Inspection.BundledFonts = nil
	cat.installed = map[string][]string{"ae2026": {"comic neue"}, "lottie": {"Montserrat-Bold"}}
	if job, _ := ParseJob([]byte(`{"template": {"id": "`+aeID+`", "composition": "main"}}`), cat, Limits{}); strings.Join(job.MissingFonts, ",") != "Montserrat-Bold" {
		t.Fatalf("with Comic Neue on the After Effects nodes: missing %v", job.MissingFonts)
	}
	cat.installed = nil
	cat.templates[aeID].Inspection.BundledFonts = nil
	cat.library = append(cat.library, &persistence.Font{FileName: "m.ttf", FamilyName: "Montserrat", PostScriptName: "Montserrat-Bold"}, &persistence.Font{FileName: "comic_neue.ttf"})
	if job, _ := ParseJob([]byte(`{"template": {"id": "`+aeID+`", "composition": "main"}, "fonts": ["comic_neue.ttf"]}`), cat, Limits{}); job.MissingFonts != nil {
		t.Fatalf("with every font in the library: missing %v", job.MissingFonts)
	}
}

func TestMogrtDefaultsItsCompositionAndChecksEssentials(t *testing.T) {
	job, err := parse(t, `{"template": {"id": "`+mogrtID+`"}, "assets": [{"type": "essential", "value": {"Headline": "x", "c1": "y"}}]}`)
	if err != nil || job.Spec.Composition != "end" {
		t.Fatalf("%v %+v", err, job)
	}
	_, err = parse(t, `{"template": {"id": "`+mogrtID+`"}, "assets": [{"type": "essential", "value": {"Subline": "x"}}]}`)
	if err == nil || err.Details[0].Field != "assets[0].value.Subline" || !strings.Contains(err.Message, "Headline") {
		t.Fatalf("unknown essential property: %v", err)
	}
}

func TestRejectsWithFieldAndCode(t *testing.T) {
	cases := map[string]struct{ body, code, field string }{
		"broken template":    {`{"template": {"id": "` + brokenID + `", "composition": "main"}, "assets": []}`, CodeTemplateNotReady, "template.id"},
		"no composition":     {`{"template": {"id": "` + lottieID + `"}, "assets": []}`, CodeValidation, "template.composition"},
		"essential lottie":   {`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "essential", "value": {}}]}`, CodeValidation, "assets[0].type"},
		"aep on lottie":      {`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [], "settings": {"type": "aep", "engine": "lottie"}}`, CodeValidation, "settings.engine"},
		"single video frame": {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [], "settings": {"frames": 3}}`, CodeValidation, "settings.frames"},
		"data both":          {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "data", "layerName": "Title", "property": "Opacity", "value": 1, "expression": "1"}]}`, CodeValidation, "assets[0]"},
		"text not string":    {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "text", "layerName": "Title", "value": 5}]}`, CodeValidation, "assets[0].value"},
		"function name":      {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "function", "name": "layer-remove"}]}`, CodeValidation, "assets[0].name"},
		"function layers":    {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "function", "name": "nx:layer-remove", "params": {"layerName": ["Title", "Gone"]}}]}`, CodeLayerNotFound, "assets[0].params.layerName[1]"},
		"image child frames": {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "job", "layerName": "Photo", "template": {"id": "` + aeID + `", "composition": "end"}, "assets": [], "settings": {"type": "aep"}}]}`, CodeValidation, "assets[0].settings.type"},
		"lottie expression":  {`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "data", "layerName": "Title", "property": "Opacity", "expression": "time"}]}`, CodeValidation, "assets[0].expression"},
		"lottie property":    {`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "data", "layerName": "Title", "property": "Effects.Glow.Radius", "value": 3}]}`, CodeValidation, "assets[0].property"},
		"lottie value":       {`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "data", "layerName": "Title", "property": "position", "value": "left"}]}`, CodeValidation, "assets[0].value"},
		"lottie function":    {`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "function", "name": "nx:render-settings-set"}]}`, CodeValidation, "assets[0].name"},
		"lottie params":      {`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "function", "name": "nx:layer-start-set", "params": {"layerName": ["Title", "Photo"], "start": "soon"}}]}`, CodeValidation, "assets[0].params"},
		"lottie script":      {`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "script", "src": "https://example.com/a.jsx"}]}`, CodeValidation, "assets[0].type"},
		"lottie image kind":  {`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "video", "layerName": "Title", "src": "https://example.com/a.mp4"}]}`, CodeValidation, "assets[0].layerName"},
		"child zip":          {`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "job", "layerName": "Photo", "template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [], "settings": {"type": "image", "frames": [0, 5]}}]}`, CodeValidation, "assets[0].settings.frames"},
		"localhost webhook":  {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [], "webhook": {"url": "http://localhost:9/x"}}`, CodeValidation, "webhook.url"},
		"trailing data":      {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": []} {}`, CodeInvalidJSON, ""},
		"tag characters":     {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [], "tags": ["ok", "not ok"]}`, CodeValidation, "tags"},
		"tag too long":       {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [], "tags": "` + strings.Repeat("t", 65) + `"}`, CodeValidation, "tags"},
		"empty tag":          {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [], "tags": "a,,b"}`, CodeValidation, "tags"},
		"tags a number":      {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [], "tags": 7}`, CodeValidation, "tags"},
		"tags not strings":   {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [], "tags": [1]}`, CodeValidation, "tags"},
		// Refused by the one-pass decode, then named by reading the assets one by one.
		"second asset field": {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "text", "layerName": "Title", "value": "a"}, {"type": "text", "layerName": "Title", "value": "b", "colour": 1}]}`, CodeValidation, "assets[1].colour"},
		"second asset type":  {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "text", "layerName": "Title", "value": "a"}, {"type": "text", "layerName": 5, "value": "b"}]}`, CodeValidation, "assets[1].layerName"},
		"private src":        {`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "image", "layerName": "Photo", "src": "http://10.0.0.7/a.png"}]}`, CodeValidation, "assets[0].src"},
	}
	for name, tc := range cases {
		_, err := parse(t, tc.body)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		field := ""
		if len(err.Details) > 0 {
			field = err.Details[0].Field
		}
		if err.Code != tc.code || field != tc.field {
			t.Errorf("%s: code %s field %q (%s), want %s %q", name, err.Code, field, err.Message, tc.code, tc.field)
		}
	}
}

// TestPrivateURLsAllowedWhenConfigured: a private address is refused naming the setting that
// permits it, and taken once it is set.
func TestPrivateURLsAllowedWhenConfigured(t *testing.T) {
	body := `{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [], "webhook": {"url": "http://127.0.0.1:9/x"}}`
	if _, err := ParseJob([]byte(body), testCatalog(), Limits{}); err == nil || !strings.Contains(err.Message, "allow_private_urls") {
		t.Fatalf("a private webhook refused with %v", err)
	}
	// IPv6 addresses that lead to a private IPv4 one: NAT64, IPv4-compatible.
	for _, host := range []string{"[64:ff9b::a9fe:a9fe]", "[::10.0.0.1]", "[2002:7f00:1::1]"} {
		nat := strings.Replace(body, "127.0.0.1:9", host+":9", 1)
		if _, err := ParseJob([]byte(nat), testCatalog(), Limits{}); err == nil || !strings.Contains(err.Message, "allow_private_urls") {
			t.Errorf("a webhook to %s: %v", host, err)
		}
	}
	if _, err := ParseJob([]byte(body), testCatalog(), Limits{AllowPrivateURLs: true}); err != nil {
		t.Fatal(err)
	}
}

func TestJoinAndBatchShapes(t *testing.T) {
	job, err := ParseJoin([]byte(`{"assets": [{"type": "video", "src": "https://a.example.com/1.mp4"},
		{"type": "job", "template": {"id": "`+aeID+`", "composition": "main"}, "assets": []}], "tags": ["x"]}`), testCatalog(), Limits{})
	if err != nil || job.Engine != renderer.EngineFFmpeg || job.Spec.Settings.Preset != "mp4" || len(job.Children) != 1 || job.Children[0].Tags[0] != "x" {
		t.Fatalf("%v %+v", err, job)
	}
	_, items, err := ParseBatch([]byte(`{"jobs": [{}, {}]}`))
	if err != nil || len(items) != 2 {
		t.Fatalf("%v %d", err, len(items))
	}
	if _, _, err := ParseBatch([]byte(`{"jobs": {}}`)); err == nil || err.Code != CodeValidation {
		t.Fatalf("jobs as an object: %v", err)
	}
}

// checkAccepted holds for every request validation accepts.
func checkAccepted(t *testing.T, job *Job, cat memoryCatalog) {
	if job.Engine == "" {
		t.Fatalf("accepted without an engine: %+v", job)
	}
	if len(job.Children) != len(job.ChildAsset) {
		t.Fatalf("%d children, %d child assets", len(job.Children), len(job.ChildAsset))
	}
	for _, i := range job.ChildAsset {
		if job.Spec.Assets[i].Type != renderer.AssetJob {
			t.Fatalf("child asset %d is %s", i, job.Spec.Assets[i].Type)
		}
	}
	if job.TemplateID == (ulid.ULID{}) {
		return
	}
	tpl, err := cat.Template(job.TemplateID.String())
	if err != nil {
		t.Fatalf("accepted with template %s: %v", job.TemplateID, err)
	}
	for _, a := range job.Spec.Assets {
		if a.LayerName == "" || a.Type == renderer.AssetFunction {
			continue
		}
		comp := job.Spec.Composition
		if a.Composition != "" {
			comp = a.Composition
		}
		if c := tpl.Inspection.Composition(comp); c == nil || c.Layer(a.LayerName) == nil {
			t.Fatalf("accepted layer %q absent from composition %q", a.LayerName, comp)
		}
	}
	for _, f := range job.MissingFonts {
		if cat.FontExists(f) {
			t.Fatalf("font %q reported missing", f)
		}
	}
	for _, c := range job.Children {
		checkAccepted(t, c, cat)
	}
}

var seeds = []string{
	`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "text", "layerName": "Title", "value": "x"}]}`,
	`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "job", "layerName": "Photo", "template": {"id": "` + aeID + `", "composition": "end"}, "assets": [{"type": "text", "layerName": "Credits", "value": "y"}]}], "tags": "a,b"}`,
	`{"template": {"id": "` + mogrtID + `"}, "assets": [{"type": "essential", "value": {"Headline": "x"}}], "settings": {"type": "image", "frames": 1}}`,
	`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "function", "name": "nx:layer-remove", "params": {"layerName": ["Title"]}}], "webhook": {"url": "https://h.example.com", "data": {"a": [1]}}, "upload": {"prefix": "p/", "params": {"region": "r", "bucket": "b", "accessKeyId": "a", "accessKeySecret": "${secret.KEY}"}}}`,
	`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [], "settings": {"frames": [1, 2], "codec": "h264_cbr_5mbps", "quality": "draft"}, "priority": 9}`,
	`{"assets": [{"type": "video", "src": "https://a.example.com/1.mp4"}]}`,
	`{"template": {"id": "` + lottieID + `", "composition": "main"}, "chunks": {"frames": 60}}`,
	`{"template": {"id": "` + lottieID + `", "composition": "main"}, "settings": {"type": "image", "frames": [10, 99]}, "chunks": {"count": 4}}`,
	`{"template": {"id": 5}}`, `[]`, `{`, `""`, `{"template": null, "assets": null}`,
}

func FuzzParseJob(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	cat := testCatalog()
	f.Fuzz(func(t *testing.T, body []byte) {
		job, err := ParseJob(body, cat, Limits{Engines: engines})
		if (job == nil) == (err == nil) {
			t.Fatalf("job %v and error %v", job, err)
		}
		if err != nil {
			if err.Code == "" || err.Message == "" {
				t.Fatalf("error without code or message: %+v", err)
			}
			return
		}
		checkAccepted(t, job, cat)
	})
}

func FuzzParseJoin(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	cat := testCatalog()
	f.Fuzz(func(t *testing.T, body []byte) {
		job, err := ParseJoin(body, cat, Limits{Engines: engines})
		if err != nil {
			if err.Code == "" || err.Message == "" {
				t.Fatalf("error without code or message: %+v", err)
			}
			return
		}
		if len(job.Spec.Assets) == 0 || job.Engine != renderer.EngineFFmpeg {
			t.Fatalf("accepted join %+v", job)
		}
		checkAccepted(t, job, cat)
	})
}

func FuzzParseBatch(f *testing.F) {
	f.Add([]byte(`{"jobs": [` + seeds[0] + `, ` + seeds[1] + `]}`))
	f.Add([]byte(`{"jobs": []}`))
	cat := testCatalog()
	f.Fuzz(func(t *testing.T, body []byte) {
		_, items, err := ParseBatch(body)
		if err != nil {
			return
		}
		if len(items) == 0 || len(items) > MaxBatchJobs {
			t.Fatalf("accepted a batch of %d", len(items))
		}
		for _, item := range items {
			if job, err := ParseJob(item, cat, Limits{}); err == nil {
				checkAccepted(t, job, cat)
			}
		}
	})
}

func TestLottieAcceptsWhatItRenders(t *testing.T) {
	_, err := parse(t, `{"template": {"id": "`+lottieID+`", "composition": "main"}, "assets": [
		{"type": "video", "layerName": "Photo", "src": "https://example.com/a.mp4"},
		{"type": "data", "layerName": "Title", "property": "fill color", "value": "#ff8800"},
		{"type": "function", "name": "nx:text-params-set", "params": {"layerName": "Title", "fontSize": 30}},
		{"type": "job", "layerName": "Photo", "template": {"id": "`+lottieID+`", "composition": "end"}, "assets": [{"type": "text", "layerName": "Credits", "value": "x"}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
}

// TestLayersAreFoundWhereNexrenderUsersPutThem: nested compositions, "*", and paths.
func TestLayersAreFoundWhereNexrenderUsersPutThem(t *testing.T) {
	job := func(asset string) string {
		return `{"template": {"id": "` + nestedID + `", "composition": "Main"}, "assets": [` + asset + `]}`
	}
	for _, ok := range []string{
		`{"type": "text", "layerName": "Title", "value": "x"}`,
		`{"type": "text", "layerName": "Title", "composition": "*", "value": "x"}`,
		`{"type": "text", "layerName": "Title", "composition": "Main->Scene->Card", "value": "x"}`,
		`{"type": "text", "layerName": "Title", "composition": "Scene->Card", "value": "x"}`,
		`{"type": "function", "name": "nx:layer-state-set", "params": {"layerName": "Title", "enabled": false}}`,
	} {
		if _, err := parse(t, job(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, tc := range []struct{ asset, code, field, says string }{
		{`{"type": "text", "layerName": "Nobody", "value": "x"}`, CodeLayerNotFound, "assets[0].layerName", `"Main", "Scene", "Card"`},
		{`{"type": "image", "layerName": "Logo", "src": "https://cdn.example.com/a.png"}`, CodeLayerNotFound, "assets[0].layerName", `"Main", "Scene", "Card"`},
		{`{"type": "text", "layerName": "Title", "composition": "Main->Other", "value": "x"}`, CodeCompositionNotFound, "assets[0].composition", `"Other"`},
		{`{"type": "text", "layerName": "Title", "composition": "Gone", "value": "x"}`, CodeCompositionNotFound, "assets[0].composition", `"Gone"`},
		{`{"type": "image", "layerName": "Title", "composition": "*", "src": "https://cdn.example.com/a.png"}`, CodeValidation, "assets[0].layerName", "text layer"},
	} {
		_, err := parse(t, job(tc.asset))
		if err == nil || err.Code != tc.code || err.Details[0].Field != tc.field || !strings.Contains(err.Message, tc.says) {
			t.Errorf("%s: %+v, want %s at %s saying %s", tc.asset, err, tc.code, tc.field, tc.says)
		}
	}
}

// TestTagsInAnyJSONSpelling: tags written with escapes read as the same tags.
func TestTagsInAnyJSONSpelling(t *testing.T) {
	for tags, want := range map[string][]string{
		`["a\u0062", "c"]`: {"ab", "c"}, `"a\u002cb"`: {"a", "b"}, `["x",  "y"]`: {"x", "y"}, `"solo"`: {"solo"},
	} {
		job, err := parse(t, `{"template": {"id": "`+aeID+`", "composition": "main"}, "assets": [], "tags": `+tags+`}`)
		if err != nil || !slices.Equal(job.Tags, want) {
			t.Errorf("tags %s: %v, %v; want %q", tags, job, err, want)
		}
	}
	if _, err := parse(t, `{"template": {"id": "`+aeID+`", "composition": "main"}, "assets": [], "tags": [null]}`); err == nil || err.Details[0].Field != "tags" {
		t.Errorf("tags [null]: %v", err)
	}
}

// TestAssetValuesOfTheWrongKind: a text's value is a string, an essential's an object.
func TestAssetValuesOfTheWrongKind(t *testing.T) {
	for _, tc := range []struct{ body, says string }{
		{`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "text", "layerName": "Title", "value": 5}]}`, "must be a string"},
		{`{"template": {"id": "` + aeID + `", "composition": "main"}, "assets": [{"type": "text", "layerName": "Title", "value": ["x"]}]}`, "must be a string"},
		{`{"template": {"id": "` + mogrtID + `"}, "assets": [{"type": "essential", "value": "x"}]}`, "must be an object"},
	} {
		_, err := parse(t, tc.body)
		if err == nil || err.Code != CodeValidation || err.Details[0].Field != "assets[0].value" || !strings.Contains(err.Message, tc.says) {
			t.Errorf("%s: %+v, want %q at assets[0].value", tc.body, err, tc.says)
		}
	}
}

// BenchmarkParseJob: a typical POST /jobs body (a template, a text asset, a tag), valid.
func BenchmarkParseJob(b *testing.B) {
	body := []byte(`{"template": {"id": "` + lottieID + `", "composition": "main"}, "assets": [{"type": "text", "layerName": "Title", "value": "Hello"}], "tags": ["bench"]}`)
	cat := testCatalog()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseJob(body, cat, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// usualBodies are job requests as clients write them, which the fast decoder must take itself.
var usualBodies = append(seeds[:5:5],
	`{"template":{"id":"`+aeID+`","composition":"main"},"assets":[{"type":"text","layerName":"Title","value":"Grüße"},{"type":"image","layerName":"Photo","src":"https://a.example.com/1.png"},{"type":"data","layerName":"Title","property":"Source Text","expression":"time"}],"tags":["bench","hot"],"priority":-3.5,"preview":false,"fonts":["Inter.ttf"]}`,
	` {"template": {"id": "`+aeID+`", "src": "https://a.example.com/t.aep"}, "assets": [{"type": "static", "src": "s", "name": "n"}, {"type": "script", "src": "s", "params": [1, -0.5e+3, true, null, {"k": "v\"\u00e9"}]}, {"type": "job", "layerName": "L", "template": {"id": "x"}, "assets": [], "preview": true, "fonts": [], "settings": {}}], "webhook": {"url": "https://h.example.com"}, "upload": {"prefix": "p/"}, "settings": {"frames": [1, 2]}, "tags": "a,b", "preview": true}
`,
	`{"template":{"id":"`+aeID+`"},"name":"Spot: Lyon","pool":"gpu","limits":["ae-licences","plugin"],"assets":[]}`,
	`{"template":{"id":"`+aeID+`"},"limits":[],"pool":"","name":""}`,
)

// TestFastJobDecoding: the fast decoder takes the bodies clients send and makes of them what
// encoding/json makes; bodies it leaves to encoding/json still parse.
func TestFastJobDecoding(t *testing.T) {
	for _, body := range usualBodies {
		if _, ok := decodeJobFast([]byte(body)); !ok {
			t.Errorf("the fast decoder refused %s", body)
		}
		compareJobDecoders(t, []byte(body))
	}
	for _, body := range []string{
		`{"template": {"id": "a\u0062"}}`, `{"Template": {"id": "a"}}`, `{"template": {"id": "a"}, "template": {"composition": "b"}}`,
		`{"priority": null}`, `{"assets": [{"type": "text", "value": null}]}`, `{"priority": 1e400}`, `{"tags": [- 1]}`,
		`{"tags": [1 .5]}`, `{"tags": [1. 5]}`, `{"tags": [1 e5]}`, `{"tags": [1e +5]}`, `{"tags": [1e -5]}`, `{"tags": [01]}`, `{"priority": 01}`,
		`{"tags": "\x0041"}`, `{"tags": "\u00e"}`, "{\"tags\": \"a\tb\"}",
		`{"template": {"id": "a"}} {}`, `{"template": {"id": "a"}}]`, "{\"template\": {\"id\": \"\xff\"}}", `{"extra": 1}`,
	} {
		if _, ok := decodeJobFast([]byte(body)); ok {
			t.Errorf("the fast decoder took %s", body)
		}
		compareJobDecoders(t, []byte(body))
	}
}

func FuzzFastJobDecoding(f *testing.F) {
	for _, s := range append(usualBodies, seeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(compareJobDecoders)
}

// compareJobDecoders fails if the fast decoder takes a body encoding/json refuses or reads
// differently.
func compareJobDecoders(t *testing.T, body []byte) {
	fast, ok := decodeJobFast(body)
	if !ok {
		return
	}
	var slow decodedJob
	if err := decodeStrict(body, &slow, ""); err != nil {
		t.Fatalf("the fast decoder took %q, which encoding/json refuses: %v", body, err)
	}
	if !reflect.DeepEqual(*fast, slow) {
		t.Fatalf("%q decoded\n%#v\nencoding/json makes\n%#v", body, *fast, slow)
	}
}

func TestAssetFieldNames(t *testing.T) {
	for _, i := range []int{0, 7, 63, 64, 1000} {
		if got, want := assetField(i), fmt.Sprintf("assets[%d]", i); got != want {
			t.Errorf("assetField(%d) = %q, want %q", i, got, want)
		}
	}
}

func TestRetagBodies(t *testing.T) {
	for body, want := range map[string]string{
		`{"priority": 5}`:                     "5 <nil>",
		`{"tags": "a,b"}`:                     "<nil> [a b]",
		`{"priority": -3, "tags": ["x"]}`:     "-3 [x]",
		`{"tags": []}`:                        "<nil> []",
		`{"tags": ""}`:                        "",
		`{}`:                                  "",
		`{"priority": 1.5}`:                   "",
		`{"priority": 2000000}`:               "",
		`{"tags": ["bad tag"]}`:               "",
		`{"priority": 1, "composition": "x"}`: "",
		`[1]`:                                 "",
	} {
		r, err := ParseRetag([]byte(body), persistence.TeamPolicy{})
		got := ""
		if err == nil {
			p, tags := "<nil>", "<nil>"
			if r.Priority != nil {
				p = fmt.Sprint(*r.Priority)
			}
			if r.Tags != nil {
				tags = fmt.Sprint(*r.Tags)
			}
			got = p + " " + tags
		} else if err.Code == "" || err.Message == "" {
			t.Errorf("%s: an error without code or message: %+v", body, err)
		}
		if got != want {
			t.Errorf("%s: %q, want %q (error %v)", body, got, want, err)
		}
	}
}

func FuzzParseRetag(f *testing.F) {
	for _, seed := range []string{`{"priority": 5}`, `{"tags": "a,b"}`, `{"priority": -3, "tags": ["x"]}`, `{"tags": []}`, `{}`, `[1]`, `{"priority": 1e400}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseRetag(body, persistence.TeamPolicy{})
		if (r == nil) == (err == nil) {
			t.Fatalf("%q: a change %v and an error %v", body, r, err)
		}
		if err != nil {
			return
		}
		if r.Priority == nil && r.Tags == nil {
			t.Fatalf("%q: accepted a change of nothing", body)
		}
		if r.Priority != nil && (*r.Priority > maxPriority || *r.Priority < -maxPriority) {
			t.Fatalf("%q: priority %d out of bounds", body, *r.Priority)
		}
		if r.Tags != nil {
			if len(*r.Tags) > 20 {
				t.Fatalf("%q: %d tags", body, len(*r.Tags))
			}
			for _, tag := range *r.Tags {
				if !ValidTag(tag) {
					t.Fatalf("%q: accepted tag %q", body, tag)
				}
			}
		}
	})
}

// TestChunkPlans: how a job asking for chunks (or the farm's default) is split: chunks of the
// frames asked, the last taking what is left; a count shared out; jobs that cannot be split
// rendering whole with the reason; malformed requests refused.
func TestChunkPlans(t *testing.T) {
	main := `"template": {"id": "` + lottieID + `", "composition": "main"}`
	for _, c := range []struct {
		name, body string
		lim        Limits
		chunks     string
		size       int
		unsplit    string
	}{
		{"frames", `{` + main + `, "chunks": {"frames": 60}}`, Limits{}, "0-59 60-119 120-179 180-239 240-299", 60, ""},
		{"the last takes the rest", `{` + main + `, "chunks": {"frames": 70}}`, Limits{}, "0-69 70-139 140-209 210-299", 70, ""},
		{"count", `{` + main + `, "settings": {"frames": [10, 109]}, "chunks": {"count": 3}}`, Limits{}, "10-42 43-75 76-109", 33, ""},
		{"image sequence", `{` + main + `, "settings": {"type": "image", "frames": [0, 9]}, "chunks": {"count": 2}}`, Limits{}, "0-4 5-9", 5, ""},
		{"one chunk is the whole", `{` + main + `, "chunks": {"count": 1}}`, Limits{ChunkFrames: 10}, "", 0, ""},
		{"too few frames", `{` + main + `, "settings": {"frames": [0, 100]}, "chunks": {"frames": 60}}`, Limits{}, "", 0, "its 101 frames make a single chunk"},
		{"a still", `{` + main + `, "settings": {"type": "image", "frames": 3}, "chunks": {"count": 2}}`, Limits{}, "", 0, "a single frame"},
		{"an engine without ranges", `{"template": {"id": "` + aeID + `", "composition": "main"}, "chunks": {"count": 2}}`, Limits{}, "", 0, "the ae2026 engine does not render frame ranges as chunks"},
		{"nested jobs", `{` + main + `, "assets": [{"type": "job", "layerName": "Photo", "template": {"id": "` + lottieID + `", "composition": "end"}}], "chunks": {"count": 2}}`, Limits{}, "", 0, "it has nested jobs, whose outputs it places whole"},
		{"frames past the end", `{` + main + `, "settings": {"frames": [200, 400]}, "chunks": {"count": 2}}`, Limits{}, "", 0, "frames 200 to 400 are not all in the composition's 300 frames"},
		{"farm default", `{` + main + `}`, Limits{ChunkFrames: 100}, "0-99 100-199 200-299", 100, ""},
		{"farm default below its threshold", `{` + main + `}`, Limits{ChunkFrames: 100, ChunkAbove: 301}, "", 0, ""},
		{"farm default, a job that cannot be split says nothing", `{"template": {"id": "` + aeID + `", "composition": "main"}}`, Limits{ChunkFrames: 100}, "", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			job, err := ParseJob([]byte(c.body), testCatalog(), c.lim)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range job.Chunks {
				if !f.Range {
					t.Fatalf("chunk %+v is not a range", f)
				}
				got = append(got, fmt.Sprintf("%d-%d", f.Start, f.End))
			}
			if strings.Join(got, " ") != c.chunks || job.ChunkFrames != c.size || job.Unsplit != c.unsplit {
				t.Fatalf("chunks %q of %d frames, unsplit %q; want %q of %d, %q", got, job.ChunkFrames, job.Unsplit, c.chunks, c.size, c.unsplit)
			}
		})
	}
	for _, bad := range []string{`{}`, `{"frames": 1}`, `{"frames": 2}`, `{"frames": 2.5}`, `{"count": 0}`, `{"count": 5001}`, `{"frames": 10, "count": 2}`,
		`{"size": 3}`, `60`, `{"frames": "60"}`} {
		if _, err := ParseJob([]byte(`{`+main+`, "chunks": `+bad+`}`), testCatalog(), Limits{}); err == nil || !strings.HasPrefix(err.Details[0].Field, "chunks") {
			t.Errorf("chunks %s: %v", bad, err)
		}
	}
	many := testCatalog()
	many.templates[lottieID].Inspection.Compositions[0].Duration = 100000
	if _, err := ParseJob([]byte(`{`+main+`, "chunks": {"frames": 3}}`), many, Limits{}); err == nil || !strings.Contains(err.Message, "at most 5000") {
		t.Errorf("1,000,000 chunks: %v", err)
	}
	if job, err := ParseJob([]byte(`{`+main+`}`), many, Limits{ChunkFrames: 3}); err != nil || len(job.Chunks) != renderer.MaxChunks {
		t.Errorf("the farm's default over 3,000,000 frames: %v chunks, %v", len(job.Chunks), err)
	}
}

// TestNamesPoolsAndLimits: a job's name, pool and limits, as its team's policy and the farm's
// limits allow them; its nested jobs take its pool and limits, and each job holds what its
// engine implies.
func TestNamesPoolsAndLimits(t *testing.T) {
	cat := testCatalog()
	cat.limits = []string{"ae-licences", "plugin"}
	gpu := []string{"gpu"}
	plugin := []string{"plugin"}
	cat.policy = persistence.TeamPolicy{Pools: &gpu, Limits: &plugin, MaxPriority: intPointer(5)}
	lim := Limits{EngineLimits: map[string][]string{"ae2026": {"ae-licences"}}}
	job, err := ParseJob([]byte(`{"template": {"id": "`+aeID+`", "composition": "main"}, "name": "  Spot 30s: Lyon  ", "pool": "gpu",
		"limits": ["plugin"], "priority": 5,
		"assets": [{"type": "job", "layerName": "Photo", "template": {"id": "`+lottieID+`", "composition": "end"}, "assets": []}]}`), cat, lim)
	if err != nil {
		t.Fatal(err)
	}
	if job.Name != "Spot 30s: Lyon" || job.Pool != "gpu" || !slices.Equal(job.Limits, []string{"ae-licences", "plugin"}) {
		t.Fatalf("job %q pool %q limits %v", job.Name, job.Pool, job.Limits)
	}
	if child := job.Children[0]; child.Pool != "gpu" || !slices.Equal(child.Limits, []string{"plugin"}) || child.Name != "" {
		t.Fatalf("nested job: pool %q limits %v name %q", child.Pool, child.Limits, child.Name)
	}
	refused := []struct{ body, field, says string }{
		{`"pool": "cpu"`, "pool", `may name only the pools ["gpu"]`},
		{`"pool": "a b"`, "pool", "must match"},
		{`"limits": ["nope"]`, "limits[0]", `may name only the limits ["plugin"] (set by the farm's admin), not "nope"`},
		{`"limits": ["plugin", "ae-licences"]`, "limits[1]", `may name only the limits ["plugin"]`},
		{`"priority": 6`, "priority", "maxPriority"},
		{`"name": "` + strings.Repeat("é", MaxNameLength+1) + `"`, "name", "at most 200 characters"},
		{`"name": "a\u0007b"`, "name", "control characters"},
	}
	for _, r := range refused {
		_, err := ParseJob([]byte(`{"template": {"id": "`+lottieID+`", "composition": "main"}, `+r.body+`}`), cat, lim)
		if err == nil || len(err.Details) == 0 || err.Details[0].Field != r.field || !strings.Contains(err.Details[0].Message, r.says) {
			t.Fatalf("%s: %+v", r.body, err)
		}
	}
	cat.policy = persistence.TeamPolicy{}
	if _, err := ParseJob([]byte(`{"template": {"id": "`+lottieID+`", "composition": "main"}, "limits": ["nope"]}`), cat, lim); err == nil ||
		!strings.Contains(err.Details[0].Message, `no limit "nope"`) {
		t.Fatalf("a limit the farm does not have: %+v", err)
	}
	// An engine's limit the farm does not have refuses its jobs, saying how to make it.
	_, err = ParseJob([]byte(`{"template": {"id": "`+aeID+`", "composition": "main"}}`), cat, Limits{EngineLimits: map[string][]string{"ae2026": {"missing"}}})
	if err == nil || !strings.Contains(err.Message, `no limit "missing", which every "ae2026" job holds`) {
		t.Fatalf("an engine's missing limit: %+v", err)
	}
	name, _, err := ParseBatch([]byte(`{"name": "Campaign 12", "jobs": [{}]}`))
	if err != nil || name != "Campaign 12" {
		t.Fatalf("a batch's name %q: %v", name, err)
	}
}

func intPointer(v int) *int { return &v }

// refusingRules are an engine's asset rules for tests: image assets go into image layers, and a
// text asset whose value is "no" is refused.
type refusingRules struct{}

func (refusingRules) LayerType(assetType string) string {
	if assetType == renderer.AssetImage {
		return "image"
	}
	return ""
}

func (refusingRules) CheckAsset(a renderer.Asset) *renderer.AssetRefusal {
	if a.Type == renderer.AssetText && string(a.Value) == `"no"` {
		return &renderer.AssetRefusal{Field: "value", Err: errors.New("this engine takes no no")}
	}
	return nil
}

// TestTheJobsEngineRulesItsAssets: a job's assets are checked by its engine's rules, asked
// through the renderer's interface (the layer an asset goes into, what the engine can apply),
// each refusal naming the field and the engine; an engine without rules takes them all.
func TestTheJobsEngineRulesItsAssets(t *testing.T) {
	lim := Limits{Engines: map[string]renderer.AssetRules{renderer.EngineLottie: refusingRules{}}}
	job := func(tpl, asset string) *Error {
		_, err := ParseJob([]byte(`{"template": {"id": "`+tpl+`", "composition": "main"}, "assets": [`+asset+`]}`), testCatalog(), lim)
		return err
	}
	for _, c := range []struct{ tpl, asset, field, says string }{
		{lottieID, `{"type": "text", "layerName": "Title", "value": "no"}`, "assets[0].value", "this engine takes no no (this job renders with the lottie engine)"},
		{lottieID, `{"type": "image", "layerName": "Title", "src": "https://example.com/a.png"}`, "assets[0].layerName",
			`layer "Title" is a text layer; the lottie engine puts image assets in image layers`},
		{lottieID, `{"type": "text", "layerName": "Title", "value": "yes"}`, "", ""},
		{aeID, `{"type": "text", "layerName": "Title", "value": "no"}`, "", ""},
		{aeID, `{"type": "image", "layerName": "Title", "src": "https://example.com/a.png"}`, "", ""},
	} {
		err := job(c.tpl, c.asset)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: refused: %+v", c.asset, err)
		case c.field != "" && (err == nil || len(err.Details) == 0 || err.Details[0].Field != c.field || err.Details[0].Message != c.says):
			t.Errorf("%s: %+v, want %s: %s", c.asset, err, c.field, c.says)
		}
	}
}

// TestUnknownSettingsSayWhereTheyAreSet: a field of settings other renderers take (format, fps)
// is refused saying what sets it here.
func TestUnknownSettingsSayWhereTheyAreSet(t *testing.T) {
	for field, says := range map[string]string{"format": "settings.codec", "fps": "frame rate", "container": "MP4 for H.264"} {
		body := `{"template": {"id": "` + lottieID + `", "composition": "main"}, "settings": {"` + field + `": "mp4"}}`
		_, err := ParseJob([]byte(body), testCatalog(), Limits{})
		if err == nil || len(err.Details) != 1 || err.Details[0].Field != "settings."+field || !strings.Contains(err.Details[0].Message, says) ||
			!strings.HasPrefix(err.Details[0].Message, "unknown field") {
			t.Errorf("settings.%s: %+v", field, err)
		}
	}
}
