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

// boundsAtZero is the box a w x h source covers in its composition at time 0, through the
// layer's own transform and its parents' (from layers). Nil when one of them cannot be read.
func boundsAtZero[K comparable](own placed[K], layers map[K]placed[K], w, h float64) *renderer.Bounds {
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
	minX, minY, maxX, maxY := math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)
	for _, corner := range [][2]float64{{0, 0}, {w, 0}, {0, h}, {w, h}} {
		x, y := m.apply(corner[0], corner[1])
		minX, minY, maxX, maxY = math.Min(minX, x), math.Min(minY, y), math.Max(maxX, x), math.Max(maxY, y)
	}
	b := &renderer.Bounds{Left: round(minX, 3), Top: round(minY, 3), Width: round(maxX-minX, 3), Height: round(maxY-minY, 3)}
	for _, v := range []float64{b.Left, b.Top, b.Width, b.Height} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
	}
	return b
}
