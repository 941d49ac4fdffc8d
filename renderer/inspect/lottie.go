package inspect

import (
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
		List []struct {
			FName   string `json:"fName"`
			FFamily string `json:"fFamily"`
			FPath   string `json:"fPath"`
		} `json:"list"`
	} `json:"fonts"`
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
	T      *struct {
		D struct {
			K []struct {
				S struct {
					T string `json:"t"`
				} `json:"s"`
			} `json:"k"`
		} `json:"d"`
	} `json:"t"`
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
	lc := lottieComps{ids: ids, sizes: sizes, fps: doc.Fr}
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
		if w, h, ok := lc.sourceSize(l); ok {
			m, ok := layerMatrix(l.Ks)
			layer.Bounds = boundsAtZero(placed[int]{m: m, ok: ok, parent: l.Parent}, byInd, w, h)
		}
		comp.Layers = append(comp.Layers, layer)
	}
	return comp
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
