package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer/fontfile"
	"github.com/framefarm/framefarm/renderer/secrets"
)

type fontView struct {
	ID         string    `json:"id"`
	FamilyName string    `json:"familyName"`
	FileName   string    `json:"fileName"`
	Size       int64     `json:"size"`
	CreatedAt  time.Time `json:"createdAt"`
}

func fontViewOf(f *persistence.Font) fontView {
	return fontView{ID: f.ID.String(), FamilyName: f.FamilyName, FileName: f.FileName, Size: f.File.Size, CreatedAt: f.CreatedAt.UTC()}
}

func fontNotFound(id string) *apiError {
	return newError(http.StatusNotFound, codeFontNotFound, "no font %q", id)
}

// uploadFont takes a multipart form: the TrueType file in field "font", and optionally
// "familyName" (read from the font itself when absent).
func (s *Server) uploadFont(r *request) {
	limit := s.cfg.MaxFontBytes
	if cl := r.ctx.Request.Header.ContentLength(); cl > 0 && int64(cl) > limit+64<<10 {
		r.fail(r.tooLarge(limit))
		return
	}
	_, params, err := mime.ParseMediaType(string(r.ctx.Request.Header.ContentType()))
	if err != nil || params["boundary"] == "" {
		r.fail(badField("font", "send the font as multipart/form-data with a field named font"))
		return
	}
	form := multipart.NewReader(io.LimitReader(r.bodyStream(), limit+64<<10), params["boundary"])
	var data []byte
	var fileName, family string
	for {
		part, err := form.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.fail(badField("font", "the multipart body cannot be read: "+err.Error()))
			return
		}
		switch part.FormName() {
		case "font":
			fileName = path.Base(strings.ReplaceAll(part.FileName(), "\\", "/"))
			data, err = io.ReadAll(io.LimitReader(part, limit+1))
			if err != nil {
				r.fail(badField("font", "the file cannot be read: "+err.Error()))
				return
			}
			if int64(len(data)) > limit {
				r.fail(r.tooLarge(limit))
				return
			}
		case "familyName":
			b, _ := io.ReadAll(io.LimitReader(part, 257))
			family = strings.TrimSpace(string(b))
		default:
			r.fail(badField(part.FormName(), "unknown form field; send font and optionally familyName"))
			return
		}
	}
	switch {
	case data == nil:
		r.fail(badField("font", "is required"))
		return
	case fileName == "" || fileName == "." || fileName == "/" || !utf8.ValidString(fileName) || len(fileName) > 255:
		r.fail(badField("font", "the file part needs a file name, such as Brand-Bold.ttf"))
		return
	case len(family) > 256:
		r.fail(badField("familyName", "is longer than 256 characters"))
		return
	}
	names, err := fontfile.Read(data)
	if err != nil {
		r.fail(badField("font", "the file is "+err.Error()))
		return
	}
	if family == "" {
		family = names.Family
	}
	f, err := s.Coordinator.AddFont(&persistence.Font{TeamID: r.team, FamilyName: family, PostScriptName: names.PostScript, FileName: fileName}, data)
	if err != nil {
		if errors.Is(err, persistence.ErrConflict) {
			r.fail(newError(http.StatusConflict, codeConflict, "the font library already has a %q; delete it first to replace it", fileName))
			return
		}
		r.failErr(err, nil)
		return
	}
	r.json(http.StatusCreated, fontViewOf(f))
}

func (s *Server) listFonts(r *request) {
	fonts, err := s.Store.Fonts(r.team)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	out := make([]fontView, len(fonts))
	for i, f := range fonts {
		out[i] = fontViewOf(f)
	}
	r.json(http.StatusOK, out)
}

func (s *Server) getFont(r *request) {
	if f, ok := teamRecord(r, fontNotFound, s.Store.Font); ok {
		r.json(http.StatusOK, fontViewOf(f))
	}
}

func (s *Server) deleteFont(r *request) {
	if _, ok := teamRecord(r, fontNotFound, s.Coordinator.DeleteFont); ok {
		r.noContent()
	}
}

type secretView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// maxSecretBytes caps a secret's value.
const maxSecretBytes = 64 << 10

func (s *Server) putSecret(r *request) {
	var body struct {
		Name  string  `json:"name"`
		Value *string `json:"value"`
	}
	if !r.decode(&body) {
		return
	}
	switch {
	case !secrets.NamePattern.MatchString(body.Name):
		r.fail(badField("name", "must be 1 to 128 letters, digits, - or _"))
		return
	case body.Value == nil:
		r.fail(badField("value", "is required"))
		return
	case len(*body.Value) > maxSecretBytes:
		r.fail(badField("value", fmt.Sprintf("is larger than %d bytes", maxSecretBytes)))
		return
	}
	sec, err := s.Coordinator.AddSecret(r.team, body.Name, *body.Value)
	if errors.Is(err, persistence.ErrConflict) {
		r.fail(newError(http.StatusConflict, codeConflict, "a secret named %q exists; delete it first to replace it", body.Name))
		return
	}
	if err != nil {
		r.failErr(err, nil)
		return
	}
	r.json(http.StatusCreated, secretView{ID: sec.ID.String(), Name: sec.Name, CreatedAt: sec.CreatedAt.UTC()})
}

func (s *Server) listSecrets(r *request) {
	secrets, err := s.Store.Secrets(r.team)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	out := make([]secretView, len(secrets))
	for i, sec := range secrets {
		out[i] = secretView{ID: sec.ID.String(), Name: sec.Name, CreatedAt: sec.CreatedAt.UTC()}
	}
	r.json(http.StatusOK, out)
}

func (s *Server) deleteSecret(r *request) {
	// 200 with what was deleted, as the official interface answers (fonts and templates: 204).
	if sec, ok := teamRecord(r, func(id string) *apiError { return notFound("secret", id) }, s.Coordinator.DeleteSecret); ok {
		r.json(http.StatusOK, secretView{ID: sec.ID.String(), Name: sec.Name, CreatedAt: sec.CreatedAt.UTC()})
	}
}
