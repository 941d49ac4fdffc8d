package lottie

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framefarm/framefarm/renderer"
)

func loadDocument(t *testing.T, raw []byte) *document {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	d := &document{dir: t.TempDir()}
	if err := dec.Decode(&d.root); err != nil {
		t.Fatal(err)
	}
	fps, _ := number(d.root["fr"])
	d.rate = renderer.RateOf(fps)
	return d
}

func textOf(t *testing.T, d *document, comp, layer string) (string, obj) {
	t.Helper()
	layers, err := d.layers(comp, layer)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := textDocuments(layers[0])
	if err != nil {
		t.Fatal(err)
	}
	text, _ := docs[0]["t"].(string)
	return text, layers[0]["t"].(obj)["d"].(obj)
}

// teamFont stages the Comic Neue font of a fixture under another file name, as a team font.
func teamFont(t *testing.T, name string) []renderer.FontFile {
	t.Helper()
	zr, err := zip.OpenReader(filepath.Join(fixtures, "EmbeddedFont.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	rc, err := zr.Open("fonts/Comic Neue.ttf")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	p := filepath.Join(t.TempDir(), name)
	os.WriteFile(p, data, 0o600)
	return []renderer.FontFile{{FileName: name, Path: p}}
}

func TestTextInjectionDropsExpressionsAndUncoveredGlyphs(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtures, "footage", "data.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		text      string
		fonts     []renderer.FontFile
		keepChars bool
	}{
		{"no font supplied keeps the glyphs", "Zürich", nil, true},
		{"glyphs cover the text", "Chicago", teamFont(t, "Arial.ttf"), true},
		{"supplied font, missing glyphs", "Zürich", teamFont(t, "Arial.ttf"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := loadDocument(t, raw)
			fonts := collectFonts(d.dir, c.fonts)
			asset := renderer.Asset{Type: renderer.AssetText, LayerName: "City", Value: json.RawMessage(`"` + c.text + `"`)}
			if err := d.apply(context.Background(), asset, fonts); err != nil {
				t.Fatal(err)
			}
			text, doc := textOf(t, d, "", "City")
			if text != c.text || doc["x"] != nil {
				t.Fatalf("text %q, expression %v", text, doc["x"])
			}
			if _, kept := d.root["chars"]; kept != c.keepChars {
				t.Fatalf("chars kept: %v, want %v", kept, c.keepChars)
			}
		})
	}
}

// precompDoc is a root animation with a precomp "Lower Third" holding a text layer also named as
// one in the root.
const precompDoc = `{"v":"5.7.0","nm":"Main","fr":25,"ip":0,"op":50,"w":640,"h":360,
 "assets":[{"id":"comp_0","nm":"Lower Third","w":400,"h":100,"layers":[
   {"ty":5,"nm":"Name","ip":0,"op":50,"st":0,"ks":{},"t":{"d":{"k":[{"s":{"t":"inner","f":"F","s":20},"t":0}]}}}]}],
 "layers":[
   {"ty":5,"nm":"Name","ip":0,"op":50,"st":0,"ks":{},"t":{"d":{"k":[{"s":{"t":"outer","f":"F","s":20},"t":0},{"s":{"t":"outer 2","f":"F","s":20},"t":25}]}}},
   {"ty":0,"nm":"LT","refId":"comp_0","ip":10,"op":50,"st":10,"ks":{}}]}`

func TestAssetCompositionOverride(t *testing.T) {
	d := loadDocument(t, []byte(precompDoc))
	must := func(a renderer.Asset) {
		t.Helper()
		if err := d.apply(context.Background(), a, fontSet{}); err != nil {
			t.Fatal(err)
		}
	}
	must(renderer.Asset{Type: renderer.AssetText, LayerName: "Name", Value: json.RawMessage(`"root"`)})
	must(renderer.Asset{Type: renderer.AssetText, LayerName: "Name", Composition: "Lower Third", Value: json.RawMessage(`"precomp"`)})
	if got, _ := textOf(t, d, "", "Name"); got != "root" {
		t.Fatalf("root text %q", got)
	}
	layers, _ := d.layers("", "Name")
	docs, _ := textDocuments(layers[0])
	if len(docs) != 2 || docs[1]["t"] != "root" {
		t.Fatalf("every keyframe must carry the text: %v", docs)
	}
	if got, _ := textOf(t, d, "Lower Third", "Name"); got != "precomp" {
		t.Fatalf("precomp text %q", got)
	}
	if err := d.apply(context.Background(), renderer.Asset{Type: renderer.AssetText, LayerName: "Name", Composition: "Nope", Value: json.RawMessage(`"x"`)}, fontSet{}); err == nil {
		t.Fatal("an unknown composition was accepted")
	}
}

func TestFunctions(t *testing.T) {
	d := loadDocument(t, []byte(precompDoc))
	run := func(name, params string) {
		t.Helper()
		if err := d.apply(context.Background(), renderer.Asset{Type: renderer.AssetFunction, Name: name, Params: json.RawMessage(params)}, fontSet{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	run("nx:layer-start-set", `{"layerName":"LT","start":1}`)
	lt, _ := d.layers("", "LT")
	if ip, _ := number(lt[0]["ip"]); ip != 25 {
		t.Fatalf("ip %v after starting at 1 s", ip)
	}
	if op, _ := number(lt[0]["op"]); op != 65 {
		t.Fatalf("op %v, the layer must keep its length", op)
	}
	run("nx:layer-duration-set", `{"layerName":"LT","duration":0.4}`)
	if op, _ := number(lt[0]["op"]); op != 35 {
		t.Fatalf("op %v after 0.4 s", op)
	}
	run("nx:comp-duration-set", `{"duration":4}`)
	if op, _ := number(d.root["op"]); op != 100 {
		t.Fatalf("comp op %v", op)
	}
	run("nx:text-params-set", `{"layerName":"Name","fontSize":48,"justification":"center","fillColor":"#00ff00"}`)
	_, doc := textOf(t, d, "", "Name")
	s := doc["k"].([]any)[1].(obj)["s"].(obj)
	if s["s"] != 48.0 || s["j"] != 2 {
		t.Fatalf("text document %v", s)
	}
	run("nx:layer-state-set", `{"layerName":"Name","enabled":false}`)
	run("nx:layer-remove", `{"layerName":"LT"}`)
	if _, err := d.layers("", "LT"); err == nil {
		t.Fatal("the layer is still there")
	}
	if err := d.apply(context.Background(), renderer.Asset{Type: renderer.AssetFunction, Name: "nx:text-params-set", Params: json.RawMessage(`{"layerName":"Name","kerning":1}`)}, fontSet{}); err == nil {
		t.Fatal("an unknown text parameter was accepted")
	}
}

func TestSelectCompositionRendersAPrecomp(t *testing.T) {
	d := loadDocument(t, []byte(precompDoc))
	if err := d.selectComposition("Lower Third"); err != nil {
		t.Fatal(err)
	}
	if w, _ := number(d.root["w"]); w != 400 {
		t.Fatalf("width %v", w)
	}
	if got, _ := textOf(t, d, "", "Name"); got != "inner" {
		t.Fatalf("root now shows %q", got)
	}
}

// FuzzApply feeds hostile animations and assets to the injection code: errors are fine, panics
// are not (they would take the render node down).
func FuzzApply(f *testing.F) {
	f.Add([]byte(precompDoc), "text", "Name", "", "", `"hi"`, ``)
	f.Add([]byte(precompDoc), "data", "Name", "Lower Third", "Fill Color", `[1,0,0]`, ``)
	f.Add([]byte(precompDoc), "data", "LT", "", "Scale", `[50,50]`, ``)
	f.Add([]byte(precompDoc), "function", "", "", "nx:text-params-set", ``, `{"layerName":"Name","fontSize":3}`)
	f.Add([]byte(precompDoc), "function", "", "", "nx:layer-start-set", ``, `{"layerName":"LT","start":-1}`)
	f.Add([]byte(precompDoc), "image", "LT", "", "", ``, ``)
	f.Add([]byte(`{"layers":[{"ty":2,"nm":"x","refId":"a"}],"assets":{"id":"a"}}`), "image", "x", "", "", ``, ``)
	f.Add([]byte(`{"layers":[{"ty":5,"nm":"x","t":{"d":{"k":[{"s":null}]}}}]}`), "text", "x", "", "", `"a"`, ``)
	image := filepath.Join(fixtures, "synthetic", "images", "photo.jpg")
	f.Fuzz(func(t *testing.T, raw []byte, typ, layer, comp, nameOrProperty, value, params string) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		d := &document{dir: t.TempDir(), rate: renderer.Rate{Num: 25, Den: 1}}
		if dec.Decode(&d.root) != nil || d.root == nil {
			return
		}
		if d.selectComposition(comp) != nil {
			return
		}
		a := renderer.Asset{Type: typ, LayerName: layer, Composition: comp, Property: nameOrProperty, Name: nameOrProperty,
			Value: json.RawMessage(value), Params: json.RawMessage(params), LocalPath: image}
		_ = d.apply(context.Background(), a, fontSet{})
		embedFonts(d.root, fontSet{})
		if _, err := json.Marshal(d.root); err != nil {
			t.Fatalf("the edited animation cannot be written: %v", err)
		}
	})
}

// TestLayersFollowNexrenderConventions: a text layer two compositions deep is found from the
// rendered composition, by "*" and by a path; a composition not nested stays as it was.
func TestLayersFollowNexrenderConventions(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtures, "..", "..", "nested", "nested.json"))
	if err != nil {
		t.Fatal(err)
	}
	text := func(d *document, comp, value string) error {
		return d.apply(context.Background(), renderer.Asset{Type: renderer.AssetText, LayerName: "Title", Composition: comp,
			Value: json.RawMessage(`"` + value + `"`)}, fontSet{})
	}
	titles := func(d *document) (card, other string) {
		card, _ = textOf(t, d, "Card", "Title")
		other, _ = textOf(t, d, "Other", "Title")
		return card, other
	}
	for _, tc := range []struct{ composition, card, other string }{
		{"", "new", "Other"},
		{"*", "new", "new"},
		{"Main->Scene->Card", "new", "Other"},
		{"Scene->Card", "new", "Other"},
		{"Other", "Hello", "new"},
	} {
		d := loadDocument(t, raw)
		if err := text(d, tc.composition, "new"); err != nil {
			t.Fatalf("%q: %v", tc.composition, err)
		}
		if card, other := titles(d); card != tc.card || other != tc.other {
			t.Errorf("%q: Card shows %q, Other %q; want %q, %q", tc.composition, card, other, tc.card, tc.other)
		}
	}
	d := loadDocument(t, raw)
	if err := text(d, "Main->Other", "x"); err == nil || !strings.Contains(err.Error(), "Other") {
		t.Errorf("a path through a composition not nested there: %v", err)
	}
	err = d.apply(context.Background(), renderer.Asset{Type: renderer.AssetText, LayerName: "Nobody", Value: json.RawMessage(`"x"`)}, fontSet{})
	if err == nil || !strings.Contains(err.Error(), "Main, Scene, Card") {
		t.Errorf("a name found nowhere must say where it was looked for: %v", err)
	}
	// Rendering a precomp raises it to the root; its layers are still changed once.
	d = loadDocument(t, raw)
	if err := d.selectComposition("Scene"); err != nil {
		t.Fatal(err)
	}
	calls := 0
	if err := d.eachLayer("*", "Card", func(obj) error { calls++; return nil }); err != nil || calls != 1 {
		t.Errorf("the raised precomp's layer was visited %d times (%v)", calls, err)
	}
}
