package inspect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/framefarm/framefarm/renderer"
)

// LottieDoc is the part of a Lottie (Bodymovin) JSON export that inspection reads.
type LottieDoc struct {
	V      string        `json:"v"`
	Nm     string        `json:"nm"`
	Fr     float64       `json:"fr"`
	Ip     float64       `json:"ip"`
	Op     float64       `json:"op"`
	W      float64       `json:"w"`
	H      float64       `json:"h"`
	Layers []lottieLayer `json:"layers"`
	Assets []lottieAsset `json:"assets"`
	Fonts  struct {
		List []lottieFont `json:"list"`
	} `json:"fonts"`
	// Chars are the glyphs the export carries for its texts, with their advances.
	Chars []lottieChar `json:"chars"`
}

// lottieFont is a font the export's texts name (by fName).
type lottieFont struct {
	FName   string `json:"fName"`
	FFamily string `json:"fFamily"`
	FStyle  string `json:"fStyle"`
	FPath   string `json:"fPath"`
	// Ascent is the part of the size above the baseline, in percent.
	Ascent float64 `json:"ascent"`
}

// lottieChar is a glyph of a font, its advance W at size 100.
type lottieChar struct {
	Ch      string  `json:"ch"`
	FFamily string  `json:"fFamily"`
	Style   string  `json:"style"`
	W       float64 `json:"w"`
}

type lottieAsset struct {
	ID     string        `json:"id"`
	Nm     string        `json:"nm"`
	U      string        `json:"u"`
	P      string        `json:"p"`
	W      float64       `json:"w"`
	H      float64       `json:"h"`
	Layers []lottieLayer `json:"layers"`
}

type lottieLayer struct {
	Ty     int             `json:"ty"`
	Nm     string          `json:"nm"`
	Ind    *int            `json:"ind"`
	Parent *int            `json:"parent"`
	RefID  string          `json:"refId"`
	Ip     float64         `json:"ip"`
	Op     float64         `json:"op"`
	St     float64         `json:"st"`
	W      float64         `json:"w"`
	H      float64         `json:"h"`
	Sw     float64         `json:"sw"`
	Sh     float64         `json:"sh"`
	Hd     bool            `json:"hd"`
	Ddd    int             `json:"ddd"`
	Tt     int             `json:"tt"`
	Ks     json.RawMessage `json:"ks"`
	Shapes json.RawMessage `json:"shapes"`
	T      *struct {
		D struct {
			K []struct {
				S lottieTextDocument `json:"s"`
			} `json:"k"`
		} `json:"d"`
	} `json:"t"`
}

// lottieTextDocument is a text layer's text and style at its first keyframe.
type lottieTextDocument struct {
	T  string    `json:"t"`
	S  float64   `json:"s"`  // size
	F  string    `json:"f"`  // the font's fName
	J  int       `json:"j"`  // justification
	Lh float64   `json:"lh"` // line height
	Sz []float64 `json:"sz"` // a paragraph text's box size
	Ps []float64 `json:"ps"` // and its position
}

// Lottie layer types (ty) and the kinds inspection reports for them.
var lottieKinds = map[int]string{
	0: "precomp", 1: "solid", 2: "image", 3: "null", 4: "shape", 5: "text", 6: "audio",
	9: "video", 12: "adjustment", 13: "camera", 14: "light",
}

// ParseLottie reads a Lottie export and checks it is one.
// MaxLottieSide caps a Lottie composition's width and height (8K is 7680 wide): a frame is
// width*height*4 bytes in the renderer, the pipe and ffmpeg.
const MaxLottieSide = 8192

func ParseLottie(b []byte) (*LottieDoc, error) {
	var doc LottieDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("the Lottie JSON cannot be read: %w", err)
	}
	switch {
	case doc.Layers == nil:
		return nil, errors.New("the JSON is not a Lottie export: it has no layers")
	case doc.Fr <= 0 || doc.Fr > 1000 || math.IsNaN(doc.Fr):
		return nil, fmt.Errorf("the Lottie export has an invalid frame rate %v", doc.Fr)
	case doc.W < 1 || doc.H < 1 || doc.W > MaxLottieSide || doc.H > MaxLottieSide:
		return nil, fmt.Errorf("the Lottie export has an invalid size %vx%v (1 to %d pixels a side)", doc.W, doc.H, MaxLottieSide)
	case doc.Op <= doc.Ip:
		return nil, fmt.Errorf("the Lottie export ends (op %v) before it starts (ip %v)", doc.Op, doc.Ip)
	}
	return &doc, nil
}

// inspectLottie lists a Lottie export's compositions: the root animation, named by nm, then each
// precomp asset.
func inspectLottie(b []byte) (*renderer.Inspection, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // an editor on Windows may begin the file with one
	doc, err := ParseLottie(b)
	if err != nil {
		return nil, err
	}
	if err := checkLottiePaths(doc); err != nil {
		return nil, err
	}
	duration := round((doc.Op-doc.Ip)/doc.Fr, 3)
	name := doc.Nm
	if name == "" {
		name = "main"
	}
	in := &renderer.Inspection{Engines: []string{renderer.EngineLottie}}
	// Compositions are numbered 1 (the root) then 2, 3, ... for precomp assets in order, so a
	// precomp layer can name the composition it shows.
	ids := map[string]int{}
	for _, a := range doc.Assets {
		if a.Layers != nil {
			ids[a.ID] = len(ids) + 2
		}
	}
	sizes := map[string][2]float64{}
	for _, a := range doc.Assets {
		sizes[a.ID] = [2]float64{a.W, a.H}
	}
	lc := lottieComps{ids: ids, sizes: sizes, fps: doc.Fr, fonts: map[string]lottieFont{}, chars: map[[3]string]float64{}}
	for _, f := range doc.Fonts.List {
		lc.fonts[f.FName] = f
	}
	for _, c := range doc.Chars {
		lc.chars[[3]string{c.Ch, c.FFamily, c.Style}] = c.W
	}
	in.Compositions = append(in.Compositions, lc.composition(1, name, doc.W, doc.H, duration, doc.Layers))
	for _, a := range doc.Assets {
		if a.Layers == nil {
			continue // an image or data asset
		}
		w, h := a.W, a.H
		if w < 1 || h < 1 {
			w, h = doc.W, doc.H
		}
		comp := lc.composition(ids[a.ID], LottiePrecompName(a.Nm, a.ID, name), w, h, duration, a.Layers)
		comp.Data = map[string]any{"refId": a.ID}
		in.Compositions = append(in.Compositions, comp)
	}
	for _, f := range doc.Fonts.List {
		family := f.FFamily
		if family == "" {
			family = f.FName
		}
		if family != "" && !slices.Contains(in.Fonts, family) {
			in.Fonts = append(in.Fonts, family)
		}
	}
	return in, nil
}

