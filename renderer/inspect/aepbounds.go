package inspect

import (
	"encoding/binary"
	"math"

	"github.com/framefarm/framefarm/renderer"
)

// sourceSize is the size of what an item shows: a composition's frame, or a footage item's
// (files, solids and the solids behind null layers) from its sspc.
func (it *aepItem) sourceSize() (w, h float64, ok bool) {
	switch it.kind {
	case itemComposition:
		if c := it.node.child("cdta"); c != nil && len(c.data) >= 144 {
			w, h := binary.BigEndian.Uint16(c.data[140:142]), binary.BigEndian.Uint16(c.data[142:144])
			return float64(w), float64(h), w > 0 && h > 0
		}
	case itemFootage:
		if pin := it.node.child("Pin "); pin != nil {
			if s := pin.child("sspc"); s != nil && len(s.data) >= 38 {
				w, h := binary.BigEndian.Uint16(s.data[32:34]), binary.BigEndian.Uint16(s.data[36:38])
				return float64(w), float64(h), w > 0 && h > 0
			}
		}
	}
	return 0, 0, false
}

// aepPlacement reads a 2D layer's transform at time 0 from its Transform group. A property the
// file does not hold has the value After Effects gives a new layer: the anchor at the centre of
// the source (the layer's own origin when it has none), the position at the centre of the
// composition, scale 100%, no rotation. An animated property, one driven by an expression, or a
// position split into dimensions is not read: ok is false and the layer gets no bounds.
func aepPlacement(layer *chunk, anchor, position [2]float64) (p placement, ok bool) {
	p = placement{anchor: anchor, position: position, scale: [2]float64{1, 1}}
	top := layer.child("tdgp")
	if top == nil {
		return p, false
	}
	group := propertyNamed(top, "ADBE Transform Group")
	if group == nil {
		return p, false
	}
	ok = true
	eachProperty(group, func(name string, value *chunk) {
		var v []float64
		switch name {
		case "ADBE Anchor Point", "ADBE Position", "ADBE Scale", "ADBE Rotate Z", "ADBE Position_0", "ADBE Position_1":
			var static bool
			if v, static = staticValue(value); !static || len(v) < 1 {
				ok = false
				return
			}
		default:
			return
		}
		switch {
		case name == "ADBE Position_0" || name == "ADBE Position_1":
			// Kept at 0 while the position is joined; a value means the dimensions are split.
			ok = ok && v[0] == 0
		case name == "ADBE Rotate Z":
			p.rotation = v[0]
		case len(v) < 2:
			ok = false
		case name == "ADBE Anchor Point":
			p.anchor = [2]float64{v[0], v[1]}
		case name == "ADBE Position":
			p.position = [2]float64{v[0], v[1]}
		case name == "ADBE Scale":
			p.scale = [2]float64{v[0], v[1]}
		}
	})
	for _, v := range []float64{p.anchor[0], p.anchor[1], p.position[0], p.position[1], p.scale[0], p.scale[1], p.rotation} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return p, false
		}
	}
	return p, ok
}

// eachProperty calls fn with each property of a group: a match name (tdmn) and the list after it.
func eachProperty(group *chunk, fn func(name string, value *chunk)) {
	name := ""
	for _, k := range group.kids {
		switch {
		case k.id == "tdmn":
			name = cString(k.data)
		case k.list && name != "":
			fn(name, k)
			name = ""
		}
	}
}

// propertyNamed is the property with the match name in a group.
func propertyNamed(group *chunk, match string) (found *chunk) {
	eachProperty(group, func(name string, value *chunk) {
		if found == nil && name == match {
			found = value
		}
	})
	return found
}

// staticValue is a property's value (cdat: big-endian doubles) when it has no keyframes (a list)
// and no expression (a Utf8 of its own).
func staticValue(prop *chunk) ([]float64, bool) {
	if prop.id != "tdbs" || prop.child("Utf8") != nil {
		return nil, false
	}
	if keys := prop.child("list"); keys != nil && keys.list {
		return nil, false
	}
	cdat := prop.child("cdat")
	if cdat == nil {
		return nil, false
	}
	values := make([]float64, 0, len(cdat.data)/8)
	for i := 0; i+8 <= len(cdat.data) && len(values) < 4; i += 8 {
		values = append(values, math.Float64frombits(binary.BigEndian.Uint64(cdat.data[i:])))
	}
	return values, true
}

// aepBounds gives each layer its box at time 0, through its parents' transforms: a source's
// frame, a text's lines (glyph widths estimated: a project holds no font), a point for what
// draws nothing or is not read (a shape layer's paths).
func aepBounds(comp *renderer.Composition, nodes []*chunk, sources []*aepItem) {
	compCentre := [2]float64{float64(comp.Width) / 2, float64(comp.Height) / 2}
	byID := make(map[int]placed[int], len(comp.Layers))
	own := make([]placed[int], len(comp.Layers))
	for i, l := range comp.Layers {
		var anchor [2]float64
		if src := sources[i]; src != nil {
			if w, h, ok := src.sourceSize(); ok {
				anchor = [2]float64{w / 2, h / 2}
			}
		}
		p, ok := aepPlacement(nodes[i], anchor, compCentre)
		switches, _ := l.Data["switches"].(map[string]bool)
		ok = ok && !switches["threeD"] && l.Type != "camera" && l.Type != "light"
		own[i] = placed[int]{m: p.matrix(), ok: ok, parent: l.ParentID}
		byID[l.ID] = own[i]
	}
	for i := range comp.Layers {
		l := &comp.Layers[i]
		drawn, exact := box{}, true
		switch {
		case l.Type == "text":
			size, _ := l.Data["fontSize"].(float64)
			leading, _ := l.Data["leading"].(float64)
			drawn, exact = textLayout{text: l.Text, size: size, leading: leading}.box()
		case l.Type == "shape":
			exact = false
		case sources[i] != nil && l.Type != "audio":
			if w, h, ok := sources[i].sourceSize(); ok {
				drawn = sourceBox(w, h)
			}
		}
		placeLayer(l, own[i], byID, drawn, float64(comp.Width), float64(comp.Height), !exact)
	}
}
