package inspect

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/framefarm/framefarm/renderer"
)

// layerFacts is what the v3 template routes report about a layer, in a form tests compare.
type layerFacts struct {
	ID, Parent, SourceComp int
	Source                 string
	Start, In, Out         float64
	Bounds                 *renderer.Bounds
	Estimated              bool
}

func factsOf(l renderer.Layer) layerFacts {
	estimated, _ := l.Data["boundsEstimated"].(bool)
	f := layerFacts{ID: l.ID, Source: l.SourceType, Start: l.StartTime, In: l.InPoint, Out: l.OutPoint, Bounds: l.Bounds, Estimated: estimated}
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
	// A null's source is a 100 x 100 solid; untouched, it sits at the composition's centre.
	checkLayer(t, in, "Comp 01", "Null 1", layerFacts{ID: 79, Source: "solid", Out: 31, Bounds: &renderer.Bounds{Left: 125.5, Top: 378, Width: 100, Height: 100}})
	// A shape layer's paths are not read: a point where its transform puts its origin.
	checkLayer(t, in, "Comp 01", "Shape Layer 1", layerFacts{ID: 76, Out: 31, Bounds: &renderer.Bounds{Left: 175.5, Top: 428}, Estimated: true})
	switches := in.Compositions[0].Layers[0].Data["switches"].(map[string]bool)
	if !switches["null"] || !switches["visible"] || switches["adjustment"] {
		t.Errorf("switches of the null layer %v", switches)
	}
	in, err = inspectFile(t, renderer.TemplateAEP, filepath.Join(fixtures, "templates", "nexrender_1layer.aep"))
	if err != nil {
		t.Fatal(err)
	}
	// An empty text draws nothing: a point at its origin, the composition's centre.
	checkLayer(t, in, "testcomp1", "<empty text layer>", layerFacts{ID: 12, Out: 30, Bounds: &renderer.Bounds{Left: 960, Top: 540}})
}

// TestAfterEffectsBoundsFromTheTransformGroup: the Transform group's anchor, position, scale and
// rotation, as After Effects writes them (cdat doubles; scale 1 is 100%), place a layer, then
// its parent's place it further; where the file cannot say it at time 0 (keyframes, an
// expression, split dimensions, a 3D layer), the source is placed as After Effects places a new
// layer, at the composition's centre, and the bounds are marked estimated.
func TestAfterEffectsBoundsFromTheTransformGroup(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(fixtures, "templates", "boltframe_Item-01.aep"))
	if err != nil {
		t.Fatal(err)
	}
	property := func(name string, kids ...*chunk) []*chunk {
		return []*chunk{{id: "tdmn", data: append([]byte(name), make([]byte, 40-len(name))...)}, {id: "tdbs", list: true, kids: kids}}
	}
	cdat := func(values ...float64) *chunk {
		c := &chunk{id: "cdat"}
		for _, v := range values {
			c.data = binary.BigEndian.AppendUint64(c.data, math.Float64bits(v))
		}
		return c
	}
	centred := &renderer.Bounds{Left: 125.5, Top: 378, Width: 100, Height: 100}
	cases := []struct {
		name   string
		props  []*chunk
		parent bool
		threeD bool
		want   *renderer.Bounds
		// estimated: the transform was not read.
		estimated bool
	}{
		{name: "moved and stretched", props: slices.Concat(property("ADBE Anchor Point", cdat(0, 0, 0)),
			property("ADBE Position", cdat(10, 20, 0)), property("ADBE Scale", cdat(2, 1, 1))),
			want: &renderer.Bounds{Left: 10, Top: 20, Width: 200, Height: 100}},
		{name: "turned a quarter about its centre", props: slices.Concat(property("ADBE Position", cdat(100, 100, 0)),
			property("ADBE Scale", cdat(2, 0.5, 1)), property("ADBE Rotate Z", cdat(90))),
			want: &renderer.Bounds{Left: 75, Top: 0, Width: 50, Height: 200}},
		{name: "under a parent at the composition's centre", props: property("ADBE Position", cdat(0, 0, 0)), parent: true,
			want: &renderer.Bounds{Left: 125.5, Top: 378, Width: 100, Height: 100}},
		{name: "keyframed", props: property("ADBE Position", cdat(1, 2, 0), &chunk{id: "list", list: true}), want: centred, estimated: true},
		{name: "driven by an expression", props: property("ADBE Position", cdat(1, 2, 0), &chunk{id: "Utf8", data: []byte("wiggle(2, 5)")}),
			want: centred, estimated: true},
		{name: "split dimensions", props: property("ADBE Position_0", cdat(300)), want: centred, estimated: true},
		{name: "three-dimensional", props: property("ADBE Position", cdat(1, 2, 0)), threeD: true, want: centred, estimated: true},
	}
	for _, tc := range cases {
		root, err := parseRIFX(data)
		if err != nil {
			t.Fatal(err)
		}
		null := layerWithID(root, 79) // Null 1
		group := propertyNamed(null.child("tdgp"), "ADBE Transform Group")
		group.kids = append(tc.props, group.kids...)
		ldta := null.child("ldta")
		if tc.parent {
			binary.BigEndian.PutUint32(ldta.data[132:136], 76) // Shape Layer 1: anchor 0, at the centre
		}
		if tc.threeD {
			ldta.data[38] |= 0x04
		}
		in, err := inspectProject(root)
		if err != nil {
			t.Fatal(err)
		}
		null1 := in.Composition("Comp 01").Layer("Null 1")
		got, _ := json.Marshal(null1.Bounds)
		want, _ := json.Marshal(tc.want)
		if estimated, _ := null1.Data["boundsEstimated"].(bool); string(got) != string(want) || estimated != tc.estimated {
			t.Errorf("%s: bounds %s (estimated %v), want %s (estimated %v)", tc.name, got, estimated, want, tc.estimated)
		}
	}
}

