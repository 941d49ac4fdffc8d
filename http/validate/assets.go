package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

// assetFields says, per asset type, which fields it takes ("!" marks required ones).
var assetFields = map[string][]string{
	renderer.AssetText:      {"layerName!", "composition", "property", "value!"},
	renderer.AssetData:      {"layerName!", "composition", "property!", "value", "expression"},
	renderer.AssetImage:     {"layerName!", "composition", "src!"},
	renderer.AssetVideo:     {"layerName!", "composition", "src!"},
	renderer.AssetAudio:     {"layerName!", "composition", "src!"},
	renderer.AssetStatic:    {"src!", "name"},
	renderer.AssetEssential: {"composition", "value!"},
	renderer.AssetScript:    {"src!", "params"},
	renderer.AssetFunction:  {"name!", "composition", "params"},
	renderer.AssetJob:       {"layerName!", "composition", "template!", "assets", "preview", "settings", "fonts"},
}

// Size caps of asset fields.
const (
	maxNameLength  = 1024
	maxValueLength = 1 << 20
)

func (c *checker) assets(job *Job, raw *rawJob, tpl *persistence.Template, comp *renderer.Composition, path string, depth int) {
	n := len(raw.Assets)
	if raw.decodedAssets != nil {
		n = len(raw.decodedAssets)
	}
	if n > c.lim.MaxAssets {
		c.add(CodeValidation, at(path, "assets"), "at most %d assets, got %d", c.lim.MaxAssets, n)
		return
	}
	job.Spec.Assets = []renderer.Asset{}
	for i := range n {
		p := at(path, assetField(i))
		if raw.decodedAssets != nil {
			c.asset(job, &raw.decodedAssets[i], p, tpl, comp, depth)
			continue
		}
		var ra rawAsset
		if err := decodeStrict(raw.Assets[i], &ra, p); err != nil {
			c.merge(err)
			continue
		}
		c.asset(job, &ra, p, tpl, comp, depth)
	}
}

// firstAssetFields names the first assets of a list, made once: most jobs have a few.
var firstAssetFields = func() (names [64]string) {
	for i := range names {
		names[i] = "assets[" + strconv.Itoa(i) + "]"
	}
	return names
}()

// assetField is the field of the i-th asset of a list.
func assetField(i int) string {
	if i < len(firstAssetFields) {
		return firstAssetFields[i]
	}
	return "assets[" + strconv.Itoa(i) + "]"
}

// assetFieldNames are the fields an asset may carry besides its type; a fieldSet holds some of
// them, bit i for assetFieldNames[i].
var assetFieldNames = []string{"layerName", "composition", "property", "value", "expression", "src", "name", "params", "template", "assets", "preview", "settings", "fonts"}

type fieldSet uint16

func (s fieldSet) has(name string) bool { return s&fieldBit(name) != 0 }

func fieldBit(name string) fieldSet {
	return 1 << slices.Index(assetFieldNames, name)
}

// assetRules is assetFields as sets: what each type allows and requires.
var assetRules = func() map[string][2]fieldSet {
	rules := make(map[string][2]fieldSet, len(assetFields))
	for typ, fields := range assetFields {
		var allowed, required fieldSet
		for _, f := range fields {
			name, isRequired := strings.CutSuffix(f, "!")
			allowed |= fieldBit(name)
			if isRequired {
				required |= fieldBit(name)
			}
		}
		rules[typ] = [2]fieldSet{allowed, required}
	}
	return rules
}()

// present is the set of fields a raw asset carries.
func (ra *rawAsset) present() fieldSet {
	var s fieldSet
	for i, set := range []bool{
		ra.LayerName != nil, ra.Composition != nil, ra.Property != nil, hasJSON(ra.Value), ra.Expression != nil,
		ra.Src != nil, ra.Name != nil, hasJSON(ra.Params), ra.Template != nil, ra.Assets != nil, ra.Preview != nil,
		hasJSON(ra.Settings), ra.Fonts != nil,
	} {
		if set {
			s |= 1 << i
		}
	}
	return s
}

