package inspect

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/renderer"
)

// premiereTicksPerSecond is the time base of mogrt definitions.
const premiereTicksPerSecond = 254016000000

// mogrtDefinition is the part of definition.json inspection reads.
type mogrtDefinition struct {
	CapsuleName string                     `json:"capsuleName"`
	AuthorApp   string                     `json:"authorApp"`
	Source      map[string]mogrtSourceInfo `json:"sourceInfoLocalized"`
	Controls    []mogrtControlDef          `json:"clientControls"`
	Fonts       map[string][]string        `json:"usedFontsLocalized"`
}

type mogrtSourceInfo struct {
	Name      string `json:"name"`
	Duration  struct{ Scale, Value float64 }
	Framerate struct {
		TicksPerFrame float64 `json:"ticksperframe"`
	} `json:"framerate"`
	Framesize struct {
		Size struct{ X, Y float64 } `json:"size"`
	} `json:"framesize"`
}

type localized struct {
	StrDB []struct {
		Locale string `json:"localeString"`
		Str    string `json:"str"`
	} `json:"strDB"`
}

// text prefers English, then the first locale.
func (l localized) text() string {
	for _, s := range l.StrDB {
		if s.Locale == "en_US" {
			return s.Str
		}
	}
	if len(l.StrDB) > 0 {
		return l.StrDB[0].Str
	}
	return ""
}

type mogrtControlDef struct {
	ID          string          `json:"id"`
	Type        int             `json:"type"`
	UIName      localized       `json:"uiName"`
	Value       json.RawMessage `json:"value"`
	Min         *float64        `json:"min"`
	Max         *float64        `json:"max"`
	MenuContent []localized     `json:"menucontent"`
}

// Control types of clientControls.
var mogrtControlTypes = map[int]string{
	1: "checkbox", 2: "slider", 3: "angle", 4: "color", 5: "point", 6: "text", 7: "group", 8: "font", 9: "scale", 13: "dropdown",
}

// inspectMogrt reads a motion graphics template: definition.json, and the After Effects project
// in project.aegraphic. A Premiere Pro mogrt has no such project and cannot be rendered.
func inspectMogrt(a *Archive) (*renderer.Inspection, error) {
	var defFile, graphic []byte
	for _, f := range a.Entries() {
		var err error
		switch path.Base(f.Name) {
		case "definition.json":
			defFile, err = a.Read(f, 16<<20)
		case "project.aegraphic":
			graphic, err = a.Read(f, a.limits.MaxProjectBytes)
		}
		if err != nil {
			return nil, err
		}
	}
	if defFile == nil {
		return nil, errors.New("the mogrt has no definition.json")
	}
	var def mogrtDefinition
	if err := json.Unmarshal(defFile, &def); err != nil {
		return nil, fmt.Errorf("the mogrt's definition.json cannot be read: %w", err)
	}
	if graphic == nil {
		app := "Premiere Pro"
		if def.AuthorApp != "" && def.AuthorApp != "ppro" {
			app = def.AuthorApp
		}
		return nil, fmt.Errorf("this mogrt was made with %s (authorApp %q): it holds no After Effects project, so After Effects cannot render it", app, def.AuthorApp)
	}
	inner, err := archiveFromBytes(graphic, a.limits)
	if err != nil {
		return nil, fmt.Errorf("project.aegraphic: %w", err)
	}
	_, kind, project, err := inner.Project()
	if err != nil || kind != ProjectAfterEffects {
		return nil, fmt.Errorf("this mogrt's project.aegraphic holds no After Effects project (authorApp %q), so After Effects cannot render it", def.AuthorApp)
	}
	in, err := inspectAEPBytes(project)
	if err != nil {
		return nil, err
	}
	in.Mogrt = mogrtMeta(&def)
	return in, nil
}

func mogrtMeta(def *mogrtDefinition) *renderer.Mogrt {
	m := &renderer.Mogrt{Name: def.CapsuleName, AuthorApp: def.AuthorApp, Controls: []renderer.MogrtControl{}, Fonts: []string{}}
	src, ok := def.Source["en_US"]
	if !ok {
		for _, s := range def.Source {
			src = s
			break
		}
	}
	m.Composition = src.Name
	m.Width, m.Height = int(src.Framesize.Size.X), int(src.Framesize.Size.Y)
	if src.Framerate.TicksPerFrame > 0 {
		m.FPS = round(premiereTicksPerSecond/src.Framerate.TicksPerFrame, 3)
	}
	if src.Duration.Scale > 0 {
		m.Duration = round(src.Duration.Value/src.Duration.Scale, 3)
	}
	for _, c := range def.Controls {
		ctl := renderer.MogrtControl{ID: c.ID, Name: c.UIName.text(), Min: c.Min, Max: c.Max, Default: c.Value}
		if t, ok := mogrtControlTypes[c.Type]; ok {
			ctl.Type = t
		} else {
			ctl.Type = fmt.Sprintf("type-%d", c.Type)
		}
		var text localized
		if ctl.Type == "text" && json.Unmarshal(c.Value, &text) == nil {
			ctl.Default, _ = json.Marshal(text.text())
		}
		for _, option := range c.MenuContent {
			raw, _ := json.Marshal(option.text())
			ctl.Options = append(ctl.Options, raw)
		}
		m.Controls = append(m.Controls, ctl)
	}
	fonts := def.Fonts["en_US"]
	if fonts == nil {
		for _, f := range def.Fonts {
			fonts = f
			break
		}
	}
	for _, f := range fonts {
		if f = strings.TrimSpace(f); f != "" && !slices.Contains(m.Fonts, f) {
			m.Fonts = append(m.Fonts, f)
		}
	}
	return m
}
