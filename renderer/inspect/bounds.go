package inspect

import (
	"encoding/json"
	"math"

	"github.com/framefarm/framefarm/renderer"
)

// maxParentDepth bounds how many parents a layer's transform follows; a loop in a hostile file
// ends there.
const maxParentDepth = 32

// affine is a 2D transform: x' = a*x + c*y + e, y' = b*x + d*y + f.
type affine struct{ a, b, c, d, e, f float64 }

func (m affine) apply(x, y float64) (float64, float64) {
	return m.a*x + m.c*y + m.e, m.b*x + m.d*y + m.f
}

// then is m followed by n.
func (m affine) then(n affine) affine {
	return affine{
		a: n.a*m.a + n.c*m.b, b: n.b*m.a + n.d*m.b,
		c: n.a*m.c + n.c*m.d, d: n.b*m.c + n.d*m.d,
		e: n.a*m.e + n.c*m.f + n.e, f: n.b*m.e + n.d*m.f + n.f,
	}
}

// lottieTransform is the part of a layer's ks that places it in 2D.
type lottieTransform struct {
	A json.RawMessage `json:"a"`
	P json.RawMessage `json:"p"`
	S json.RawMessage `json:"s"`
	R json.RawMessage `json:"r"`
}

// placement is a layer's 2D transform at time 0: scale in fractions, rotation in degrees.
type placement struct {
	anchor, position, scale [2]float64
	rotation                float64
}

// matrix moves the anchor to the origin, scales, rotates, and moves to the position.
func (p placement) matrix() affine {
	sin, cos := math.Sincos(p.rotation * math.Pi / 180)
	m := affine{a: 1, d: 1, e: -p.anchor[0], f: -p.anchor[1]}
	m = m.then(affine{a: p.scale[0], d: p.scale[1]})
	m = m.then(affine{a: cos, b: sin, c: -sin, d: cos})
	return m.then(affine{a: 1, d: 1, e: p.position[0], f: p.position[1]})
}

// layerMatrix is a Lottie layer's transform at time 0.
func layerMatrix(ks json.RawMessage) (affine, bool) {
	var t lottieTransform
	if len(ks) == 0 || json.Unmarshal(ks, &t) != nil {
		return affine{}, false
	}
	return t.matrix()
}

// matrix is the transform at time 0 (a shape group's tr has a layer's ks fields).
func (t lottieTransform) matrix() (affine, bool) {
	anchor, okA := propertyAtZero(t.A, []float64{0, 0})
	pos, okP := positionAtZero(t.P)
	scale, okS := propertyAtZero(t.S, []float64{100, 100})
	rot, okR := propertyAtZero(t.R, []float64{0})
	if !okA || !okP || !okS || !okR || len(anchor) < 2 || len(pos) < 2 || len(scale) < 2 || len(rot) < 1 {
		return affine{}, false
	}
	return placement{anchor: [2]float64{anchor[0], anchor[1]}, position: [2]float64{pos[0], pos[1]},
		scale: [2]float64{scale[0] / 100, scale[1] / 100}, rotation: rot[0]}.matrix(), true
}

