package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"

	"github.com/oklog/ulid/v2"
	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/blobs"
	"github.com/framefarm/framefarm/renderer"
)

// verifySigned checks the signature of a signed-URL request for key.
func (s *Server) verifySigned(r *request, method, key string) bool {
	args := r.ctx.QueryArgs()
	err := s.URLs.Verify(method, key, string(args.Peek("exp")), string(args.Peek("sig")), s.Clock.Now())
	if err != nil {
		r.fail(newError(http.StatusForbidden, codeForbidden, "%v", err))
		return false
	}
	return true
}

// getFile serves a stored object, with byte ranges, to the holder of a signed URL. When the
// files live in a bucket, it answers 302 to a URL of the object presigned now, so the URL handed
// out stays good for its whole lifetime and the bytes never pass through the coordinator.
func (s *Server) getFile(r *request) {
	key, _ := r.ctx.UserValue("key").(string)
	missing := newError(http.StatusNotFound, codeNotFound, "no such file")
	if blobs.CheckKey(key) != nil || !persistence.Downloadable(key) {
		r.fail(missing)
		return
	}
	if !s.verifySigned(r, http.MethodGet, key) {
		return
	}
	if s.Store.Forgotten(key) {
		r.fail(missing) // deleted: the object store lets it go soon
		return
	}
	if jobID, name, ok := persistence.ParseOutputLink(key); ok {
		// A job's output link: served from the attempt that is current now (earlier attempts'
		// outputs, under their own keys, are never what the link gives).
		j, err := s.Store.Job(jobID)
		if err != nil || j.OutputName != name {
			r.fail(missing)
			return
		}
		key = j.OutputKey()
	}
	if s.Bucket != nil {
		if _, err := s.Blobs.Head(key); err != nil {
			r.failErr(err, missing)
			return
		}
		r.ctx.Redirect(s.Bucket.DownloadURL(string(r.ctx.Method()), key, s.Clock.Now().Add(bucketURLTTL)), http.StatusFound)
		return
	}
	p, release, err := s.Blobs.Local(r.ctx, key)
	if err != nil {
		r.fail(missing)
		return
	}
	defer release()
	f, err := os.Open(p)
	if err != nil {
		r.fail(missing)
		return
	}
	info, err := f.Stat()
	if err != nil || info.IsDir() {
		f.Close()
		r.fail(missing)
		return
	}
	size := int(info.Size())
	ctx := r.ctx
	ctx.Response.Header.Set("Accept-Ranges", "bytes")
	ctx.SetContentType(renderer.ContentType(path.Ext(key)))
	// Files hold what teams uploaded and renders made: a browser saves them, never runs them as a
	// page of this origin (a player in a page still plays them).
	ctx.Response.Header.Set("X-Content-Type-Options", "nosniff")
	ctx.Response.Header.Set("Content-Disposition", `attachment; filename="`+path.Base(key)+`"`)
	start, end := 0, size-1
	if rng := ctx.Request.Header.Peek("Range"); len(rng) > 0 && size > 0 {
		start, end, err = fasthttp.ParseByteRange(rng, size)
		if err != nil {
			f.Close()
			ctx.Response.Header.Set("Content-Range", "bytes */"+strconv.Itoa(size))
			r.fail(newError(http.StatusRequestedRangeNotSatisfiable, codeNotFound, "the range cannot be served"))
			return
		}
		ctx.SetStatusCode(http.StatusPartialContent)
		ctx.Response.Header.SetContentRange(start, end, size)
	}
	if ctx.IsHead() {
		f.Close()
		ctx.Response.Header.SetContentLength(end - start + 1)
		ctx.Response.SkipBody = true
		return
	}
	if _, err := f.Seek(int64(start), 0); err != nil {
		f.Close()
		r.failErr(err, nil)
		return
	}
	ctx.SetBodyStream(&limitedFile{f: f, left: int64(end - start + 1)}, end-start+1)
}

// limitedFile streams part of a file and closes it when fasthttp is done.
type limitedFile struct {
	f    *os.File
	left int64
}

func (l *limitedFile) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.f.Read(p)
	l.left -= int64(n)
	return n, err
}

func (l *limitedFile) Close() error { return l.f.Close() }

