package renderer

import (
	"context"
	"encoding/json"
	"strings"
)

// Template file types clients declare.
const (
	TemplateAEP   = "aep"
	TemplateZip   = "zip"
	TemplateMogrt = "mogrt"
	// TemplateJSON is a Lottie animation as Bodymovin exports it: one JSON file, its images
	// embedded (a zip holds it with its image files).
	TemplateJSON = "json"
)

// InspectionVersion is the version of what inspection reads from a file. Templates inspected by
// an older version are inspected again at start, so what later versions add (ids, times, nesting)
// is known for every template. Version 3 adds the bounds of After Effects layers, version 4 the
// fonts a template bundles, version 5 the bounds of every layer (texts, shapes, nulls).
const InspectionVersion = 5

// Inspection is what a template file contains, as far as jobs need to know.
type Inspection struct {
	Version      int           `json:"version,omitempty"`
	Compositions []Composition `json:"compositions"`
	Mogrt        *Mogrt        `json:"mogrt,omitempty"`
	// Engines are the engines able to render this template, preferred first.
	Engines []string `json:"engines"`
	// Fonts are the font names the template uses.
	Fonts []string `json:"fonts,omitempty"`
	// BundledFonts are the names the font files inside the template give (file name without
	// its extension, family, PostScript name): fonts the template brings along.
	BundledFonts []string `json:"bundledFonts,omitempty"`
}

// FontKey makes "Comic Neue", "ComicNeue" and "comic-neue" the same font name: templates,
// font files and clients spell one font these ways.
func FontKey(name string) string {
	return strings.NewReplacer(" ", "", "-", "", "_", "").Replace(strings.ToLower(name))
}

// Composition is one renderable composition of a template.
type Composition struct {
	// ID is the composition's id in the file: the After Effects item id; for Lottie, 1 for the
	// root animation and 2, 3, ... for its precomp assets in order.
	ID       int     `json:"id,omitempty"`
	Name     string  `json:"name"`
	Width    int     `json:"width"`
	Height   int     `json:"height"`
	FPS      float64 `json:"fps"`
	Duration float64 `json:"duration"`
	Layers   []Layer `json:"layers"`
	// Data is what else the file says about the composition (a Lottie precomp's asset id).
	Data map[string]any `json:"data,omitempty"`
}

// Layer is one layer of a composition, in timeline order.
type Layer struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	Text  string `json:"text,omitempty"`
	// ID is the layer's id in the file: After Effects' layer id, Lottie's ind.
	ID int `json:"id,omitempty"`
	// ParentID is the id of the layer this one is parented to.
	ParentID *int `json:"parentId,omitempty"`
	// SourceCompID is the id of the composition a precomp layer shows.
	SourceCompID *int `json:"sourceCompId,omitempty"`
	// SourceType is what the layer shows: composition, solid, image, video, audio, footage.
	SourceType string `json:"sourceType,omitempty"`
	// Times in seconds, in the composition's time.
	StartTime float64 `json:"startTime"`
	InPoint   float64 `json:"inPoint"`
	OutPoint  float64 `json:"outPoint"`
	// Bounds are the layer's box in its composition at time 0, when the file says enough.
	Bounds *Bounds `json:"bounds,omitempty"`
	// Data is what else the parser knows, such as the layer's switches.
	Data map[string]any `json:"data,omitempty"`
}

// Bounds is an axis-aligned box in composition pixels.
type Bounds struct {
	Left   float64 `json:"left"`
	Top    float64 `json:"top"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
}

// Mogrt is the metadata of a motion graphics template.
type Mogrt struct {
	Name        string         `json:"name"`
	AuthorApp   string         `json:"authorApp"`
	Composition string         `json:"composition"`
	Width       int            `json:"width"`
	Height      int            `json:"height"`
	FPS         float64        `json:"fps"`
	Duration    float64        `json:"duration"`
	Controls    []MogrtControl `json:"controls"`
	Fonts       []string       `json:"fonts"`
}

// MogrtControl is one essential property a mogrt exposes.
type MogrtControl struct {
	ID      string            `json:"id"`
	Type    string            `json:"type"`
	Name    string            `json:"name"`
	Default json.RawMessage   `json:"default,omitempty"`
	Min     *float64          `json:"min,omitempty"`
	Max     *float64          `json:"max,omitempty"`
	Options []json.RawMessage `json:"options,omitempty"`
}

// Inspector reads a stored template file. It must never panic on hostile input, and must bound
// the memory and time it spends on one file.
type Inspector interface {
	Inspect(ctx context.Context, templateType, path string) (*Inspection, error)
}

// Composition returns the named composition, or nil.
func (in *Inspection) Composition(name string) *Composition {
	for i := range in.Compositions {
		if in.Compositions[i].Name == name {
			return &in.Compositions[i]
		}
	}
	return nil
}

// Layer returns the first layer with exactly this name, or nil.
func (c *Composition) Layer(name string) *Layer {
	for i := range c.Layers {
		if c.Layers[i].Name == name {
			return &c.Layers[i]
		}
	}
	return nil
}

// CompositionNames lists composition names in project order.
func (in *Inspection) CompositionNames() []string {
	names := make([]string, 0, len(in.Compositions))
	for _, c := range in.Compositions {
		names = append(names, c.Name)
	}
	return names
}

// LayerNames lists every layer name of every composition, deduplicated, in project order.
func (in *Inspection) LayerNames() []string {
	seen := make(map[string]bool)
	var names []string
	for _, c := range in.Compositions {
		for _, l := range c.Layers {
			if !seen[l.Name] {
				seen[l.Name] = true
				names = append(names, l.Name)
			}
		}
	}
	return names
}
