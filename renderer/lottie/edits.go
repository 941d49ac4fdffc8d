package lottie

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/renderer"
)

// DataProperties are the layer properties a data asset may set on this engine (case does not
// matter).
var DataProperties = []string{"Source Text", "Opacity", "Position", "Scale", "Rotation", "Fill Color"}

// AssetRules are the Lottie engine's rules for the assets of a job, checked at its creation.
type AssetRules struct{}

var _ renderer.AssetRules = AssetRules{}

// CheckAsset tells, before any render, whether this engine can apply an asset: its type, and
// for text and data assets their values. The same parsing applies the asset at render time, so
// what it accepts renders. Function assets are checked by renderer.ParseFunction, layer and
// composition names by the caller against the template's inspection.
func (AssetRules) CheckAsset(a renderer.Asset) *renderer.AssetRefusal {
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
	case renderer.AssetEssential, renderer.AssetScript:
		field, err = "type", fmt.Errorf("%s assets are an After Effects feature; the lottie engine cannot apply them", a.Type)
	}
	if err != nil {
		return &renderer.AssetRefusal{Field: field, Err: err}
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
		rgb, err := renderer.ParseColor(raw)
		if err != nil {
			return nil, err
		}
		return func(_ *document, l obj, _ fontSet) error { return setFill(l, rgb) }, nil
	}
	return nil, fmt.Errorf("the lottie engine cannot set %q; it sets %s", property, strings.Join(DataProperties, ", "))
}

// function runs a checked function call on the composition comp of the document.
func (d *document) function(comp string, call *renderer.FunctionCall) error {
	onLayers := func(edit func(l obj) error) error { return d.eachLayer(comp, call.LayerName, edit) }
	switch call.Name {
	case "nx:layer-remove":
		if _, err := d.layers(comp, call.LayerName); err != nil {
			return err
		}
		scope, _ := renderer.Scope(d, d.name(), comp)
		for _, c := range scope {
			layers, set, _ := d.layersOf(c)
			set(slices.DeleteFunc(slices.Clone(layers), func(l any) bool { m, _ := l.(obj); return m["nm"] == call.LayerName }))
		}
		return nil
	case "nx:layer-state-set":
		return onLayers(func(l obj) error { l["hd"] = !call.Enabled; return nil })
	case "nx:text-params-set":
		return onLayers(func(l obj) error {
			docs, err := textDocuments(l)
			if err != nil {
				return err
			}
			for _, s := range docs {
				setTextParams(s, call.Text)
			}
			return nil
		})
	case "nx:solid-color-set":
		return onLayers(func(l obj) error {
			if layerType(l) != layerSolid {
				return fmt.Errorf("it is a %s layer, not a solid", kindOf(l))
			}
			l["sc"] = colorHex(call.Color)
			return nil
		})
	case "nx:layer-start-set":
		return onLayers(func(l obj) error {
			ip, _ := number(l["ip"])
			shift := call.Seconds*d.rate.FPS() - ip
			for _, k := range []string{"ip", "op", "st"} {
				v, _ := number(l[k])
				l[k] = v + shift
			}
			return nil
		})
	case "nx:layer-duration-set":
		return onLayers(func(l obj) error {
			ip, _ := number(l["ip"])
			l["op"] = ip + call.Seconds*d.rate.FPS()
			return nil
		})
	case "nx:comp-duration-set":
		ip, _ := number(d.root["ip"])
		d.root["op"] = ip + call.Seconds*d.rate.FPS()
		return nil
	}
	return fmt.Errorf("the lottie engine has no function %q", call.Name)
}

// setTextParams writes nx:text-params-set's fields into a Lottie text document.
func setTextParams(doc obj, t renderer.TextParams) {
	if t.FontSize != nil {
		doc["s"] = *t.FontSize
	}
	if t.Tracking != nil {
		doc["tr"] = *t.Tracking
	}
	if t.LineHeight != nil {
		doc["lh"] = *t.LineHeight
	}
	if t.Font != nil {
		doc["f"] = *t.Font
	}
	if t.Text != nil {
		doc["t"] = strings.ReplaceAll(*t.Text, "\n", "\r")
	}
	if c := t.FillColor; c != nil {
		doc["fc"] = []float64{c[0], c[1], c[2]}
	}
	if t.Justification != nil {
		doc["j"] = map[string]int{"left": 0, "right": 1, "center": 2}[*t.Justification]
	}
}

// LayerType is the layer type (as inspection names it) an asset type replaces on this engine,
// or "" when any layer will do.
func (AssetRules) LayerType(assetType string) string {
	switch assetType {
	case renderer.AssetText:
		return "text"
	case renderer.AssetImage, renderer.AssetVideo, renderer.AssetJob:
		return "image"
	}
	return ""
}
