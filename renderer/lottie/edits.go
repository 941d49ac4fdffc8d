package lottie

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/renderer"
)

// DataProperties are the layer properties a data asset may set on this engine (case does not
// matter).
var DataProperties = []string{"Source Text", "Opacity", "Position", "Scale", "Rotation", "Fill Color"}

// Functions are the nx: functions this engine runs.
var Functions = []string{"nx:layer-remove", "nx:layer-state-set", "nx:text-params-set", "nx:solid-color-set",
	"nx:layer-start-set", "nx:layer-duration-set", "nx:comp-duration-set"}

// CheckError says which field of an asset the engine cannot take, and why.
type CheckError struct {
	Field string
	Err   error
}

func (e *CheckError) Error() string { return e.Field + ": " + e.Err.Error() }

// Check tells, before any render, whether this engine can apply an asset: its type, and for
// text, data and function assets their values and parameters. The same parsing applies the
// asset at render time, so what Check accepts renders. Layer and composition names are checked
// by the caller against the template's inspection.
func Check(a renderer.Asset) *CheckError {
	var err error
	field := "value"
	switch a.Type {
	case renderer.AssetText:
		_, err = parseLayerEdit(a)
	case renderer.AssetData:
		switch {
		case a.Expression != "":
			field = "expression"
		case !slices.ContainsFunc(DataProperties, func(p string) bool { return strings.EqualFold(p, a.Property) }):
			field = "property"
		}
		_, err = parseLayerEdit(a)
	case renderer.AssetFunction:
		field = "params"
		if !slices.Contains(Functions, a.Name) {
			field = "name"
		}
		_, err = parseFunction(a.Name, a.Params)
	case renderer.AssetEssential, renderer.AssetScript:
		field, err = "type", fmt.Errorf("%s assets are an After Effects feature; the lottie engine cannot apply them", a.Type)
	}
	if err != nil {
		return &CheckError{Field: field, Err: err}
	}
	return nil
}

// layerEdit changes one layer.
type layerEdit func(d *document, l obj, fonts fontSet) error

// parseLayerEdit reads a text or data asset into the edit it makes.
func parseLayerEdit(a renderer.Asset) (layerEdit, error) {
	if a.Type == renderer.AssetText {
		var text string
		if err := json.Unmarshal(a.Value, &text); err != nil {
			return nil, errors.New("value must be a string")
		}
		return func(d *document, l obj, fonts fontSet) error { return d.setText(l, text, fonts) }, nil
	}
	if a.Expression != "" {
		return nil, errors.New("expressions need After Effects; the lottie engine takes a value")
	}
	return parseData(a.Property, a.Value)
}

// parseData reads a data asset's property and value.
func parseData(property string, raw json.RawMessage) (layerEdit, error) {
	static := func(v any) obj { return obj{"a": 0, "k": v} }
	transform := func(key string, v any) layerEdit {
		return func(_ *document, l obj, _ fontSet) error {
			ks, _ := l["ks"].(obj)
			if ks == nil {
				return errors.New("the layer has no transform")
			}
			ks[key] = static(v)
			return nil
		}
	}
	switch strings.ToLower(property) {
	case "source text":
		var text string
		if json.Unmarshal(raw, &text) != nil {
			return nil, errors.New("Source Text needs a string")
		}
		return func(d *document, l obj, fonts fontSet) error { return d.setText(l, text, fonts) }, nil
	case "opacity", "rotation":
		var n float64
		if json.Unmarshal(raw, &n) != nil {
			return nil, fmt.Errorf("%s needs a number", property)
		}
		return transform(map[string]string{"opacity": "o", "rotation": "r"}[strings.ToLower(property)], n), nil
	case "position":
		var p []float64
		if json.Unmarshal(raw, &p) != nil || len(p) < 2 || len(p) > 3 {
			return nil, errors.New("Position needs [x, y] or [x, y, z]")
		}
		return transform("p", p), nil
	case "scale":
		var s []float64
		var n float64
		switch {
		case json.Unmarshal(raw, &n) == nil:
			s = []float64{n, n, 100}
		case json.Unmarshal(raw, &s) == nil && len(s) >= 2 && len(s) <= 3:
			s = append(s[:2], 100)
		default:
			return nil, errors.New("Scale needs a percentage or [x, y]")
		}
		return transform("s", s), nil
	case "fill color":
		rgb, err := parseColor(raw)
		if err != nil {
			return nil, err
		}
		return func(_ *document, l obj, _ fontSet) error { return setFill(l, rgb) }, nil
	}
	return nil, fmt.Errorf("the lottie engine cannot set %q; it sets %s", property, strings.Join(DataProperties, ", "))
}

// functionCall runs a checked function on the composition comp of a document.
type functionCall func(d *document, comp string) error