func hasJSON(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

func (c *checker) asset(job *Job, ra *rawAsset, path string, tpl *persistence.Template, comp *renderer.Composition, depth int) {
	rules, known := assetRules[ra.Type]
	if !known {
		c.add(CodeValidation, at(path, "type"), "must be one of %s, not %q", quoteList(slices.Sorted(maps.Keys(assetFields))), ra.Type)
		return
	}
	present := ra.present()
	allowed, required := rules[0], rules[1]
	for i, name := range assetFieldNames {
		switch bit := fieldSet(1) << i; {
		case required&bit != 0 && present&bit == 0:
			c.add(CodeValidation, at(path, name), "is required for assets of type %s", ra.Type)
		case present&bit != 0 && allowed&bit == 0:
			c.add(CodeValidation, at(path, name), "is not used by assets of type %s", ra.Type)
		}
	}
	a := renderer.Asset{Type: ra.Type}
	a.Composition = c.str(ra.Composition, path, "composition")
	a.Property = c.str(ra.Property, path, "property")
	a.Expression = c.str(ra.Expression, path, "expression")
	if ra.Type == renderer.AssetData && present.has("value") == present.has("expression") {
		c.add(CodeValidation, path, "a data asset needs exactly one of value and expression")
	}
	scope := c.scope(tpl, comp, a.Composition, path, "composition")
	if ra.LayerName != nil {
		a.LayerName = c.str(ra.LayerName, path, "layerName")
		layerPath := at(path, "layerName")
		rules := c.lim.Engines[job.Engine]
		for _, l := range c.layers(scope, a.LayerName, layerPath) {
			if rules == nil {
				continue
			}
			if want := rules.LayerType(a.Type); want != "" && l.Type != want {
				c.add(CodeValidation, layerPath, "layer %q is a %s layer; the %s engine puts %s assets in %s layers", l.Name, l.Type, job.Engine, a.Type, want)
				break
			}
		}
	}
	a.Value = c.value(ra, path)
	if ra.Src != nil {
		a.Src = c.url(*ra.Src, at(path, "src"), true)
	}
	a.Name = c.str(ra.Name, path, "name")
	switch ra.Type {
	case renderer.AssetFunction:
		c.function(job, a, ra.Params, scope, path)
		return
	case renderer.AssetScript:
		a.Params = c.params(ra.Params, at(path, "params"))
	case renderer.AssetEssential:
		c.essential(tpl, a.Value, at(path, "value"))
	case renderer.AssetJob:
		c.child(job, a, ra, path, depth)
		return
	}
	c.engineCheck(job, a, path)
	job.Spec.Assets = append(job.Spec.Assets, a)
}

// engineCheck refuses, at creation, what the job's engine cannot apply.
func (c *checker) engineCheck(job *Job, a renderer.Asset, path string) {
	rules := c.lim.Engines[job.Engine]
	if rules == nil {
		return
	}
	if err := rules.CheckAsset(a); err != nil {
		c.add(CodeValidation, at(path, err.Field), "%s (this job renders with the %s engine)", err.Err, job.Engine)
	}
}

// str checks a name field; its path is made only for an error (most requests have none).
func (c *checker) str(s *string, path, field string) string {
	if s == nil {
		return ""
	}
	if len(*s) > maxNameLength {
		c.add(CodeValidation, at(path, field), "is longer than %d characters", maxNameLength)
	}
	return *s
}

// assetScope is where an asset's layers are looked for: compositions of an inspected template.
type assetScope struct {
	in           *renderer.Inspection
	compositions []string
}

// scope resolves an asset's composition (its own, or else the job's and those nested in it);
// nil when the template's compositions are not known.
func (c *checker) scope(tpl *persistence.Template, jobComp *renderer.Composition, composition, path, field string) *assetScope {
	if tpl == nil || tpl.Inspection == nil || composition == "" && jobComp == nil {
		return nil
	}
	rendered := ""
	if jobComp != nil {
		rendered = jobComp.Name
	}
	names, err := renderer.Scope(tpl.Inspection, rendered, composition)
	if err != nil {
		c.add(CodeCompositionNotFound, at(path, field), "%s in template %s; it has %s", err, tpl.ID, quoteList(tpl.Inspection.CompositionNames()))
		return nil
	}
	return &assetScope{in: tpl.Inspection, compositions: names}
}

// layers checks a layer name against the asset's scope, when it is known, and returns every
// layer of that name there.
func (c *checker) layers(scope *assetScope, name, path string) []renderer.Layer {
	if name == "" {
		c.add(CodeValidation, path, "must not be empty")
		return nil
	}
	if scope == nil {
		return nil
	}
	var found []renderer.Layer
	for _, comp := range scope.compositions {
		for _, l := range scope.in.Composition(comp).Layers {
			if l.Name == name {
				found = append(found, l)
			}
		}
	}
	if len(found) == 0 {
		c.add(CodeLayerNotFound, path, "no layer named %q in the compositions searched: %s", name, quoteList(scope.compositions))
	}
	return found
}

func (c *checker) value(ra *rawAsset, path string) json.RawMessage {
	if len(ra.Value) == 0 || string(ra.Value) == "null" {
		return nil
	}
	if len(ra.Value) > maxValueLength {
		c.add(CodeValidation, at(path, "value"), "is larger than %d bytes", maxValueLength)
		return nil
	}
	// The value is well-formed JSON (the decoders check every raw value): its first byte tells
	// its kind.
	switch ra.Type {
	case renderer.AssetText:
		if ra.Value[0] != '"' {
			c.add(CodeValidation, at(path, "value"), "must be a string (the text to show)")
		}
	case renderer.AssetEssential:
		if ra.Value[0] != '{' {
			c.add(CodeValidation, at(path, "value"), "must be an object of essential property names and values")
		}
	}
	c.secrets(string(ra.Value), at(path, "value"))
	return compact(ra.Value)
}

func (c *checker) params(raw json.RawMessage, path string) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		c.add(CodeValidation, path, "must be an object")
		return nil
	}
	c.secrets(string(raw), path)
	return compact(raw)
}

