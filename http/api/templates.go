package api

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

var templateTypes = []string{renderer.TemplateAEP, renderer.TemplateZip, renderer.TemplateMogrt, renderer.TemplateJSON}

func templateNotFound(id string) *apiError {
	return newError(http.StatusNotFound, validate.CodeTemplateNotFound, "no template %q", id)
}

func badField(field, msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, Code: validate.CodeValidation, Error: field + ": " + msg,
		Details: []validate.FieldError{{Field: field, Message: msg}}}
}

func checkDisplayName(name string) *apiError {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return badField("displayName", "is required")
	case len(name) > 256:
		return badField("displayName", "is longer than 256 characters")
	}
	return nil
}

func (s *Server) createTemplate(r *request) {
	var body struct {
		Type        string `json:"type"`
		DisplayName string `json:"displayName"`
		Src         string `json:"src"`
	}
	if !r.decode(&body) {
		return
	}
	if !slices.Contains(templateTypes, body.Type) {
		r.fail(badField("type", "must be aep (an After Effects project), zip (a project or a Lottie export with its files), mogrt, or json (a Lottie animation as Bodymovin exports it)"))
		return
	}
	if e := checkDisplayName(body.DisplayName); e != nil {
		r.fail(e)
		return
	}
	if body.Src != "" {
		if e := s.checkURL("src", body.Src); e != nil {
			r.fail(e)
			return
		}
	}
	now := s.Clock.Now()
	tpl := &persistence.Template{
		ID: s.IDs.New(now), TeamID: r.team, Type: body.Type, DisplayName: strings.TrimSpace(body.DisplayName),
		Status: persistence.TemplateAwaitingUpload, Src: body.Src, CreatedAt: now, UpdatedAt: now, UploadWindow: 1,
	}
	if body.Src != "" {
		tpl.Status = persistence.TemplateDownloading
		usage, err := s.Store.TemplateUsage(r.team, tpl.ID)
		if err != nil {
			r.failErr(err, nil)
			return
		}
		if e := s.inFlightQuota(usage); e != nil {
			r.fail(e)
			return
		}
	}
	if err := s.Coordinator.CreateTemplate(tpl); err != nil {
		r.failErr(err, nil)
		return
	}
	r.json(http.StatusCreated, s.templateView(tpl, r, nil)) // not inspected yet
}

// checkURL checks a URL the coordinator will fetch.
func (s *Server) checkURL(field, raw string) *apiError {
	if verr := validate.URL(raw, field, s.cfg.Limits); verr != nil {
		return fromValidation(verr)
	}
	return nil
}

// fontLibrary is the request's team's fonts, which templates' views compare their fonts with
// (none when the library cannot be read: every font then shows as missing).
func (s *Server) fontLibrary(r *request) []*persistence.Font {
	fonts, err := s.Store.Fonts(r.team)
	if err != nil {
		r.logger().Warn("cannot read the team's fonts", "err", err)
	}
	return fonts
}

func (s *Server) loadTemplate(r *request) (*persistence.Template, bool) {
	return teamRecord(r, templateNotFound, s.Store.Template)
}

func (s *Server) getTemplate(r *request) {
	if tpl, ok := s.loadTemplate(r); ok {
		r.json(http.StatusOK, s.templateView(tpl, r, s.fontLibrary(r)))
	}
}

// teamTemplates loads the team's templates, or answers why it cannot.
func (s *Server) teamTemplates(r *request) ([]*persistence.Template, bool) {
	all, err := s.Store.Templates(r.team)
	if err != nil {
		r.failErr(err, nil)
		return nil, false
	}
	return all, true
}

func (s *Server) listTemplates(r *request) {
	if all, ok := s.teamTemplates(r); ok {
		out := make([]*templateView, len(all))
		library := s.fontLibrary(r)
		for i, tpl := range all {
			out[i] = s.templateView(tpl, r, library)
		}
		r.json(http.StatusOK, out)
	}
}

func (s *Server) renameTemplate(r *request) {
	tpl, ok := s.loadTemplate(r)
	if !ok {
		return
	}
	var body struct {
		DisplayName string `json:"displayName"`
	}
	if !r.decode(&body) {
		return
	}
	if e := checkDisplayName(body.DisplayName); e != nil {
		r.fail(e)
		return
	}
	renamed, err := s.Coordinator.RenameTemplate(r.team, tpl.ID, strings.TrimSpace(body.DisplayName))
	if err != nil {
		r.failErr(err, templateNotFound(tpl.ID.String()))
		return
	}
	r.json(http.StatusOK, s.templateView(renamed, r, s.fontLibrary(r)))
}

func (s *Server) deleteTemplate(r *request) {
	tpl, ok := s.loadTemplate(r)
	if !ok {
		return
	}
	err := s.Coordinator.DeleteTemplate(r.team, tpl.ID)
	if errors.Is(err, persistence.ErrConflict) {
		r.fail(newError(http.StatusConflict, codeConflict, "template %s is used by queued or pending jobs; cancel them or wait for them to finish", tpl.ID))
		return
	}
	if err != nil {
		r.failErr(err, templateNotFound(tpl.ID.String()))
		return
	}
	r.noContent()
}

func (s *Server) downloadTemplate(r *request) {
	tpl, ok := s.loadTemplate(r)
	if !ok {
		return
	}
	if tpl.File == nil {
		// Nothing to download (never uploaded, or its download failed): there is no such file.
		r.fail(newError(http.StatusNotFound, codeNotFound, "template %s has no file (status %s)", tpl.ID, tpl.Status))
		return
	}
	r.json(http.StatusOK, map[string]string{"url": s.views.signedURL(tpl.File.Key)})
}

// freshUploadURL hands out a new upload URL; the template keeps its status until a file arrives,
// and a template that has a file takes the next one as its replacement.
func (s *Server) freshUploadURL(r *request) {
	tpl, ok := s.loadTemplate(r)
	if !ok {
		return
	}
	opened, err := s.Coordinator.OpenTemplateReplacement(r.team, tpl.ID)
	if err != nil {
		r.failErr(err, templateNotFound(tpl.ID.String()))
		return
	}
	tpl = opened
	r.json(http.StatusOK, s.uploadInfo(tpl))
}

// templateCompositions is the extension listing compositions and their layers in detail.
func (s *Server) templateCompositions(r *request) {
	tpl, ok := s.loadTemplate(r)
	if !ok {
		return
	}
	if tpl.Inspection == nil {
		r.fail(newError(http.StatusConflict, validate.CodeTemplateNotReady, "template %s is %s; compositions are known once it is uploaded", tpl.ID, tpl.Status))
		return
	}
	r.json(http.StatusOK, tpl.Inspection.Compositions)
}