// parseFunction checks an nx: function and its params; params.layerName names one layer (arrays
// were expanded at creation).
func parseFunction(name string, raw json.RawMessage) (functionCall, error) {
	var p map[string]json.RawMessage
	if len(raw) > 0 && json.Unmarshal(raw, &p) != nil {
		return nil, errors.New("params must be an object")
	}
	var layerName string
	if _, ok := p["layerName"]; ok && json.Unmarshal(p["layerName"], &layerName) != nil {
		return nil, errors.New("params.layerName must be a layer name")
	}
	needLayer := func() error {
		if layerName == "" {
			return fmt.Errorf("%s needs params.layerName", name)
		}
		return nil
	}
	seconds := func(key string) (float64, error) {
		var n float64
		if err := json.Unmarshal(p[key], &n); err != nil {
			return 0, fmt.Errorf("params.%s must be a number of seconds", key)
		}
		return n, nil
	}
	onLayers := func(edit func(d *document, l obj) error) (functionCall, error) {
		if err := needLayer(); err != nil {
			return nil, err
		}
		return func(d *document, comp string) error {
			return d.eachLayer(comp, layerName, func(l obj) error { return edit(d, l) })
		}, nil
	}
	switch name {
	case "nx:layer-remove":
		if err := needLayer(); err != nil {
			return nil, err
		}
		return func(d *document, comp string) error {
			layers, set, err := d.layersOf(comp)
			if err != nil {
				return err
			}
			if _, err := d.layers(comp, layerName); err != nil {
				return err
			}
			set(slices.DeleteFunc(slices.Clone(layers), func(l any) bool { m, _ := l.(obj); return m["nm"] == layerName }))
			return nil
		}, nil
	case "nx:layer-state-set":
		var enabled bool
		if err := json.Unmarshal(p["enabled"], &enabled); err != nil {
			return nil, errors.New("params.enabled must be true or false")
		}
		return onLayers(func(_ *document, l obj) error { l["hd"] = !enabled; return nil })
	case "nx:text-params-set":
		set, err := parseTextParams(p)
		if err != nil {
			return nil, err
		}
		return onLayers(func(_ *document, l obj) error {
			docs, err := textDocuments(l)
			if err != nil {
				return err
			}
			for _, s := range docs {
				set(s)
			}
			return nil
		})
	case "nx:solid-color-set":
		c, err := parseColor(p["color"])
		if err != nil {
			return nil, fmt.Errorf("params.color: %w", err)
		}
		return onLayers(func(_ *document, l obj) error {
			if layerType(l) != layerSolid {
				return fmt.Errorf("it is a %s layer, not a solid", kindOf(l))
			}
			l["sc"] = colorHex(c)
			return nil
		})
	case "nx:layer-start-set":
		start, err := seconds("start")
		if err != nil {
			return nil, err
		}
		return onLayers(func(d *document, l obj) error {
			ip, _ := number(l["ip"])
			shift := start*d.fps - ip
			for _, k := range []string{"ip", "op", "st"} {
				v, _ := number(l[k])
				l[k] = v + shift
			}
			return nil
		})
	case "nx:layer-duration-set":
		duration, err := seconds("duration")
		if err != nil || duration <= 0 {
			return nil, errors.New("params.duration must be a number of seconds above 0")
		}
		return onLayers(func(d *document, l obj) error {
			ip, _ := number(l["ip"])
			l["op"] = ip + duration*d.fps
			return nil
		})
	case "nx:comp-duration-set":
		duration, err := seconds("duration")
		if err != nil || duration <= 0 {
			return nil, errors.New("params.duration must be a number of seconds above 0")
		}
		return func(d *document, _ string) error {
			ip, _ := number(d.root["ip"])
			d.root["op"] = ip + duration*d.fps
			return nil
		}, nil
	}
	return nil, fmt.Errorf("the lottie engine has no function %q; it runs %s", name, strings.Join(Functions, ", "))
}

// parseTextParams reads the text document fields nx:text-params-set sets: fontSize, font,
// fillColor, tracking, justification (left, right, center), lineHeight, text.
func parseTextParams(p map[string]json.RawMessage) (func(doc obj), error) {
	var sets []func(doc obj)
	for _, key := range slices.Sorted(maps.Keys(p)) {
		raw := p[key]
		var n float64
		var str string
		switch key {
		case "layerName":
		case "fontSize", "tracking", "lineHeight":
			if json.Unmarshal(raw, &n) != nil {
				return nil, fmt.Errorf("params.%s must be a number", key)
			}
			field := map[string]string{"fontSize": "s", "tracking": "tr", "lineHeight": "lh"}[key]
			sets = append(sets, func(doc obj) { doc[field] = n })
		case "font":
			if json.Unmarshal(raw, &str) != nil {
				return nil, errors.New("params.font must be a font name")
			}
			sets = append(sets, func(doc obj) { doc["f"] = str })
		case "text":
			if json.Unmarshal(raw, &str) != nil {
				return nil, errors.New("params.text must be a string")
			}
			text := strings.ReplaceAll(str, "\n", "\r")
			sets = append(sets, func(doc obj) { doc["t"] = text })
		case "fillColor":
			c, err := parseColor(raw)
			if err != nil {
				return nil, fmt.Errorf("params.fillColor: %w", err)
			}
			sets = append(sets, func(doc obj) { doc["fc"] = []float64{c[0], c[1], c[2]} })
		case "justification":
			j := map[string]int{"left": 0, "right": 1, "center": 2}
			if json.Unmarshal(raw, &str) != nil || !slices.Contains([]string{"left", "right", "center"}, str) {
				return nil, errors.New("params.justification must be left, right or center")
			}
			sets = append(sets, func(doc obj) { doc["j"] = j[str] })
		default:
			return nil, fmt.Errorf("params.%s is not a text parameter (fontSize, font, fillColor, tracking, justification, lineHeight, text)", key)
		}
	}
	return func(doc obj) {
		for _, set := range sets {
			set(doc)
		}
	}, nil
}

// LayerTypeFor is the layer type (as inspection names it) an asset type replaces on this engine,
// or "" when any layer will do.
func LayerTypeFor(assetType string) string {
	switch assetType {
	case renderer.AssetText:
		return "text"
	case renderer.AssetImage, renderer.AssetVideo, renderer.AssetJob:
		return "image"
	}
	return ""
}
