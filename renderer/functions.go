package renderer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Functions are the nx: functions every engine runs, with the params each takes.
var Functions = []string{"nx:layer-remove", "nx:layer-state-set", "nx:text-params-set", "nx:solid-color-set",
	"nx:layer-start-set", "nx:layer-duration-set", "nx:comp-duration-set"}

// FunctionCall is a checked function asset: what the engine does, with its params typed.
type FunctionCall struct {
	Name string
	// LayerName is the layer acted on; empty for nx:comp-duration-set. Arrays of layer names
	// were expanded into one call each at creation.
	LayerName string
	// Enabled is nx:layer-state-set's state.
	Enabled bool
	// Color is nx:solid-color-set's color, 0..1 per channel.
	Color [3]float64
	// Seconds is nx:layer-start-set's start, or the duration of nx:layer-duration-set and
	// nx:comp-duration-set.
	Seconds float64
	// Text holds nx:text-params-set's fields.
	Text TextParams
}

// TextParams are the text document fields nx:text-params-set may set; nil fields stay as they
// are.
type TextParams struct {
	FontSize      *float64    `json:"fontSize,omitempty"`
	Font          *string     `json:"font,omitempty"`
	FillColor     *[3]float64 `json:"fillColor,omitempty"`
	Tracking      *float64    `json:"tracking,omitempty"`
	Justification *string     `json:"justification,omitempty"`
	LineHeight    *float64    `json:"lineHeight,omitempty"`
	Text          *string     `json:"text,omitempty"`
}

// FunctionError says which part of a function asset is wrong: its name or its params.
type FunctionError struct {
	Field string // "name" or "params"
	Err   error
}

func (e *FunctionError) Error() string { return e.Field + ": " + e.Err.Error() }

// ParseFunction checks a function asset's name and params.
func ParseFunction(name string, raw json.RawMessage) (*FunctionCall, error) {
	if !slices.Contains(Functions, name) {
		return nil, &FunctionError{"name", fmt.Errorf("there is no function %q; there are %s", name, strings.Join(Functions, ", "))}
	}
	call, err := parseParams(name, raw)
	if err != nil {
		return nil, &FunctionError{"params", err}
	}
	return call, nil
}

func parseParams(name string, raw json.RawMessage) (*FunctionCall, error) {
	var p map[string]json.RawMessage
	if len(raw) > 0 && string(raw) != "null" && json.Unmarshal(raw, &p) != nil {
		return nil, errors.New("params must be an object")
	}
	call := &FunctionCall{Name: name}
	if name != "nx:comp-duration-set" {
		if json.Unmarshal(p["layerName"], &call.LayerName) != nil || call.LayerName == "" {
			return nil, fmt.Errorf("%s needs params.layerName, a layer name", name)
		}
	}
	seconds := func(key string, positive bool) error {
		if json.Unmarshal(p[key], &call.Seconds) != nil || positive && call.Seconds <= 0 {
			if positive {
				return fmt.Errorf("params.%s must be a number of seconds above 0", key)
			}
			return fmt.Errorf("params.%s must be a number of seconds", key)
		}
		return nil
	}
	var err error
	switch name {
	case "nx:layer-state-set":
		if json.Unmarshal(p["enabled"], &call.Enabled) != nil {
			err = errors.New("params.enabled must be true or false")
		}
	case "nx:text-params-set":
		call.Text, err = parseTextParams(p)
	case "nx:solid-color-set":
		if call.Color, err = ParseColor(p["color"]); err != nil {
			err = fmt.Errorf("params.color: %w", err)
		}
	case "nx:layer-start-set":
		err = seconds("start", false)
	case "nx:layer-duration-set", "nx:comp-duration-set":
		err = seconds("duration", true)
	}
	return call, err
}

// textParamNames lists nx:text-params-set's fields, for messages.
const textParamNames = "fontSize, font, fillColor, tracking, justification (left, right, center), lineHeight, text"

func parseTextParams(p map[string]json.RawMessage) (TextParams, error) {
	var t TextParams
	for key, raw := range p {
		var err error
		switch key {
		case "layerName":
		case "fontSize":
			t.FontSize, err = numberParam(key, raw)
		case "tracking":
			t.Tracking, err = numberParam(key, raw)
		case "lineHeight":
			t.LineHeight, err = numberParam(key, raw)
		case "font", "text", "justification":
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return t, fmt.Errorf("params.%s must be a string", key)
			}
			switch key {
			case "font":
				t.Font = &s
			case "text":
				t.Text = &s
			default:
				if s != "left" && s != "right" && s != "center" {
					return t, errors.New("params.justification must be left, right or center")
				}
				t.Justification = &s
			}
		case "fillColor":
			c, cerr := ParseColor(raw)
			if cerr != nil {
				return t, fmt.Errorf("params.fillColor: %w", cerr)
			}
			t.FillColor = &c
		default:
			return t, fmt.Errorf("params.%s is not a text parameter (%s)", key, textParamNames)
		}
		if err != nil {
			return t, err
		}
	}
	return t, nil
}

func numberParam(key string, raw json.RawMessage) (*float64, error) {
	var n float64
	if json.Unmarshal(raw, &n) != nil {
		return nil, fmt.Errorf("params.%s must be a number", key)
	}
	return &n, nil
}

// ParseColor reads "#rrggbb" or [r, g, b] (0..1, or 0..255 when any part exceeds 1) into 0..1
// channels.
func ParseColor(raw json.RawMessage) ([3]float64, error) {
	var hex string
	if json.Unmarshal(raw, &hex) == nil {
		hex = strings.TrimPrefix(hex, "#")
		v, err := strconv.ParseUint(hex, 16, 32)
		if len(hex) != 6 || err != nil {
			return [3]float64{}, errors.New(`a color is "#rrggbb" or [r, g, b]`)
		}
		return [3]float64{float64(v>>16&0xff) / 255, float64(v>>8&0xff) / 255, float64(v&0xff) / 255}, nil
	}
	var c []float64
	if json.Unmarshal(raw, &c) != nil || len(c) < 3 || len(c) > 4 {
		return [3]float64{}, errors.New(`a color is "#rrggbb" or [r, g, b]`)
	}
	scale := 1.0
	if c[0] > 1 || c[1] > 1 || c[2] > 1 {
		scale = 255
	}
	var rgb [3]float64
	for i := range rgb {
		rgb[i] = math.Max(0, math.Min(1, c[i]/scale))
	}
	return rgb, nil
}
