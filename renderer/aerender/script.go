package aerender

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/framefarm/framefarm/renderer"
)

//go:embed runtime.jsx
var runtime []byte

// plan is what the generated script does, in order.
type plan struct {
	// Composition is the job's composition, where assets without their own are applied.
	Composition string
	// Assets are the job's assets; files are referenced at their staged path (LocalPath).
	Assets []renderer.Asset
	// EssentialComp is the wrapper composition essential assets create (and the one rendered).
	EssentialComp string
	// SaveTo, when set, saves the project there after the assets are applied (aep output).
	SaveTo string
	// FailureFile receives the error message when applying an asset fails.
	FailureFile string
}

// script is the ExtendScript file aerender runs before rendering: the runtime, then one call
// per asset inside a guard that records the first failure for the node to report.
func script(p plan) ([]byte, error) {
	calls, err := assetCalls(p)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(runtime)
	b.WriteString("\n// The job's assets, in order.\ntry {\n")
	b.Write(calls)
	b.WriteString("} catch (e) {\n")
	fmt.Fprintf(&b, "    var failure = new File(%s);\n", js(p.FailureFile))
	b.WriteString("    failure.open(\"w\");\n    failure.write(e.toString());\n    failure.close();\n    throw e;\n}\n")
	return b.Bytes(), nil
}

// layerScope tells the runtime where an asset finds its layers (see scopeComps in runtime.jsx).
type layerScope struct {
	Rendered    string `json:"rendered"`
	Composition string `json:"composition"`
}

// assetCalls are the runtime calls that apply the assets, one per line.
func assetCalls(p plan) ([]byte, error) {
	var b bytes.Buffer
	for i, a := range p.Assets {
		scope := js(layerScope{Rendered: p.Composition, Composition: a.Composition})
		fmt.Fprintf(&b, "    // assets[%d]: %s\n", i, a.Type)
		switch a.Type {
		case renderer.AssetText:
			var text string
			if err := json.Unmarshal(a.Value, &text); err != nil {
				return nil, fmt.Errorf("assets[%d]: value must be a string", i)
			}
			fmt.Fprintf(&b, "    framefarm.text(%s, %s, %s);\n", scope, js(a.LayerName), js(text))
		case renderer.AssetData:
			if a.Expression != "" {
				fmt.Fprintf(&b, "    framefarm.expression(%s, %s, %s, %s);\n", scope, js(a.LayerName), js(a.Property), js(a.Expression))
			} else {
				fmt.Fprintf(&b, "    framefarm.value(%s, %s, %s, %s);\n", scope, js(a.LayerName), js(a.Property), jsRaw(a.Value))
			}
		case renderer.AssetImage, renderer.AssetVideo, renderer.AssetAudio, renderer.AssetJob:
			fmt.Fprintf(&b, "    framefarm.footage(%s, %s, %s);\n", scope, js(a.LayerName), js(a.LocalPath))
		case renderer.AssetStatic:
			fmt.Fprintf(&b, "    // %s is next to the project\n", js(a.LocalPath))
		case renderer.AssetEssential:
			comp := a.Composition
			if comp == "" {
				comp = p.Composition
			}
			fmt.Fprintf(&b, "    framefarm.essential(%s, %s, %s);\n", js(comp), js(p.EssentialComp), jsRaw(a.Value))
		case renderer.AssetScript:
			params := a.Params
			if len(params) == 0 {
				params = json.RawMessage("{}")
			}
			fmt.Fprintf(&b, "    framefarm.script(%s, %s);\n", js(a.LocalPath), jsRaw(params))
		case renderer.AssetFunction:
			call, err := renderer.ParseFunction(a.Name, a.Params)
			if err != nil {
				return nil, fmt.Errorf("assets[%d]: %w", i, err)
			}
			fmt.Fprintf(&b, "    framefarm.call(%s, %s, %s);\n", js(call.Name), scope, js(functionParams(call)))
		default:
			return nil, fmt.Errorf("assets[%d]: the After Effects engine has no asset type %q", i, a.Type)
		}
	}
	if p.SaveTo != "" {
		fmt.Fprintf(&b, "    framefarm.save(%s);\n", js(p.SaveTo))
	}
	return b.Bytes(), nil
}

// functionParams are a checked call's params as the runtime reads them.
func functionParams(c *renderer.FunctionCall) any {
	switch c.Name {
	case "nx:layer-state-set":
		return map[string]any{"layerName": c.LayerName, "enabled": c.Enabled}
	case "nx:text-params-set":
		return struct {
			LayerName string `json:"layerName"`
			renderer.TextParams
		}{c.LayerName, c.Text}
	case "nx:solid-color-set":
		return map[string]any{"layerName": c.LayerName, "color": c.Color}
	case "nx:layer-start-set":
		return map[string]any{"layerName": c.LayerName, "start": c.Seconds}
	case "nx:layer-duration-set":
		return map[string]any{"layerName": c.LayerName, "duration": c.Seconds}
	case "nx:comp-duration-set":
		return map[string]any{"duration": c.Seconds}
	}
	return map[string]any{"layerName": c.LayerName}
}

// js writes a Go value as an ExtendScript literal. JSON is a subset of ECMAScript 3 literals once
// U+2028 and U+2029 are escaped, which encoding/json does.
func js(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "null"
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// jsRaw writes a JSON value taken from a job as an ExtendScript literal.
func jsRaw(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return "null"
	}
	return js(v)
}
