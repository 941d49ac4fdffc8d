package renderer

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParseFunction(t *testing.T) {
	call, err := ParseFunction("nx:text-params-set", json.RawMessage(`{"layerName":"T","fontSize":40,"fillColor":"#ff0000","justification":"center"}`))
	if err != nil || *call.Text.FontSize != 40 || *call.Text.FillColor != [3]float64{1, 0, 0} || *call.Text.Justification != "center" || call.LayerName != "T" {
		t.Fatalf("%+v %v", call, err)
	}
	call, err = ParseFunction("nx:solid-color-set", json.RawMessage(`{"layerName":"S","color":[255,128,0]}`))
	if err != nil || call.Color[0] != 1 || call.Color[2] != 0 || call.Color[1] < 0.5 || call.Color[1] > 0.51 {
		t.Fatalf("%+v %v", call, err)
	}
	bad := map[string]struct{ name, params, field string }{
		"unknown":       {"nx:explode", `{}`, "name"},
		"no layer":      {"nx:layer-remove", `{}`, "params"},
		"state":         {"nx:layer-state-set", `{"layerName":"a","enabled":"yes"}`, "params"},
		"text param":    {"nx:text-params-set", `{"layerName":"a","kerning":2}`, "params"},
		"justification": {"nx:text-params-set", `{"layerName":"a","justification":"middle"}`, "params"},
		"color":         {"nx:solid-color-set", `{"layerName":"a","color":"red"}`, "params"},
		"duration":      {"nx:comp-duration-set", `{"duration":0}`, "params"},
		"params kind":   {"nx:comp-duration-set", `[1]`, "params"},
	}
	for name, c := range bad {
		_, err := ParseFunction(c.name, json.RawMessage(c.params))
		var fe *FunctionError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: %v, want an error on %s", name, err, c.field)
		}
	}
}
