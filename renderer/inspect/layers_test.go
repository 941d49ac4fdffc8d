package inspect

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/framefarm/framefarm/renderer"
)

// layerFacts is what the v3 template routes report about a layer, in a form tests compare.
type layerFacts struct {
	ID, Parent, SourceComp int
	Source                 string
	Start, In, Out         float64
	Bounds                 *renderer.Bounds
}

func factsOf(l renderer.Layer) layerFacts {
	f := layerFacts{ID: l.ID, Source: l.SourceType, Start: l.StartTime, In: l.InPoint, Out: l.OutPoint, Bounds: l.Bounds}
	if l.ParentID != nil {
		f.Parent = *l.ParentID
	}
	if l.SourceCompID != nil {
		f.SourceComp = *l.SourceCompID
	}
	return f
}

func checkLayer(t *testing.T, in *renderer.Inspection, comp, layer string, want layerFacts) {
	t.Helper()
	c := in.Composition(comp)
	if c == nil {
		t.Fatalf("no composition %q", comp)
	}
	l := c.Layer(layer)
	if l == nil {
		t.Fatalf("no layer %q in %q", layer, comp)
	}
	got := factsOf(*l)
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	if string(a) != string(b) {
		t.Errorf("%s/%s:\n got %s\nwant %s", comp, layer, a, b)
	}
}

// TestAfterEffectsIdsAndTimes reads item and layer ids, sources and times from the layer data.
func TestAfterEffectsIdsAndTimes(t *testing.T) {
	in, err := inspectFile(t, renderer.TemplateAEP, filepath.Join(fixtures, "templates", "boltframe_Item-01.aep"))
	if err != nil {
		t.Fatal(err)
	}
	if in.Version != renderer.InspectionVersion {
		t.Errorf("version %d", in.Version)
	}
	if in.Compositions[0].ID != 48 || in.Compositions[1].ID != 59 {
		t.Errorf("composition ids %d %d", in.Compositions[0].ID, in.Compositions[1].ID)
	}
	checkLayer(t, in, "Comp 01", "Null 1", layerFacts{ID: 79, Source: "solid", Out: 31})
	checkLayer(t, in, "Comp 01", "Shape Layer 1", layerFacts{ID: 76, Out: 31})
	switches := in.Compositions[0].Layers[0].Data["switches"].(map[string]bool)
	if !switches["null"] || !switches["visible"] || switches["adjustment"] {
		t.Errorf("switches of the null layer %v", switches)
	}
	in, err = inspectFile(t, renderer.TemplateAEP, filepath.Join(fixtures, "templates", "nexrender_1layer.aep"))
	if err != nil {
		t.Fatal(err)
	}
	checkLayer(t, in, "testcomp1", "<empty text layer>", layerFacts{ID: 12, Out: 30})
}

// TestLottieIdsTimesAndBounds: ids from ind and the asset order, precomp sources, times from
// ip/op/st, and boxes at time 0 through anchor, scale and the parent chain.
func TestLottieIdsTimesAndBounds(t *testing.T) {
	nested, err := os.ReadFile(filepath.Join(fixtures, "..", "nested", "nested.json"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := inspectFile(t, renderer.TemplateZip, zipOf(t, map[string][]byte{"nested.json": nested}))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, c := range in.Compositions {
		ids[c.Name] = c.ID
	}
	if ids["Main"] != 1 || ids["Scene"] != 2 || ids["Card"] != 3 || ids["Other"] != 4 {
		t.Fatalf("composition ids %v", ids)
	}
	if in.Composition("Card").Data["refId"] != "comp_card" {
		t.Errorf("card data %v", in.Composition("Card").Data)
	}
	checkLayer(t, in, "Main", "Scene", layerFacts{ID: 1, SourceComp: 2, Source: "composition", Out: 1,
		Bounds: &renderer.Bounds{Left: 0, Top: 0, Width: 320, Height: 180}})
	checkLayer(t, in, "Scene", "Card", layerFacts{ID: 1, SourceComp: 3, Source: "composition", Out: 1,
		Bounds: &renderer.Bounds{Left: 110, Top: 65, Width: 100, Height: 50}})
	checkLayer(t, in, "Card", "Title", layerFacts{ID: 1, Out: 1})
	checkLayer(t, in, "Card", "Panel", layerFacts{ID: 2, Source: "solid", Out: 1,
		Bounds: &renderer.Bounds{Left: 0, Top: 0, Width: 200, Height: 100}})

	// kenburns: a solid moved by its anchor, an image whose scale is animated (its first key).
	in, err = inspectFile(t, renderer.TemplateZip, zipOf(t, dirFiles(t, filepath.Join(fixtures, "lottie", "synthetic"), "kenburns/")))
	if err != nil {
		t.Fatal(err)
	}
	checkLayer(t, in, "kenburns", "Photo", layerFacts{ID: 3, Source: "image", Out: 10,
		Bounds: &renderer.Bounds{Left: 0, Top: 0, Width: 1920, Height: 1080}})
}

// TestLottieBoundsFollowParentsAndRotation: a child of a rotated, scaled parent.
func TestLottieBoundsFollowParentsAndRotation(t *testing.T) {
	doc := []byte(`{"fr":25,"ip":0,"op":25,"w":400,"h":400,"layers":[
	 {"ty":3,"nm":"Rig","ind":5,"ip":0,"op":25,"st":0,"ks":{"p":{"a":0,"k":[200,200]},"a":{"a":0,"k":[0,0]},"s":{"a":0,"k":[200,200]},"r":{"a":0,"k":90}}},
	 {"ty":1,"nm":"Box","ind":6,"parent":5,"sw":20,"sh":10,"ip":0,"op":25,"st":12.5,"ks":{"p":{"s":true,"x":{"a":0,"k":10},"y":{"a":0,"k":0}},"a":{"a":0,"k":[0,0]}}},
	 {"ty":1,"nm":"Loop","ind":7,"parent":8,"sw":20,"sh":10,"ip":0,"op":25,"st":0,"ks":{}},
	 {"ty":1,"nm":"Back","ind":8,"parent":7,"sw":20,"sh":10,"ip":0,"op":25,"st":0,"ks":{}},
	 {"ty":1,"nm":"Odd","ind":9,"sw":20,"sh":10,"ip":0,"op":25,"st":0,"ks":{"p":{"a":0,"k":"x"}}}]}`)
	in, err := inspectLottie(doc)
	if err != nil {
		t.Fatal(err)
	}
	// Box spans x 10..30, y 0..10 in Rig; Rig doubles it, turns it a quarter and moves it to
	// (200,200): x 180..200, y 220..260.
	checkLayer(t, in, "main", "Box", layerFacts{ID: 6, Parent: 5, Source: "solid", Start: 0.5, Out: 1,
		Bounds: &renderer.Bounds{Left: 180, Top: 220, Width: 20, Height: 40}})
	checkLayer(t, in, "main", "Loop", layerFacts{ID: 7, Parent: 8, Source: "solid", Out: 1})
	checkLayer(t, in, "main", "Odd", layerFacts{ID: 9, Source: "solid", Out: 1})
}