// propertyAtZero is an animatable property's value at time 0: its value, or its first
// keyframe's (a property holds its first keyframe's value before it). Absent is def.
func propertyAtZero(raw json.RawMessage, def []float64) ([]float64, bool) {
	if len(raw) == 0 {
		return def, true
	}
	var p struct {
		A int             `json:"a"`
		K json.RawMessage `json:"k"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return nil, false
	}
	if p.A == 1 {
		var keys []struct {
			S json.RawMessage `json:"s"`
		}
		if json.Unmarshal(p.K, &keys) != nil || len(keys) == 0 {
			return nil, false
		}
		return numbers(keys[0].S)
	}
	return numbers(p.K)
}

// positionAtZero reads a position, joined or split into x and y.
func positionAtZero(raw json.RawMessage) ([]float64, bool) {
	var split struct {
		S bool            `json:"s"`
		X json.RawMessage `json:"x"`
		Y json.RawMessage `json:"y"`
	}
	if len(raw) > 0 && json.Unmarshal(raw, &split) == nil && split.S {
		x, okX := propertyAtZero(split.X, []float64{0})
		y, okY := propertyAtZero(split.Y, []float64{0})
		if !okX || !okY || len(x) < 1 || len(y) < 1 {
			return nil, false
		}
		return []float64{x[0], y[0]}, true
	}
	return propertyAtZero(raw, []float64{0, 0})
}

// numbers reads a number or an array of numbers.
func numbers(raw json.RawMessage) ([]float64, bool) {
	var one float64
	if json.Unmarshal(raw, &one) == nil {
		return []float64{one}, true
	}
	var many []float64
	if json.Unmarshal(raw, &many) == nil {
		return many, true
	}
	return nil, false
}

// placed is a layer's transform at time 0 (ok false when the file does not say it) and its
// parent's key, if it has one.
type placed[K comparable] struct {
	m      affine
	ok     bool
	parent *K
}

// box is what a layer draws in its own space, before its transform: a source's frame from
// (0, 0), a text's lines around their first baseline, a shape's paths.
type box struct{ x0, y0, x1, y1 float64 }

// sourceBox is the frame of a w x h source.
func sourceBox(w, h float64) box { return box{0, 0, w, h} }

// union is the box holding b and o.
func (b box) union(o box) box {
	return box{math.Min(b.x0, o.x0), math.Min(b.y0, o.y0), math.Max(b.x1, o.x1), math.Max(b.y1, o.y1)}
}

// through is the axis-aligned box holding b moved by m.
func (b box) through(m affine) box {
	out := box{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
	for _, corner := range [][2]float64{{b.x0, b.y0}, {b.x1, b.y0}, {b.x0, b.y1}, {b.x1, b.y1}} {
		x, y := m.apply(corner[0], corner[1])
		out = out.union(box{x, y, x, y})
	}
	return out
}

// boundsAtZero is the box b covers in its composition at time 0, through the layer's own
// transform and its parents' (from layers). Nil when one of them cannot be read.
func boundsAtZero[K comparable](own placed[K], layers map[K]placed[K], b box) *renderer.Bounds {
	at, found := own, true
	m := at.m
	for depth := 0; found && at.ok && at.parent != nil; depth++ {
		if depth == maxParentDepth {
			return nil
		}
		if at, found = layers[*at.parent]; found && at.ok {
			m = m.then(at.m)
		}
	}
	if !found || !at.ok {
		return nil
	}
	return b.through(m).bounds()
}

// bounds is b in composition pixels; nil when it is not a box of numbers.
func (b box) bounds() *renderer.Bounds {
	out := &renderer.Bounds{Left: round(b.x0, 3), Top: round(b.y0, 3), Width: round(b.x1-b.x0, 3), Height: round(b.y1-b.y0, 3)}
	for _, v := range []float64{out.Left, out.Top, out.Width, out.Height} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
	}
	return out
}

// placeLayer gives a layer its bounds at time 0: b through its transforms when they can be read,
// else b centred in its composition, where After Effects places a new layer. Every layer gets
// numbers (the interface's layers always have them); estimated says the box is not the file's
// own (widths of glyphs not in it, a shape whose paths are not read, a transform not read), and
// is kept in the layer's data as boundsEstimated.
func placeLayer[K comparable](l *renderer.Layer, own placed[K], layers map[K]placed[K], b box, compW, compH float64, estimated bool) {
	l.Bounds = boundsAtZero(own, layers, b)
	if l.Bounds == nil {
		w, h := b.x1-b.x0, b.y1-b.y0
		if l.Bounds = (box{(compW - w) / 2, (compH - h) / 2, (compW + w) / 2, (compH + h) / 2}).bounds(); l.Bounds == nil {
			l.Bounds = &renderer.Bounds{Left: round(compW/2, 3), Top: round(compH/2, 3)}
		}
		estimated = true
	}
	if estimated {
		if l.Data == nil {
			l.Data = map[string]any{}
		}
		l.Data["boundsEstimated"] = true
	}
}
