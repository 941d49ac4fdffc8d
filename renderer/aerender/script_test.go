package aerender

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/framefarm/framefarm/renderer"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// One job asset of each type, as the node stages them.
var goldenAssets = map[string][]renderer.Asset{
	"text": {{Type: renderer.AssetText, LayerName: "Title", Value: json.RawMessage(`"Ünïcode \"quoted\"\nsecond line \u2028"`)}},
	"data": {
		{Type: renderer.AssetData, LayerName: "Title", Property: "Transform.Position", Value: json.RawMessage(`[960, 540]`)},
		{Type: renderer.AssetData, LayerName: "Logo", Composition: "end", Property: "Effects.Glow.Radius", Expression: "wiggle(2, 10)"},
	},
	"image":     {{Type: renderer.AssetImage, LayerName: "Photo", LocalPath: `C:\work\project\framefarm-assets\0-photo.jpg`}},
	"video":     {{Type: renderer.AssetVideo, LayerName: "Clip", LocalPath: "/work/project/framefarm-assets/0-clip.mp4"}},
	"audio":     {{Type: renderer.AssetAudio, LayerName: "Music", LocalPath: "/work/project/framefarm-assets/0-music.wav"}},
	"static":    {{Type: renderer.AssetStatic, Name: "data.csv", LocalPath: "/work/project/data.csv"}},
	"essential": {{Type: renderer.AssetEssential, Value: json.RawMessage(`{"Headline": "Hello", "Size": 42}`)}},
	"script":    {{Type: renderer.AssetScript, LocalPath: "/work/project/framefarm-assets/0-fix.jsx", Params: json.RawMessage(`{"speed": 2}`)}},
	"job":       {{Type: renderer.AssetJob, LayerName: "Inset", LocalPath: "/work/project/framefarm-assets/0-child.mp4"}},
	"function": {
		{Type: renderer.AssetFunction, Name: "nx:layer-remove", Params: json.RawMessage(`{"layerName": "Watermark"}`)},
		{Type: renderer.AssetFunction, Name: "nx:text-params-set", Params: json.RawMessage(`{"layerName": "Title", "fontSize": 72, "fillColor": "#ff8000", "justification": "center"}`)},
		{Type: renderer.AssetFunction, Name: "nx:solid-color-set", Params: json.RawMessage(`{"layerName": "BG", "color": [0, 0, 255]}`)},
		{Type: renderer.AssetFunction, Name: "nx:layer-state-set", Params: json.RawMessage(`{"layerName": "BG", "enabled": false}`)},
		{Type: renderer.AssetFunction, Name: "nx:layer-start-set", Params: json.RawMessage(`{"layerName": "BG", "start": 1.5}`)},
		{Type: renderer.AssetFunction, Name: "nx:layer-duration-set", Params: json.RawMessage(`{"layerName": "BG", "duration": 3}`)},
		{Type: renderer.AssetFunction, Name: "nx:comp-duration-set", Params: json.RawMessage(`{"duration": 8}`)},
	},
}

func TestGeneratedCallsMatchGoldenFiles(t *testing.T) {
	for name, assets := range goldenAssets {
		p := plan{Composition: "main", Assets: assets, EssentialComp: "framefarm essential main"}
		got, err := assetCalls(p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		golden := filepath.Join("testdata", "golden", name+".jsx")
		if *update {
			os.MkdirAll(filepath.Dir(golden), 0o755)
			os.WriteFile(golden, got, 0o644)
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (go test -update writes it)", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: generated\n%s\nwant\n%s", name, got, want)
		}
	}
}

func TestScriptGuardsTheCallsAndSaves(t *testing.T) {
	s, err := script(plan{Composition: "main", Assets: goldenAssets["text"], SaveTo: "/w/p-framefarm.aep", FailureFile: "/w/failure.txt"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{string(runtime), "try {\n", `framefarm.save("/w/p-framefarm.aep");`, `new File("/w/failure.txt")`, "throw e;"} {
		if !strings.Contains(string(s), want) {
			t.Fatalf("the script lacks %q", want)
		}
	}
}

func TestScriptRefusesWhatItCannotApply(t *testing.T) {
	bad := [][]renderer.Asset{
		{{Type: renderer.AssetText, LayerName: "T", Value: json.RawMessage(`5`)}},
		{{Type: renderer.AssetFunction, Name: "nx:nope"}},
		{{Type: "hologram"}},
	}
	for _, assets := range bad {
		if _, err := assetCalls(plan{Composition: "main", Assets: assets}); err == nil {
			t.Errorf("%+v was accepted", assets[0])
		}
	}
}

// FuzzScriptCalls feeds hostile values to the script generator: whatever a job carries stays
// inside its string or literal, so every generated line is a comment or one runtime call.
func FuzzScriptCalls(f *testing.F) {
	f.Add("text", "Title", "main", `"Hello"`, "", "")
	f.Add("data", "Title", "", `[1, 2]`, "Transform.Position", "")
	f.Add("data", "Ti\"tle", "c\u2028omp", ``, "Opacity", "\"); app.quit(); (\"")
	f.Add("function", "", "", ``, "nx:layer-remove", `{"layerName": "a\nb"}`)
	f.Add("essential", "", "main", `{"a\u2029": "</script>"}`, "", "")
	f.Fuzz(func(t *testing.T, typ, layer, comp, value, property, extra string) {
		a := renderer.Asset{Type: typ, LayerName: layer, Composition: comp, Value: json.RawMessage(value), Property: property,
			Name: property, Params: json.RawMessage(extra), Expression: extra, LocalPath: layer}
		out, err := assetCalls(plan{Composition: "main", Assets: []renderer.Asset{a}, EssentialComp: "framefarm essential main"})
		if err != nil {
			return
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
			if !strings.HasPrefix(line, "    // ") && !(strings.HasPrefix(line, "    framefarm.") && strings.HasSuffix(line, ");")) {
				t.Fatalf("line %q escapes its call", line)
			}
			if strings.ContainsAny(line, "\r\u2028\u2029") {
				t.Fatalf("line %q carries a raw line break", line)
			}
		}
	})
}