// layerWithID finds a layer of a project tree by its id.
func layerWithID(c *chunk, id uint32) *chunk {
	if ldta := c.child("ldta"); c.id == "Layr" && c.list && ldta != nil && binary.BigEndian.Uint32(ldta.data[0:4]) == id {
		return c
	}
	for _, k := range c.kids {
		if found := layerWithID(k, id); found != nil {
			return found
		}
	}
	return nil
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
	// A text whose glyphs the export does not carry: its width estimated.
	checkLayer(t, in, "Card", "Title", layerFacts{ID: 1, Out: 1, Bounds: &renderer.Bounds{Left: 61.5, Top: 39.868, Width: 77, Height: 28}, Estimated: true})
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
	// A parent loop and an unreadable position: the source at the composition's centre.
	checkLayer(t, in, "main", "Loop", layerFacts{ID: 7, Parent: 8, Source: "solid", Out: 1, Bounds: &renderer.Bounds{Left: 190, Top: 195, Width: 20, Height: 10}, Estimated: true})
	checkLayer(t, in, "main", "Odd", layerFacts{ID: 9, Source: "solid", Out: 1, Bounds: &renderer.Bounds{Left: 190, Top: 195, Width: 20, Height: 10}, Estimated: true})
}

// TestLottieTextAndShapeBounds: a text's box from its glyphs' advances in the export's chars,
// its size, justification and font ascent; a paragraph text's box; a shape layer's box from its
// groups, rectangles, ellipses, paths and strokes.
func TestLottieTextAndShapeBounds(t *testing.T) {
	doc := []byte(`{"fr":25,"ip":0,"op":25,"w":400,"h":400,
	 "fonts":{"list":[{"fName":"Sans-Bold","fFamily":"Sans","fStyle":"Bold","ascent":80}]},
	 "chars":[{"ch":"H","fFamily":"Sans","style":"Bold","w":70},{"ch":"i","fFamily":"Sans","style":"Bold","w":30}],
	 "layers":[
	 {"ty":5,"nm":"Left","ind":1,"ip":0,"op":25,"st":0,"ks":{"p":{"a":0,"k":[100,100]}},
	  "t":{"d":{"k":[{"s":{"t":"Hi\rHi","s":50,"f":"Sans-Bold","j":0,"lh":60},"t":0}]}}},
	 {"ty":5,"nm":"Centre","ind":2,"ip":0,"op":25,"st":0,"ks":{"p":{"a":0,"k":[200,300]}},
	  "t":{"d":{"k":[{"s":{"t":"Hi","s":100,"f":"Sans-Bold","j":2},"t":0}]}}},
	 {"ty":5,"nm":"Box","ind":3,"ip":0,"op":25,"st":0,"ks":{"p":{"a":0,"k":[10,10]}},
	  "t":{"d":{"k":[{"s":{"t":"Hi","s":20,"f":"Sans-Bold","sz":[150,40],"ps":[-5,-15]},"t":0}]}}},
	 {"ty":4,"nm":"Shapes","ind":4,"ip":0,"op":25,"st":0,"ks":{"p":{"a":0,"k":[0,0]}},"shapes":[
	  {"ty":"gr","it":[{"ty":"rc","p":{"a":0,"k":[50,50]},"s":{"a":0,"k":[20,10]}},{"ty":"st","w":{"a":0,"k":4}},
	    {"ty":"tr","p":{"a":0,"k":[100,0]},"a":{"a":0,"k":[0,0]},"s":{"a":0,"k":[100,100]},"r":{"a":0,"k":0}}]},
	  {"ty":"sh","ks":{"a":0,"k":{"v":[[0,200],[40,220]],"i":[[0,0],[0,0]],"o":[[0,0],[0,30]]}}}]}]}`)
	in, err := inspectLottie(doc)
	if err != nil {
		t.Fatal(err)
	}
	// "Hi" is 70+30 = 100 at size 100: 50 wide at 50, two lines 60 apart, 40 above the first
	// baseline (ascent 80%), 10 below the last.
	checkLayer(t, in, "main", "Left", layerFacts{ID: 1, Out: 1, Bounds: &renderer.Bounds{Left: 100, Top: 60, Width: 50, Height: 110}})
	checkLayer(t, in, "main", "Centre", layerFacts{ID: 2, Out: 1, Bounds: &renderer.Bounds{Left: 150, Top: 220, Width: 100, Height: 100}})
	checkLayer(t, in, "main", "Box", layerFacts{ID: 3, Out: 1, Bounds: &renderer.Bounds{Left: 5, Top: -5, Width: 150, Height: 40}})
	// The rectangle spans 40..60 x 45..55, 2 more each side for the stroke, moved 100 right;
	// the path spans 0..40 x 200..250 with its tangent.
	checkLayer(t, in, "main", "Shapes", layerFacts{ID: 4, Out: 1, Bounds: &renderer.Bounds{Left: 0, Top: 43, Width: 162, Height: 207}})
}
