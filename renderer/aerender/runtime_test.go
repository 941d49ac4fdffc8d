package aerender

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/inspect"
)

// fakeProject describes the nested test template to the fake object model, from its inspection.
func fakeProject(t *testing.T) []byte {
	t.Helper()
	in, err := inspect.Inspector{}.Inspect(context.Background(), renderer.TemplateZip, nestedZip(t))
	if err != nil {
		t.Fatal(err)
	}
	type fakeLayer struct {
		Name   string  `json:"name"`
		Source int     `json:"source,omitempty"`
		Text   *string `json:"text,omitempty"`
	}
	type fakeComp struct {
		ID     int         `json:"id"`
		Name   string      `json:"name"`
		Layers []fakeLayer `json:"layers"`
	}
	var comps []fakeComp
	for _, c := range in.Compositions {
		fc := fakeComp{ID: c.ID, Name: c.Name}
		for _, l := range c.Layers {
			fl := fakeLayer{Name: l.Name}
			if l.SourceCompID != nil {
				fl.Source = *l.SourceCompID
			}
			if l.Type == "text" {
				fl.Text = &l.Text
			}
			fc.Layers = append(fc.Layers, fl)
		}
		comps = append(comps, fc)
	}
	out, _ := json.Marshal(comps)
	return out
}

func nestedZip(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "nested", "nested.json"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("nested.json")
	w.Write(data)
	zw.Close()
	p := filepath.Join(t.TempDir(), "nested.zip")
	os.WriteFile(p, buf.Bytes(), 0o600)
	return p
}

// runCalls runs the runtime and the calls for assets under Node.js on the fake object model and
// returns what it reports: texts by composition and layer, or the error.
func runCalls(t *testing.T, project []byte, assets []renderer.Asset) map[string]any {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("Node.js runs the ExtendScript runtime in this test; make setup installs it")
	}
	calls, err := assetCalls(plan{Composition: "Main", Assets: assets})
	if err != nil {
		t.Fatal(err)
	}
	harness, err := os.ReadFile(filepath.Join("testdata", "fakeae", "fakeae.js"))
	if err != nil {
		t.Fatal(err)
	}
	program := "var PROJECT = " + string(project) + ";\n" + string(harness) + "\n" + string(runtime) +
		"\nreport(function () {\n" + string(calls) + "});\n"
	script := filepath.Join(t.TempDir(), "run.js")
	os.WriteFile(script, []byte(program), 0o600)
	out, err := exec.Command(node, script).CombinedOutput()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, out)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return got
}

// TestRuntimeFindsLayersByNexrenderConventions runs the ExtendScript runtime on a project whose
// text layer sits two compositions deep (Main -> Scene -> Card).
func TestRuntimeFindsLayersByNexrenderConventions(t *testing.T) {
	project := fakeProject(t)
	text := func(composition string) []renderer.Asset {
		return []renderer.Asset{{Type: renderer.AssetText, LayerName: "Title", Composition: composition, Value: json.RawMessage(`"new"`)}}
	}
	for _, tc := range []struct{ composition, card, other string }{
		{"", "new", "Other"},
		{"*", "new", "new"},
		{"Main->Scene->Card", "new", "Other"},
		{"Scene->Card", "new", "Other"},
		{"Other", "Hello", "new"},
	} {
		got := runCalls(t, project, text(tc.composition))
		card, _ := got["Card"].(map[string]any)
		other, _ := got["Other"].(map[string]any)
		if card["Title"] != tc.card || other["Title"] != tc.other {
			t.Errorf("%q: %v; want Card %q, Other %q", tc.composition, got, tc.card, tc.other)
		}
	}
	for composition, want := range map[string]string{
		"Main->Other": `composition "Main" has no precomp layer or nested composition named "Other"`,
		"Nope":        `no composition named "Nope"`,
	} {
		got := runCalls(t, project, text(composition))
		if msg, _ := got["error"].(string); !strings.Contains(msg, want) {
			t.Errorf("%q: %v, want an error saying %s", composition, got, want)
		}
	}
	got := runCalls(t, project, []renderer.Asset{{Type: renderer.AssetText, LayerName: "Nobody", Value: json.RawMessage(`"x"`)}})
	if msg, _ := got["error"].(string); !strings.Contains(msg, `searched: "Main", "Scene", "Card"`) {
		t.Errorf("a name found nowhere: %v", got)
	}
}