// function checks a function asset; an array params.layerName becomes one asset per layer, in
// place, keeping the order of the assets.
func (c *checker) function(job *Job, a renderer.Asset, raw json.RawMessage, scope *assetScope, path string) {
	a.Params = c.params(raw, at(path, "params"))
	var params map[string]json.RawMessage
	json.Unmarshal(a.Params, &params)
	var names []string
	if layerRaw, ok := params["layerName"]; ok {
		var one string
		switch {
		case json.Unmarshal(layerRaw, &one) == nil:
			names = []string{one}
		case json.Unmarshal(layerRaw, &names) == nil && len(names) > 0:
		default:
			c.add(CodeValidation, at(path, "params.layerName"), "must be a layer name or a non-empty array of layer names")
			return
		}
	}
	calls := []renderer.Asset{a}
	if names != nil {
		calls = calls[:0]
		for i, name := range names {
			c.layers(scope, name, fmt.Sprintf("%s[%d]", at(path, "params.layerName"), i))
			params["layerName"], _ = json.Marshal(name)
			expanded := a
			expanded.Params, _ = json.Marshal(params)
			calls = append(calls, expanded)
		}
	}
	// The expanded calls differ only in their layer: one check speaks for all.
	if _, err := renderer.ParseFunction(calls[0].Name, calls[0].Params); err != nil {
		var fe *renderer.FunctionError
		if errors.As(err, &fe) {
			c.add(CodeValidation, at(path, fe.Field), "%s", fe.Err)
		}
		return
	}
	job.Spec.Assets = append(job.Spec.Assets, calls...)
}

// essential checks a mogrt's essential values against the controls it exposes.
func (c *checker) essential(tpl *persistence.Template, value json.RawMessage, path string) {
	if tpl == nil || tpl.Inspection == nil || tpl.Inspection.Mogrt == nil || value == nil {
		return
	}
	var values map[string]json.RawMessage
	if json.Unmarshal(value, &values) != nil {
		return
	}
	controls := tpl.Inspection.Mogrt.Controls
	for name := range values {
		found := false
		for _, ctl := range controls {
			if ctl.Name == name || ctl.ID == name {
				found = true
				break
			}
		}
		if !found {
			names := make([]string, 0, len(controls))
			for _, ctl := range controls {
				names = append(names, ctl.Name)
			}
			c.add(CodeValidation, at(path, name), "the template has no essential property %q; it has %s", name, quoteList(names))
		}
	}
}

// child checks a nested job asset and records the child job it creates.
func (c *checker) child(job *Job, a renderer.Asset, ra *rawAsset, path string, depth int) {
	if depth+1 > c.lim.MaxDepth {
		c.add(CodeValidation, at(path, "type"), "job assets nest at most %d levels deep", c.lim.MaxDepth)
		return
	}
	if ra.Template == nil {
		return
	}
	child := c.job(&rawJob{Template: ra.Template, Assets: ra.Assets, Preview: ra.Preview, Settings: ra.Settings, Fonts: ra.Fonts}, path, depth+1)
	switch s := child.Spec.Settings; {
	case s.Type != renderer.OutputVideo && s.Type != renderer.OutputImage:
		c.add(CodeValidation, at(path, "settings.type"), "a child job renders a video or an image, not %q", s.Type)
	case s.Type == renderer.OutputImage && s.Frames != nil && s.Frames.Range:
		c.add(CodeValidation, at(path, "settings.frames"), "a child job's image is one frame; a range renders a zip, which no layer can show")
	}
	child.Priority, child.Tags = job.Priority, job.Tags
	job.Children = append(job.Children, child)
	job.ChildAsset = append(job.ChildAsset, len(job.Spec.Assets))
	job.Spec.Assets = append(job.Spec.Assets, a)
}

func compact(raw json.RawMessage) json.RawMessage {
	if !bytes.ContainsAny(raw, " \t\r\n") {
		return raw // nothing to elide: most values come compact
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}
