package inspect

import (
	"encoding/json"
	"math"
	"strings"
)

// textLayout is what a text layer's box is made of.
type textLayout struct {
	text string  // its lines, separated by \n or \r
	size float64 // font size, in pixels
	// leading is the distance between baselines (0: 1.2 times the size); ascent the part of the
	// size above the baseline (0: 0.75).
	leading, ascent float64
	justify         int // 0 left, 1 right, 2 centre (Lottie's j; the rest read as left)
	// paragraph is a paragraph text's box, which is its bounds.
	paragraph *box
	// advance is a glyph's advance at size 100, false when the file does not give it.
	advance func(r rune) (float64, bool)
}

// averageAdvance is the advance taken, at size 100, for a glyph the file gives no width of:
// about a Latin text's average.
const averageAdvance = 55.0

// box is where the text draws in its layer's space, its first baseline at y 0, and whether the
// file gave every glyph's width.
func (t textLayout) box() (box, bool) {
	if t.paragraph != nil {
		return *t.paragraph, true
	}
	leading, ascent := t.leading, t.ascent
	if leading <= 0 {
		leading = 1.2 * t.size
	}
	if ascent <= 0 || ascent > 1 {
		ascent = 0.75
	}
	lines := strings.Split(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(t.text), "\n")
	if strings.TrimSpace(t.text) == "" || t.size <= 0 {
		return box{}, true
	}
	exact := true
	out := box{math.Inf(1), -ascent * t.size, math.Inf(-1), float64(len(lines)-1)*leading + (1-ascent)*t.size}
	for _, line := range lines {
		width := 0.0
		for _, r := range line {
			a, ok := 0.0, false
			if t.advance != nil {
				a, ok = t.advance(r)
			}
			if !ok {
				a, exact = averageAdvance, false
			}
			width += a * t.size / 100
		}
		x0 := 0.0
		switch t.justify {
		case 1:
			x0 = -width
		case 2:
			x0 = -width / 2
		}
		out.x0, out.x1 = math.Min(out.x0, x0), math.Max(out.x1, x0+width)
	}
	return out, exact
}

// lottieShape is one item of a Lottie shape layer's shapes, or of a group's items.
type lottieShape struct {
	Ty string          `json:"ty"`
	Hd bool            `json:"hd"`
	It json.RawMessage `json:"it"`
	// P and S place rectangles and ellipses (their centre and size); Or is a star's outer
	// radius; Ks a path's vertices; W a stroke's width; A, P, S, R a group's transform (tr).
	P  json.RawMessage `json:"p"`
	S  json.RawMessage `json:"s"`
	Or json.RawMessage `json:"or"`
	Ks json.RawMessage `json:"ks"`
	W  json.RawMessage `json:"w"`
	A  json.RawMessage `json:"a"`
	R  json.RawMessage `json:"r"`
}

// lottiePath is a path's vertices and their tangents, relative to them.
type lottiePath struct {
	V [][]float64 `json:"v"`
	I [][]float64 `json:"i"`
	O [][]float64 `json:"o"`
}

// shapesBox is the box a list of shape items draws at time 0, whether it draws anything, and
// whether every item that moves the box was read (a repeater, a path keyframed oddly are not).
func shapesBox(raw json.RawMessage, depth int) (out box, drawn, exact bool) {
	var items []lottieShape
	if len(raw) == 0 || depth > maxParentDepth || json.Unmarshal(raw, &items) != nil {
		return box{}, false, len(raw) == 0
	}
	out, exact = box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}, true
	add := func(b box) { out, drawn = out.union(b), true }
	stroke := 0.0
	transform, hasTransform := affine{a: 1, d: 1}, false
	for _, it := range items {
		if it.Hd {
			continue
		}
		switch it.Ty {
		case "gr":
			if b, ok, ex := shapesBox(it.It, depth+1); ok {
				add(b)
				exact = exact && ex
			}
		case "rc", "el":
			centre, okP := propertyAtZero(it.P, []float64{0, 0})
			size, okS := propertyAtZero(it.S, []float64{0, 0})
			if !okP || !okS || len(centre) < 2 || len(size) < 2 {
				exact = false
				continue
			}
			add(box{centre[0] - size[0]/2, centre[1] - size[1]/2, centre[0] + size[0]/2, centre[1] + size[1]/2})
		case "sr":
			centre, okP := propertyAtZero(it.P, []float64{0, 0})
			radius, okR := propertyAtZero(it.Or, []float64{0})
			if !okP || !okR || len(centre) < 2 || len(radius) < 1 {
				exact = false
				continue
			}
			add(box{centre[0] - radius[0], centre[1] - radius[0], centre[0] + radius[0], centre[1] + radius[0]})
		case "sh":
			if b, ok := pathBox(it.Ks); ok {
				add(b)
			} else {
				exact = false
			}
		case "st":
			if w, ok := propertyAtZero(it.W, []float64{0}); ok && len(w) > 0 {
				stroke = math.Max(stroke, w[0])
			}
		case "tr":
			m, ok := lottieTransform{A: it.A, P: it.P, S: it.S, R: it.R}.matrix()
			transform, hasTransform, exact = m, ok, exact && ok
		case "rp":
			exact = false // a repeater's copies are not placed
		}
	}
	if !drawn {
		return box{}, false, exact
	}
	out = box{out.x0 - stroke/2, out.y0 - stroke/2, out.x1 + stroke/2, out.y1 + stroke/2}
	if hasTransform {
		out = out.through(transform)
	}
	return out, true, exact
}

// pathBox is the box of a path at time 0: its vertices and their tangents' ends, which hold
// the curves between them.
func pathBox(raw json.RawMessage) (box, bool) {
	var prop struct {
		A int             `json:"a"`
		K json.RawMessage `json:"k"`
	}
	if json.Unmarshal(raw, &prop) != nil {
		return box{}, false
	}
	var path lottiePath
	if prop.A == 1 {
		var keys []struct {
			S []lottiePath `json:"s"`
		}
		if json.Unmarshal(prop.K, &keys) != nil || len(keys) == 0 || len(keys[0].S) == 0 {
			return box{}, false
		}
		path = keys[0].S[0]
	} else if json.Unmarshal(prop.K, &path) != nil {
		return box{}, false
	}
	out, found := box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}, false
	for i, v := range path.V {
		if len(v) < 2 {
			return box{}, false
		}
		out, found = out.union(box{v[0], v[1], v[0], v[1]}), true
		for _, tangents := range [][][]float64{path.I, path.O} {
			if i < len(tangents) && len(tangents[i]) >= 2 {
				x, y := v[0]+tangents[i][0], v[1]+tangents[i][1]
				out = out.union(box{x, y, x, y})
			}
		}
	}
	return out, found
}