// uploadTemplateFile receives a template's project file through the URL of its uploadInfo, which
// names the upload window it serves (none: a URL of a release before windows, window 0).
func (s *Server) uploadTemplateFile(r *request) {
	teamText, _ := r.ctx.UserValue("team").(string)
	idText, _ := r.ctx.UserValue("id").(string)
	windowText, _ := r.ctx.UserValue("window").(string)
	teamID, ok1 := persistence.ParseID(teamText)
	id, ok2 := persistence.ParseID(idText)
	window, err := strconv.Atoi(windowText)
	if !ok1 || !ok2 || (windowText != "" && (err != nil || window < 1)) {
		r.fail(templateNotFound(idText))
		return
	}
	if !s.verifySigned(r, http.MethodPut, persistence.TemplateUploadKey(teamID, id, window)) {
		return
	}
	tpl, err := s.Store.Template(teamID, id)
	if err != nil {
		r.fail(templateNotFound(idText))
		return
	}
	if err := s.Coordinator.UploadAwaited(tpl, window); err != nil {
		r.fail(newError(http.StatusConflict, codeConflict, "%v", err))
		return
	}
	if r.ctx.Request.Header.ContentLength() == 0 {
		// Nothing sent (curl -X PUT without --data-binary): the template still awaits its file.
		r.fail(badField("body", "the upload is empty: PUT the template's file as the request body"))
		return
	}
	limit, which, ok := s.templateRoom(r, teamID, id)
	if !ok {
		return
	}
	key := persistence.TemplateFileKey(id, s.IDs.New(s.Clock.Now()))
	file, ok := s.storeBody(r, key, limit, which)
	if !ok {
		return
	}
	// A file the template processor refuses is queued for deletion by it.
	if _, err := s.Coordinator.TemplateFileArrived(teamID, id, window, file); err != nil {
		r.failErr(err, templateNotFound(idText))
		return
	}
	r.ctx.Response.Header.Set("ETag", `"`+file.SHA256+`"`)
}

// uploadOutput receives a render node's output through the signed URL of its assignment.
func (s *Server) uploadOutput(r *request) {
	jobText, _ := r.ctx.UserValue("job").(string)
	attempt, _ := r.ctx.UserValue("attempt").(string)
	name, _ := r.ctx.UserValue("name").(string)
	key, ok := persistence.AttemptOutputKey(jobText, attempt, name)
	if !ok || blobs.CheckKey(key) != nil {
		r.fail(newError(http.StatusNotFound, codeNotFound, "no such file"))
		return
	}
	if !s.verifySigned(r, http.MethodPut, key) {
		return
	}
	if file, ok := s.storeBody(r, key, s.cfg.MaxOutputBytes, "the largest output, [outputs] max_bytes"); ok {
		r.ctx.Response.Header.Set("ETag", `"`+file.SHA256+`"`)
	}
}

// templateRoom is how large a team's next template file may be, and which limit that is; it
// answers 429 when the team has too many templates in flight, 413 when its quota is spent.
func (s *Server) templateRoom(r *request, teamID, templateID ulid.ULID) (int64, string, bool) {
	usage, err := s.Store.TemplateUsage(teamID, templateID)
	if err != nil {
		r.failErr(err, nil)
		return 0, "", false
	}
	if e := s.inFlightQuota(usage); e != nil {
		r.fail(e)
		return 0, "", false
	}
	left := s.cfg.MaxTeamTemplateBytes - usage.Bytes
	if left < s.cfg.MaxTemplateBytes {
		return max(left, 0), fmt.Sprintf("the team's templates hold %d of the %d bytes allowed, [templates] max_bytes_per_team", usage.Bytes, s.cfg.MaxTeamTemplateBytes), true
	}
	return s.cfg.MaxTemplateBytes, "the largest template file, [templates] max_file_bytes", true
}

// inFlightQuota refuses a template download or inspection past the team's allowance.
func (s *Server) inFlightQuota(usage persistence.TemplateUsage) *apiError {
	if usage.InFlight < s.cfg.MaxTemplatesInFlight {
		return nil
	}
	return &apiError{status: http.StatusTooManyRequests, Code: codeQuotaExceeded, retryAfter: 5,
		Error: fmt.Sprintf("the team has %d templates being downloaded or inspected, the most allowed ([templates] max_in_flight_per_team); send this one when one of them is done", usage.InFlight)}
}

// storeBody streams the request body into the object at key, refusing it past limit (which
// says what the limit is).
func (s *Server) storeBody(r *request, key string, limit int64, which string) (persistence.StoredFile, bool) {
	if cl := r.ctx.Request.Header.ContentLength(); cl > 0 && int64(cl) > limit {
		r.fail(r.tooLargeFor(limit, which))
		return persistence.StoredFile{}, false
	}
	file, err := s.Blobs.Put(key, r.bodyStream(), limit)
	if errors.Is(err, blobs.ErrTooLarge) {
		r.fail(r.tooLargeFor(limit, which))
		return file, false
	}
	if err != nil {
		r.failErr(err, nil)
		return file, false
	}
	return file, true
}
