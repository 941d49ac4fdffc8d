package lottie

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/ffmpeg"
	"github.com/framefarm/framefarm/renderer/inspect"
	"github.com/framefarm/framefarm/renderer/workfiles"
)

// Lottie layer types this file edits.
const (
	layerPrecomp = 0
	layerSolid   = 1
	layerImage   = 2
	layerShape   = 4
	layerText    = 5
)

// document is a Lottie animation being edited: the decoded JSON and where its files are.
type document struct {
	root map[string]any
	dir  string // the animation's folder; asset paths are relative to it
	// rate is the animation's frame rate, read as the exact rate it is near.
	rate renderer.Rate
	// audio collects the sound of audio and video assets, muxed into the output after the
	// render; Start is relative to the animation's first frame.
	audio []ffmpeg.AudioTrack
	// staged counts files copied next to the animation.
	staged int
	// tools extract the frames of placed videos.
	tools ffmpeg.Tools
}

type obj = map[string]any

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

func (d *document) name() string {
	if nm, _ := d.root["nm"].(string); nm != "" {
		return nm
	}
	return "main"
}

// selectComposition makes the named composition the one rendered: the root animation, or a
// precomp asset raised to the root.
func (d *document) selectComposition(name string) error {
	if name == "" || name == d.name() {
		return nil
	}
	for _, a := range d.assets() {
		if layers, ok := a["layers"].([]any); ok && d.precompName(a) == name {
			d.root["layers"] = layers
			if w, ok := number(a["w"]); ok && w >= 1 {
				d.root["w"] = a["w"]
			}
			if h, ok := number(a["h"]); ok && h >= 1 {
				d.root["h"] = a["h"]
			}
			d.root["nm"] = name
			return nil
		}
	}
	return fmt.Errorf("the animation has no composition named %q", name)
}

func (d *document) assets() []obj {
	var out []obj
	list, _ := d.root["assets"].([]any)
	for _, a := range list {
		if m, ok := a.(obj); ok {
			out = append(out, m)
		}
	}
	return out
}

func (d *document) precompName(a obj) string {
	nm, _ := a["nm"].(string)
	id, _ := a["id"].(string)
	return inspect.LottiePrecompName(nm, id, d.name())
}

// layersOf returns the layer list of a composition ("" is the rendered one).
func (d *document) layersOf(comp string) ([]any, func([]any), error) {
	if comp == "" || comp == d.name() {
		layers, _ := d.root["layers"].([]any)
		return layers, func(l []any) { d.root["layers"] = l }, nil
	}
	for _, a := range d.assets() {
		if layers, ok := a["layers"].([]any); ok && d.precompName(a) == comp {
			return layers, func(l []any) { a["layers"] = l }, nil
		}
	}
	return nil, nil, fmt.Errorf("the animation has no composition named %q", comp)
}

// CompositionNames lists the root animation and its precomp assets.
func (d *document) CompositionNames() []string {
	names := []string{d.name()}
	for _, a := range d.assets() {
		if _, ok := a["layers"].([]any); ok {
			names = append(names, d.precompName(a))
		}
	}
	return names
}

// Nested lists a composition's precomp layers that show a precomp asset.
func (d *document) Nested(comp string) []renderer.NestedComposition {
	layers, _, err := d.layersOf(comp)
	if err != nil {
		return nil
	}
	precomps := map[string]string{}
	for _, a := range d.assets() {
		if id, _ := a["id"].(string); id != "" {
			if _, ok := a["layers"].([]any); ok {
				precomps[id] = d.precompName(a)
			}
		}
	}
	var out []renderer.NestedComposition
	for _, l := range layers {
		m, _ := l.(obj)
		ref, _ := m["refId"].(string)
		if name, ok := precomps[ref]; ok && layerType(m) == layerPrecomp {
			nm, _ := m["nm"].(string)
			out = append(out, renderer.NestedComposition{Layer: nm, Composition: name})
		}
	}
	return out
}

var _ renderer.CompositionTree = (*document)(nil)