// LottiePrecompName is the composition name of a precomp asset: its name, or its id when it has
// none or shares the root animation's name.
func LottiePrecompName(nm, id, rootName string) string {
	if nm == "" || nm == rootName {
		return id
	}
	return nm
}

// lottieComps is what every composition of one export shares.
type lottieComps struct {
	ids   map[string]int        // composition ids of precomp assets
	sizes map[string][2]float64 // sizes of assets
	fps   float64
	fonts map[string]lottieFont // by fName
	chars map[[3]string]float64 // glyph advances by character, family and style
}

// Lottie layer types (ty) that show a source, and its kind.
var lottieSources = map[int]string{0: "composition", 1: "solid", 2: "image", 6: "audio", 9: "video"}

func (lc lottieComps) composition(id int, name string, w, h, duration float64, layers []lottieLayer) renderer.Composition {
	comp := renderer.Composition{ID: id, Name: name, Width: int(w), Height: int(h), FPS: round(lc.fps, 3), Duration: duration, Layers: []renderer.Layer{}}
	byInd := map[int]placed[int]{}
	for _, l := range layers {
		if l.Ind != nil {
			m, ok := layerMatrix(l.Ks)
			byInd[*l.Ind] = placed[int]{m: m, ok: ok, parent: l.Parent}
		}
	}
	for i := range layers {
		l := &layers[i]
		kind, ok := lottieKinds[l.Ty]
		if !ok {
			kind = "footage"
		}
		layer := renderer.Layer{
			Index: i + 1, ID: i + 1, Name: l.Nm, Type: kind, SourceType: lottieSources[l.Ty], ParentID: l.Parent,
			StartTime: round(l.St/lc.fps, 3), InPoint: round(l.Ip/lc.fps, 3), OutPoint: round(l.Op/lc.fps, 3),
			Data: map[string]any{"hidden": l.Hd, "threeD": l.Ddd == 1, "matteMode": l.Tt},
		}
		if l.Ind != nil {
			layer.ID = *l.Ind
		}
		if l.RefID != "" {
			layer.Data["refId"] = l.RefID
			if cid, ok := lc.ids[l.RefID]; ok && l.Ty == 0 {
				layer.SourceCompID = &cid
			}
		}
		if l.T != nil && len(l.T.D.K) > 0 {
			layer.Text = l.T.D.K[0].S.T
		}
		drawn, exact := lc.drawnBox(l)
		m, ok := layerMatrix(l.Ks)
		placeLayer(&layer, placed[int]{m: m, ok: ok, parent: l.Parent}, byInd, drawn, w, h, !exact)
		comp.Layers = append(comp.Layers, layer)
	}
	return comp
}

// drawnBox is what a layer draws in its own space, and whether the export says it exactly: a
// source's frame, a text's lines (glyph widths from the export's chars), a shape's paths; a
// layer that draws nothing (a null, a sound) is a point at its origin.
func (lc lottieComps) drawnBox(l *lottieLayer) (box, bool) {
	if w, h, ok := lc.sourceSize(l); ok {
		return sourceBox(w, h), true
	}
	switch l.Ty {
	case 4:
		b, drawn, exact := shapesBox(l.Shapes, 0)
		return b, drawn && exact
	case 5:
		if l.T == nil || len(l.T.D.K) == 0 {
			return box{}, false
		}
		doc := l.T.D.K[0].S
		font := lc.fonts[doc.F]
		layout := textLayout{text: doc.T, size: doc.S, leading: doc.Lh, justify: doc.J, ascent: font.Ascent / 100,
			advance: func(r rune) (float64, bool) {
				w, ok := lc.chars[[3]string{string(r), font.FFamily, font.FStyle}]
				return w, ok
			}}
		if len(doc.Sz) >= 2 && len(doc.Ps) >= 2 {
			layout.paragraph = &box{doc.Ps[0], doc.Ps[1], doc.Ps[0] + doc.Sz[0], doc.Ps[1] + doc.Sz[1]}
		}
		return layout.box()
	}
	return box{}, true
}

// sourceSize is the size of what a layer shows, when the export says it.
func (lc lottieComps) sourceSize(l *lottieLayer) (w, h float64, ok bool) {
	switch l.Ty {
	case 0:
		w, h = l.W, l.H
		if w < 1 || h < 1 {
			size := lc.sizes[l.RefID]
			w, h = size[0], size[1]
		}
	case 1:
		w, h = l.Sw, l.Sh
	case 2:
		size := lc.sizes[l.RefID]
		w, h = size[0], size[1]
	}
	return w, h, w >= 1 && h >= 1
}
