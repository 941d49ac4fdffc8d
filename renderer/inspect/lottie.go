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
	Assets []struct {
		ID     string        `json:"id"`
		Nm     string        `json:"nm"`
		W      float64       `json:"w"`
		H      float64       `json:"h"`
		Layers []lottieLayer `json:"layers"`
	} `json:"assets"`
	Fonts struct {
		List []struct {
			FName   string `json:"fName"`
			FFamily string `json:"fFamily"`
		} `json:"list"`
	} `json:"fonts"`
}

type lottieLayer struct {
	Ty int    `json:"ty"`
	Nm string `json:"nm"`
	T  *struct {
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
	duration := round((doc.Op-doc.Ip)/doc.Fr, 3)
	name := doc.Nm
	if name == "" {
		name = "main"
	}
	in := &renderer.Inspection{Engines: []string{renderer.EngineLottie}}
	in.Compositions = append(in.Compositions, lottieComposition(name, doc.W, doc.H, doc.Fr, duration, doc.Layers))
	for _, a := range doc.Assets {
		if a.Layers == nil {
			continue // an image or data asset
		}
		w, h := a.W, a.H
		if w < 1 || h < 1 {
			w, h = doc.W, doc.H
		}
		in.Compositions = append(in.Compositions, lottieComposition(LottiePrecompName(a.Nm, a.ID, name), w, h, doc.Fr, duration, a.Layers))
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

func lottieComposition(name string, w, h, fps, duration float64, layers []lottieLayer) renderer.Composition {
	comp := renderer.Composition{Name: name, Width: int(w), Height: int(h), FPS: round(fps, 3), Duration: duration, Layers: []renderer.Layer{}}
	for i, l := range layers {
		kind, ok := lottieKinds[l.Ty]
		if !ok {
			kind = "footage"
		}
		layer := renderer.Layer{Index: i + 1, Name: l.Nm, Type: kind}
		if l.T != nil && len(l.T.D.K) > 0 {
			layer.Text = l.T.D.K[0].S.T
		}
		comp.Layers = append(comp.Layers, layer)
	}
	return comp
}
