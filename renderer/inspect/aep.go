package inspect

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/renderer"
)

// Item types of idta, and asset types of a footage item's opti.
const (
	itemFolder      = 1
	itemComposition = 4
	itemFootage     = 7

	assetPlaceholder = 2
	assetSolid       = 9
)

// Layer types of ldta: at offset 131 in the 160-byte layer data of After Effects 15 to 22 (older
// layouts have it at 108).
const (
	layerAV     = 0
	layerLight  = 1
	layerCamera = 2
	layerText   = 3
	layerShape  = 4
)

type aepItem struct {
	id   uint32
	kind uint16
	name string
	node *chunk
	// footage is what a footage item holds: solid, placeholder, or a file's kind.
	footage string
}

var aeEngines = []string{renderer.EngineAE2026, renderer.EngineAE2025}

// inspectProject reads the compositions of an After Effects project tree.
func inspectProject(root *chunk) (*renderer.Inspection, error) {
	fold := root.child("Fold")
	if fold == nil {
		return nil, errors.New("damaged project: it has no root folder")
	}
	var items []*aepItem
	if err := collectItems(fold, &items, 0); err != nil {
		return nil, err
	}
	byID := make(map[uint32]*aepItem, len(items))
	for _, it := range items {
		byID[it.id] = it
	}
	in := &renderer.Inspection{Compositions: []renderer.Composition{}, Engines: aeEngines}
	for _, it := range items {
		if it.kind != itemComposition {
			continue
		}
		comp, fonts, err := composition(it, byID)
		if err != nil {
			return nil, fmt.Errorf("composition %q: %w", it.name, err)
		}
		in.Compositions = append(in.Compositions, comp)
		for _, f := range fonts {
			if !slices.Contains(in.Fonts, f) {
				in.Fonts = append(in.Fonts, f)
			}
		}
	}
	return in, nil
}

