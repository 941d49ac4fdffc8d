package api

import (
	"maps"
	"net/http"
	"strconv"

	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/renderer"
)

// APIv3Prefix is where the v3 template routes the official client uses live.
const APIv3Prefix = "/api/v3"

func (s *Server) routesV3() {
	v3 := func(method, path string, h func(*request)) { s.handle(method, APIv3Prefix+path, authTeam, h) }
	v3(http.MethodGet, "/templates", s.listTemplatesV3)
	v3(http.MethodGet, "/templates/{id}", s.getTemplateV3)
	v3(http.MethodGet, "/templates/{id}/compositions", s.templateCompositionsV3)
	v3(http.MethodGet, "/templates/{id}/layers", s.templateLayersV3)
}

// templateV3 is a template's metadata without its structure, which has routes of its own.
type templateV3 struct {
	templateMeta
	Error string `json:"error,omitempty"`
}

func (s *Server) listTemplatesV3(r *request) {
	if all, ok := s.teamTemplates(r); ok {
		out := make([]templateV3, len(all))
		for i, tpl := range all {
			out[i] = templateV3{templateMetaOf(tpl), tpl.Error}
		}
		r.json(http.StatusOK, out)
	}
}

func (s *Server) getTemplateV3(r *request) {
	if tpl, ok := s.loadTemplate(r); ok {
		r.json(http.StatusOK, templateV3{templateMetaOf(tpl), tpl.Error})
	}
}

// compositionV3 is one composition; aeid is text, as the official interface has it.
type compositionV3 struct {
	AEID      string         `json:"aeid"`
	Name      string         `json:"name"`
	Width     int            `json:"width"`
	Height    int            `json:"height"`
	Duration  float64        `json:"duration"`
	FrameRate float64        `json:"frame_rate"`
	Data      map[string]any `json:"data"`
}

// layerV3 is one layer; its bounds are numbers always, as the interface's are (data says
// boundsEstimated where the file does not give them exactly).
type layerV3 struct {
	CompositionID int            `json:"composition_id"`
	AEID          int            `json:"aeid"`
	Name          string         `json:"name"`
	Top           float64        `json:"top"`
	Left          float64        `json:"left"`
	Width         float64        `json:"width"`
	Height        float64        `json:"height"`
	StartTime     float64        `json:"start_time"`
	InPoint       float64        `json:"in_point"`
	OutPoint      float64        `json:"out_point"`
	LayerType     string         `json:"layer_type"`
	SourceType    *string        `json:"source_type"`
	SourceCompID  *int           `json:"source_comp_id"`
	ParentID      *int           `json:"parent_id"`
	Data          map[string]any `json:"data"`
}

// inspectedPage reads a page's bounds and loads a template whose structure is known, or answers
// why it cannot.
func (s *Server) inspectedPage(r *request) (in *renderer.Inspection, offset, limit int, ok bool) {
	if offset, limit, ok = page(r); !ok {
		return nil, 0, 0, false
	}
	tpl, ok := s.loadTemplate(r)
	if !ok {
		return nil, 0, 0, false
	}
	if tpl.Inspection == nil {
		r.fail(newError(http.StatusConflict, validate.CodeTemplateNotReady, "template %s is %s; its compositions and layers are known once it is uploaded", tpl.ID, tpl.Status))
		return nil, 0, 0, false
	}
	return tpl.Inspection, offset, limit, true
}

// compositionID is a composition's id in the file; inspections older than ids number them.
func compositionID(in *renderer.Inspection, i int) int {
	if in.Version < 2 {
		return i + 1
	}
	return in.Compositions[i].ID
}

func (s *Server) templateCompositionsV3(r *request) {
	in, offset, limit, ok := s.inspectedPage(r)
	if !ok {
		return
	}
	out := []compositionV3{}
	for i := offset; i < len(in.Compositions) && len(out) < limit; i++ {
		c := in.Compositions[i]
		data := map[string]any{"layers": len(c.Layers)}
		maps.Copy(data, c.Data)
		out = append(out, compositionV3{AEID: strconv.Itoa(compositionID(in, i)), Name: c.Name, Width: c.Width, Height: c.Height,
			Duration: c.Duration, FrameRate: c.FPS, Data: data})
	}
	r.json(http.StatusOK, out)
}

func (s *Server) templateLayersV3(r *request) {
	in, offset, limit, ok := s.inspectedPage(r)
	if !ok {
		return
	}
	out := []layerV3{}
	n := 0
	for i, c := range in.Compositions {
		if n+len(c.Layers) <= offset {
			n += len(c.Layers)
			continue
		}
		for _, l := range c.Layers {
			if n++; n <= offset {
				continue
			}
			if len(out) == limit {
				r.json(http.StatusOK, out)
				return
			}
			out = append(out, layerV3Of(in, compositionID(in, i), l))
		}
	}
	r.json(http.StatusOK, out)
}

func layerV3Of(in *renderer.Inspection, compID int, l renderer.Layer) layerV3 {
	v := layerV3{CompositionID: compID, AEID: l.ID, Name: l.Name, StartTime: l.StartTime, InPoint: l.InPoint, OutPoint: l.OutPoint,
		LayerType: l.Type, SourceCompID: l.SourceCompID, ParentID: l.ParentID, Data: map[string]any{"index": l.Index}}
	if in.Version < 2 {
		v.AEID = l.Index
	}
	if l.SourceType != "" {
		v.SourceType = &l.SourceType
	}
	if l.Text != "" {
		v.Data["text"] = l.Text
	}
	maps.Copy(v.Data, l.Data)
	if b := l.Bounds; b != nil {
		v.Top, v.Left, v.Width, v.Height = b.Top, b.Left, b.Width, b.Height
	} else {
		v.Data["boundsEstimated"] = true // inspected by a release that gave none, and not again
	}
	return v
}

// page reads limit (default 300, at most 1000; more is capped as the official interface does)
// and offset (default 0).
func page(r *request) (offset, limit int, ok bool) {
	args := r.ctx.QueryArgs()
	limit = 300
	if v := args.Peek("limit"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 1 {
			r.fail(badField("limit", "must be an integer of at least 1 (at most 1000 are returned)"))
			return 0, 0, false
		}
		limit = min(n, 1000)
	}
	if v := args.Peek("offset"); v != nil {
		n, err := strconv.Atoi(string(v))
		if err != nil || n < 0 {
			r.fail(badField("offset", "must be an integer of at least 0"))
			return 0, 0, false
		}
		offset = n
	}
	return offset, limit, true
}
