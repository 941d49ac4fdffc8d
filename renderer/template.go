package renderer

import (
	"context"
	"encoding/json"
)

// Template file types clients declare.
const (
	TemplateAEP   = "aep"
	TemplateZip   = "zip"
	TemplateMogrt = "mogrt"
)

// Inspection is what a template file contains, as far as jobs need to know.
type Inspection struct {
	Compositions []Composition `json:"compositions"`
	Mogrt        *Mogrt        `json:"mogrt,omitempty"`
	// Engines are the engines able to render this template, preferred first.
	Engines []string `json:"engines"`
	// Fonts are the font names the template uses.
	Fonts []string `json:"fonts,omitempty"`
}

// Composition is one renderable composition of a template.
type Composition struct {
	Name     string  `json:"name"`
	Width    int     `json:"width"`
	Height   int     `json:"height"`
	FPS      float64 `json:"fps"`
	Duration float64 `json:"duration"`
	Layers   []Layer `json:"layers"`
}

// Layer is one layer of a composition, in timeline order.
type Layer struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	Text  string `json:"text,omitempty"`
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