// collectItems lists the items of a folder and its subfolders, in project order.
func collectItems(folder *chunk, out *[]*aepItem, depth int) error {
	if depth > maxChunkDepth {
		return errors.New("damaged project: folders nest too deep")
	}
	for _, k := range folder.kids {
		if k.id != "Item" || !k.list {
			continue
		}
		idta := k.child("idta")
		if idta == nil || len(idta.data) < 20 {
			return errors.New("damaged project: an item has no item data")
		}
		it := &aepItem{
			kind: binary.BigEndian.Uint16(idta.data[0:2]),
			id:   binary.BigEndian.Uint32(idta.data[16:20]),
			name: k.text(),
			node: k,
		}
		if it.kind == itemFootage {
			it.footage, it.name = footage(k, it.name)
		}
		*out = append(*out, it)
		if it.kind == itemFolder {
			if sub := k.child("Sfdr"); sub != nil {
				if err := collectItems(sub, out, depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// footage tells what a footage item holds and the name After Effects shows for it.
func footage(item *chunk, name string) (kind, shown string) {
	pin := item.child("Pin ")
	if pin == nil {
		return "footage", name
	}
	opti := pin.child("opti")
	if opti != nil && len(opti.data) >= 6 {
		switch {
		case string(opti.data[:4]) == "Soli":
			if name == "" && len(opti.data) > 26 {
				name = cString(opti.data[26:])
			}
			return "solid", name
		case binary.BigEndian.Uint16(opti.data[4:6]) == assetPlaceholder:
			if name == "" && len(opti.data) > 10 {
				name = cString(opti.data[10:])
			}
			return "footage", name
		}
	}
	file := ""
	if alas := pin.find("alas"); alas != nil {
		var info struct {
			FullPath string `json:"fullpath"`
		}
		if json.Unmarshal(alas.data, &info) == nil {
			file = path.Base(strings.ReplaceAll(info.FullPath, "\\", "/"))
		}
	}
	if name == "" {
		name = file
	}
	return fileKind(file), name
}

var (
	imageExts = []string{".png", ".jpg", ".jpeg", ".psd", ".tif", ".tiff", ".gif", ".bmp", ".tga", ".exr", ".ai", ".eps", ".pdf", ".svg", ".webp", ".heic"}
	videoExts = []string{".mov", ".mp4", ".m4v", ".avi", ".mxf", ".webm", ".mpg", ".mpeg", ".mkv", ".wmv", ".r3d", ".braw"}
	audioExts = []string{".wav", ".mp3", ".aac", ".aif", ".aiff", ".m4a", ".ogg", ".flac"}
)

func fileKind(file string) string {
	ext := strings.ToLower(path.Ext(file))
	switch {
	case slices.Contains(imageExts, ext):
		return "image"
	case slices.Contains(videoExts, ext):
		return "video"
	case slices.Contains(audioExts, ext):
		return "audio"
	}
	return "footage"
}

func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return strings.ToValidUTF8(string(b), "")
}

// composition reads a composition's settings and its layers in timeline order.
func composition(it *aepItem, byID map[uint32]*aepItem) (renderer.Composition, []string, error) {
	comp := renderer.Composition{ID: int(it.id), Name: it.name, Layers: []renderer.Layer{}}
	cdta := it.node.child("cdta")
	if cdta == nil || len(cdta.data) < 144 {
		return comp, nil, errors.New("damaged project: composition settings (cdta) are missing or short")
	}
	d := cdta.data
	if div := binary.BigEndian.Uint32(d[4:8]); div != 0 {
		comp.FPS = round(float64(binary.BigEndian.Uint32(d[8:12]))/float64(div), 3)
	}
	if div := binary.BigEndian.Uint32(d[48:52]); div != 0 {
		comp.Duration = round(float64(binary.BigEndian.Uint32(d[44:48]))/float64(div), 3)
	}
	comp.Width, comp.Height = int(binary.BigEndian.Uint16(d[140:142])), int(binary.BigEndian.Uint16(d[142:144]))
	var fonts []string
	var nodes []*chunk
	var sources []*aepItem
	for _, k := range it.node.kids {
		// Markers (SecL) and views (DLay, SLay, CLay) are kept beside layers; they are not layers.
		if k.id != "Layr" || !k.list {
			continue
		}
		layer, layerFonts, err := layerOf(k, len(comp.Layers)+1, byID)
		if err != nil {
			return comp, nil, err
		}
		comp.Layers = append(comp.Layers, layer)
		nodes, sources = append(nodes, k), append(sources, layerSource(k, byID))
		for _, f := range layerFonts {
			if !slices.Contains(fonts, f) {
				fonts = append(fonts, f)
			}
		}
	}
	aepBounds(&comp, nodes, sources)
	return comp, fonts, nil
}

// layerSource is the item a layer shows (ldta bytes 40 to 44 name it), if any.
func layerSource(node *chunk, byID map[uint32]*aepItem) *aepItem {
	if ldta := node.child("ldta"); ldta != nil && len(ldta.data) >= 44 {
		return byID[binary.BigEndian.Uint32(ldta.data[40:44])]
	}
	return nil
}

// layerTimes reads a layer's start, in and out times: signed fractions of seconds at bytes 12 to
// 36 of the layer data of After Effects 15 and later. In and out are kept relative to the start.
func layerTimes(layer *renderer.Layer, d []byte) {
	at := func(i int) float64 {
		div := binary.BigEndian.Uint32(d[i+4 : i+8])
		if div == 0 {
			return 0
		}
		return float64(int32(binary.BigEndian.Uint32(d[i:i+4]))) / float64(div)
	}
	layer.StartTime = round(at(12), 3)
	layer.InPoint = round(at(12)+at(20), 3)
	layer.OutPoint = round(at(12)+at(28), 3)
}

func ptr[T any](v T) *T { return &v }

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// matchNames lists the property groups at the top of a layer.
func matchNames(layer *chunk) map[string]bool {
	names := map[string]bool{}
	if top := layer.child("tdgp"); top != nil {
		for _, k := range top.kids {
			if k.id == "tdmn" {
				names[cString(k.data)] = true
			}
		}
	}
	return names
}

func layerOf(node *chunk, index int, byID map[uint32]*aepItem) (renderer.Layer, []string, error) {
	ldta := node.child("ldta")
	if ldta == nil || len(ldta.data) < 44 {
		return renderer.Layer{}, nil, fmt.Errorf("damaged project: layer %d has no layer data", index)
	}
	d := ldta.data
	layer := renderer.Layer{Index: index, Name: node.text(), ID: int(binary.BigEndian.Uint32(d[0:4]))}
	source := layerSource(node, byID)
	if layer.Name == "" && source != nil {
		layer.Name = source.name // what After Effects shows for an unnamed layer
	}
	if source != nil {
		layer.SourceType = source.footage
		if source.kind == itemComposition {
			layer.SourceType = "composition"
			layer.SourceCompID = ptr(int(source.id))
		}
	}
	layerType := byte(layerAV)
	switch {
	case len(d) >= 160:
		layerType = d[131]
	case len(d) > 108:
		layerType = d[108]
	}
	if len(d) >= 160 {
		layerTimes(&layer, d)
		if parent := binary.BigEndian.Uint32(d[132:136]); parent != 0 {
			layer.ParentID = ptr(int(parent))
		}
	}
	groups := matchNames(node)
	null, adjustment := d[38]&0x80 != 0, d[38]&0x02 != 0
	layer.Data = map[string]any{"switches": map[string]bool{
		"guide": d[37]&0x02 != 0, "adjustment": adjustment, "threeD": d[38]&0x04 != 0, "solo": d[38]&0x08 != 0,
		"null": null, "visible": d[39]&0x01 != 0, "motionBlur": d[39]&0x08 != 0, "locked": d[39]&0x20 != 0, "shy": d[39]&0x40 != 0,
	}}
	switch {
	case layerType == layerLight || groups["ADBE Light Options Group"]:
		layer.Type = "light"
	case layerType == layerCamera || groups["ADBE Camera Options Group"]:
		layer.Type = "camera"
	case layerType == layerText || node.find("btdk") != nil:
		layer.Type = "text"
	case layerType == layerShape || groups["ADBE Root Vectors Group"]:
		layer.Type = "shape"
	case null:
		layer.Type = "null"
	case adjustment:
		layer.Type = "adjustment"
	case source == nil:
		layer.Type = "footage"
	case source.kind == itemComposition:
		layer.Type = "precomp"
	default:
		layer.Type = source.footage
	}
	var fonts []string
	if layer.Type == "text" {
		if doc := node.find("btdk"); doc != nil {
			text, err := textDocument(doc.data)
			if err != nil {
				return layer, nil, fmt.Errorf("layer %q: %w", layer.Name, err)
			}
			layer.Text, fonts = text.text, text.fonts
			if text.size > 0 {
				layer.Data["fontSize"] = text.size
				if text.leading > 0 {
					layer.Data["leading"] = text.leading
				}
			}
		}
	}
	return layer, fonts, nil
}