// layers returns every layer named name where an asset of composition comp looks for it (see
// renderer.Scope), each once.
func (d *document) layers(comp, name string) ([]obj, error) {
	scope, err := renderer.Scope(d, d.name(), comp)
	if err != nil {
		return nil, err
	}
	var out []obj
	seen := map[uintptr]bool{}
	for _, c := range scope {
		list, _, err := d.layersOf(c)
		if err != nil {
			return nil, err
		}
		for _, l := range list {
			if m, ok := l.(obj); ok && m["nm"] == name && !seen[reflect.ValueOf(m).Pointer()] {
				seen[reflect.ValueOf(m).Pointer()] = true
				out = append(out, m)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no layer named %q in the compositions %s", name, strings.Join(scope, ", "))
	}
	return out, nil
}

func layerType(l obj) int {
	n, _ := number(l["ty"])
	return int(n)
}

var layerKinds = map[int]string{0: "precomp", 1: "solid", 2: "image", 3: "null", 4: "shape", 5: "text", 6: "audio"}

func kindOf(l obj) string {
	if k, ok := layerKinds[layerType(l)]; ok {
		return k
	}
	return "footage"
}

// apply applies one asset. comp is the job's composition; the asset's own composition wins.
func (d *document) apply(ctx context.Context, a renderer.Asset, fonts fontSet) error {
	comp := a.Composition
	switch a.Type {
	case renderer.AssetText, renderer.AssetData:
		set, err := parseLayerEdit(a)
		if err != nil {
			return err
		}
		return d.eachLayer(comp, a.LayerName, func(l obj) error { return set(d, l, fonts) })
	case renderer.AssetImage, renderer.AssetVideo, renderer.AssetJob:
		if a.LocalPath == "" {
			return fmt.Errorf("the %s was not staged", a.Type)
		}
		place := d.replaceImage
		if a.Type == renderer.AssetVideo || a.Type == renderer.AssetJob && isVideo(a.LocalPath) {
			place = func(l obj, file string) error { return d.placeVideo(ctx, l, file) }
		}
		return d.eachLayer(comp, a.LayerName, func(l obj) error { return place(l, a.LocalPath) })
	case renderer.AssetAudio:
		layers, err := d.layers(comp, a.LayerName)
		if err != nil {
			return err
		}
		if err := ffmpeg.CheckAudio(ctx, d.tools, a.LocalPath); err != nil {
			return fmt.Errorf("the audio: %w", err)
		}
		d.addSound(layers[0], a.LocalPath)
		return nil
	case renderer.AssetStatic:
		name := a.Name
		if name == "" {
			name = filepath.Base(a.LocalPath)
		}
		return workfiles.Copy(a.LocalPath, filepath.Join(d.dir, filepath.Base(name)), 0)
	case renderer.AssetFunction:
		call, err := renderer.ParseFunction(a.Name, a.Params)
		if err != nil {
			return err
		}
		return d.function(comp, call)
	}
	return fmt.Errorf("%s assets need an After Effects engine", a.Type)
}

func (d *document) eachLayer(comp, name string, fn func(obj) error) error {
	layers, err := d.layers(comp, name)
	if err != nil {
		return err
	}
	for _, l := range layers {
		if err := fn(l); err != nil {
			return fmt.Errorf("layer %q: %w", name, err)
		}
	}
	return nil
}

// textDocuments returns the keyframes of a text layer's document, dropping its expression.
func textDocuments(l obj) ([]obj, error) {
	if layerType(l) != layerText {
		return nil, fmt.Errorf("it is a %s layer, not a text layer", kindOf(l))
	}
	t, _ := l["t"].(obj)
	doc, _ := t["d"].(obj)
	if doc == nil {
		return nil, errors.New("the text layer has no text document")
	}
	delete(doc, "x")
	var out []obj
	keys, _ := doc["k"].([]any)
	for _, k := range keys {
		if kf, ok := k.(obj); ok {
			if s, ok := kf["s"].(obj); ok {
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the text layer has no text keyframes")
	}
	return out, nil
}

// setText replaces the text of every keyframe. Embedded glyphs (chars) win over fonts, so when
// the layer's font is supplied and lacks glyphs for the new text, the glyphs are dropped.
func (d *document) setText(l obj, text string, fonts fontSet) error {
	docs, err := textDocuments(l)
	if err != nil {
		return err
	}
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\r"), "\n", "\r")
	for _, s := range docs {
		s["t"] = text
		font, _ := s["f"].(string)
		if fonts.supplied(d.root, font) && !d.glyphsCover(font, text) {
			delete(d.root, "chars")
		}
	}
	return nil
}

// glyphsCover reports whether the embedded glyphs of a font cover the text (no glyphs: yes).
func (d *document) glyphsCover(font, text string) bool {
	chars, ok := d.root["chars"].([]any)
	if !ok || len(chars) == 0 {
		return true
	}
	family := fontFamily(d.root, font)
	have := map[string]bool{}
	for _, c := range chars {
		if m, ok := c.(obj); ok && (m["fFamily"] == family || family == "") {
			ch, _ := m["ch"].(string)
			have[ch] = true
		}
	}
	for _, r := range text {
		if r == ' ' || r == '\r' || r == '\n' || r == '\t' {
			continue
		}
		if !have[string(r)] {
			return false
		}
	}
	return true
}

func colorHex(c [3]float64) string {
	return fmt.Sprintf("#%02x%02x%02x", int(math.Round(c[0]*255)), int(math.Round(c[1]*255)), int(math.Round(c[2]*255)))
}

// setFill colors a solid, the fill of a text, or every fill of a shape layer.
func setFill(l obj, c [3]float64) error {
	switch layerType(l) {
	case layerSolid:
		l["sc"] = colorHex(c)
	case layerText:
		docs, err := textDocuments(l)
		if err != nil {
			return err
		}
		for _, s := range docs {
			s["fc"] = []float64{c[0], c[1], c[2]}
		}
	case layerShape:
		if n := fillShapes(l["shapes"], c); n == 0 {
			return errors.New("the shape layer has no fill")
		}
	default:
		return fmt.Errorf("a %s layer has no fill color", kindOf(l))
	}
	return nil
}

func fillShapes(v any, c [3]float64) int {
	n := 0
	list, _ := v.([]any)
	for _, item := range list {
		s, ok := item.(obj)
		if !ok {
			continue
		}
		switch s["ty"] {
		case "fl":
			s["c"] = obj{"a": 0, "k": []float64{c[0], c[1], c[2], 1}}
			n++
		case "gr":
			n += fillShapes(s["it"], c)
		}
	}
	return n
}

// addSound plays a file's audio from the layer's start time, as After Effects plays footage.
func (d *document) addSound(l obj, file string) {
	st, _ := number(l["st"])
	first, _ := number(d.root["ip"])
	d.audio = append(d.audio, ffmpeg.AudioTrack{Path: file, Start: (st - first) / d.rate.FPS()})
}

// imageAsset returns the asset an image layer shows.
func (d *document) imageAsset(l obj) (obj, error) {
	if layerType(l) != layerImage {
		return nil, fmt.Errorf("it is a %s layer, not an image layer", kindOf(l))
	}
	ref, _ := l["refId"].(string)
	for _, a := range d.assets() {
		if a["id"] == ref {
			return a, nil
		}
	}
	return nil, fmt.Errorf("its image asset %q is missing", ref)
}

// addAsset appends an asset to the animation.
// checkFilePaths refuses, before the worker reads the animation, an image or font that points
// outside the template's folder: a template inspected before paths were checked must not make
// the node render its own files.
func (d *document) checkFilePaths() error {
	for i, a := range d.assets() {
		u, _ := a["u"].(string)
		p, _ := a["p"].(string)
		if _, precomp := a["layers"]; !precomp && p != "" {
			if err := inspect.LottieFilePath(u, p); err != nil {
				return fmt.Errorf("assets[%d]: %w", i, err)
			}
		}
	}
	fonts, _ := d.root["fonts"].(obj)
	list, _ := fonts["list"].([]any)
	for i, f := range list {
		font, _ := f.(obj)
		path, _ := font["fPath"].(string)
		if err := inspect.LottieFontPath(path); err != nil {
			return fmt.Errorf("fonts.list[%d].fPath: %w", i, err)
		}
	}
	return nil
}

func (d *document) addAsset(a obj) {
	list, _ := d.root["assets"].([]any)
	d.root["assets"] = append(list, a)
}

// stagingDir is a new folder next to the animation for the files of one injected asset.
func (d *document) stagingDir() (rel string, err error) {
	d.staged++
	rel = fmt.Sprintf("framefarm-assets/%d/", d.staged)
	return rel, os.MkdirAll(filepath.Join(d.dir, filepath.FromSlash(rel)), 0o700)
}

// replaceImage points an image layer at a staged file through an asset of its own, so other
// layers sharing the old asset keep it. The asset keeps its size: Skottie scales the image to it.
func (d *document) replaceImage(l obj, file string) error {
	old, err := d.imageAsset(l)
	if err != nil {
		return err
	}
	rel, err := d.stagingDir()
	if err != nil {
		return err
	}
	name := filepath.Base(file)
	if err := workfiles.Copy(file, filepath.Join(d.dir, filepath.FromSlash(rel), name), 0); err != nil {
		return err
	}
	id := fmt.Sprintf("framefarm_%d", d.staged)
	d.addAsset(obj{"id": id, "w": old["w"], "h": old["h"], "u": rel, "p": name, "e": 0})
	l["refId"] = id
	return nil
}
