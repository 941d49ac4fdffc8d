package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/oklog/ulid/v2"
	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/http/validate"
	"github.com/framefarm/framefarm/persistence"
)

// Error codes beyond those of validation; openapi.json's Error schema lists them all.
const (
	codeUnauthorized     = "unauthorized"
	codeQuotaExceeded    = "quota_exceeded"
	codeQueueCap         = "queue_cap"
	codeForbidden        = "forbidden"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeNotCancellable   = "not_cancellable"
	codeConflict         = "conflict"
	codePayloadTooLarge  = "payload_too_large"
	codeRateLimited      = "rate_limited"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal"
	codeBadRequest       = "bad_request"
	codeRequestTimeout   = "request_timeout"
	codeUnsupportedMedia = "unsupported_media_type"
	codeFontNotFound     = "font_not_found"
)

// apiError is an HTTP error answer.
type apiError struct {
	status     int
	Error      string                `json:"error"`
	Code       string                `json:"code"`
	Details    []validate.FieldError `json:"details,omitempty"`
	retryAfter int
}

func newError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, Code: code, Error: fmt.Sprintf(format, args...)}
}

// fromValidation answers a refused request: 400, or 404 when what it names first is a template
// that does not exist (for this team).
func fromValidation(e *validate.Error) *apiError {
	status := http.StatusBadRequest
	if e.Code == validate.CodeTemplateNotFound {
		status = http.StatusNotFound
	}
	return &apiError{status: status, Code: e.Code, Error: e.Message, Details: e.Details}
}

// request is one API call in a handler's hands.
type request struct {
	ctx *fasthttp.RequestCtx
	id  string // X-Request-Id
	// log is made by logger on first use: most requests log nothing.
	log  *slog.Logger
	team ulid.ULID
	// holder is the request's token, once authenticated (event streams end with it).
	holder Holder
	// admin is set once the request is authenticated with an admin token; role is a team
	// token's.
	admin bool
	role  persistence.TokenRole
	s     *Server
}

// logger is the request's logger, carrying its id and, once authenticated, its team.
func (r *request) logger() *slog.Logger {
	if r.log == nil {
		r.log = r.s.log.With("request_id", r.id)
		if r.team != (ulid.ULID{}) {
			r.log = r.log.With("team", r.team.String())
		}
	}
	return r.log
}

// answerBuffers keep the buffers answers are encoded into: a page of a listing is large, and a
// buffer grown for each one allocated twice its size per request.
var answerBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledAnswer is the largest buffer kept for the next answer.
const maxPooledAnswer = 4 << 20

func (r *request) json(status int, v any) {
	buf := answerBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledAnswer {
			buf.Reset()
			answerBuffers.Put(buf)
		}
	}()
	body, err := encodeAnswer(buf, v)
	if err != nil {
		r.fail(newError(http.StatusInternalServerError, codeInternal, "cannot encode the answer"))
		r.logger().Error("cannot encode an answer", "err", err)
		return
	}
	r.raw(status, body) // copied into the response
}

// encodeAnswer encodes v into buf, as JSON without escaping <, > and & (URLs are full of them),
// and returns the encoding.
func encodeAnswer(buf *bytes.Buffer, v any) ([]byte, error) {
	if a, ok := v.(jsonAppender); ok {
		out, err := a.appendJSON(buf.AvailableBuffer())
		if err != nil {
			return nil, err
		}
		buf.Write(out) // the buffer keeps what it grew to, for the next answer
		return buf.Bytes(), nil
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// raw answers with JSON already encoded.
func (r *request) raw(status int, body []byte) {
	r.ctx.SetStatusCode(status)
	r.ctx.SetContentType("application/json")
	r.ctx.SetBody(body)
}

// marshal encodes v as JSON without escaping <, > and &, which URLs are full of.
func marshal(v any) ([]byte, error) { return encodeAnswer(new(bytes.Buffer), v) }

func (r *request) noContent() { r.ctx.SetStatusCode(http.StatusNoContent) }

func (r *request) fail(e *apiError) { writeError(r.ctx, e) }

// writeError puts e in ctx's answer.
func writeError(ctx *fasthttp.RequestCtx, e *apiError) {
	if e.retryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	body, _ := marshal(e)
	ctx.SetStatusCode(e.status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// unreadable answers a request fasthttp could not read as HTTP (a malformed request line or
// header, headers past the buffer, a broken chunked body, a body that ended before its
// Content-Length, a client too slow) in JSON like every other error; fasthttp closes the
// connection after it.
func unreadable(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.As(err, &small):
		writeError(ctx, newError(http.StatusRequestHeaderFieldsTooLarge, codeBadRequest, "the request's headers are larger than the server reads"))
	case errors.As(err, &netErr) && netErr.Timeout():
		writeError(ctx, newError(http.StatusRequestTimeout, codeRequestTimeout, "the request did not arrive in time ([http] header_timeout for its headers, request_timeout for its body)"))
	default:
		writeError(ctx, newError(http.StatusBadRequest, codeBadRequest, "the request could not be read as HTTP/1.1: %v", err))
	}
}

// failErr answers an error from the store or the actors.
func (r *request) failErr(err error, notFound *apiError) {
	switch {
	case errors.Is(err, persistence.ErrNotFound) && notFound != nil:
		r.fail(notFound)
	case errors.Is(err, actors.ErrUploadNotAwaited):
		r.fail(newError(http.StatusConflict, codeConflict, "%v", err))
	case errors.Is(err, persistence.ErrNotReplicated):
		// The leader changed under the write: it may have been done; an Idempotency-Key makes
		// sending it again safe.
		r.fail(&apiError{status: http.StatusServiceUnavailable, Code: codeUnavailable, Error: err.Error() + "; send the request again (with its Idempotency-Key, if it creates)", retryAfter: 1})
	case errors.Is(err, persistence.ErrEntryTooLarge):
		r.fail(newError(http.StatusRequestEntityTooLarge, codePayloadTooLarge, "%v: send it in smaller parts (a batch's jobs in several batches)", err))
	case errors.Is(err, persistence.ErrClosed):
		r.fail(&apiError{status: http.StatusServiceUnavailable, Code: codeUnavailable, Error: "the server is shutting down", retryAfter: 5})
	case errors.Is(err, actors.ErrUnavailable):
		// An actor too busy to answer in time: an overload the client can wait out, not a
		// fault. What was asked may still be done once the actor gets to it.
		r.logger().Warn("an actor did not answer in time", "err", err)
		r.fail(&apiError{status: http.StatusServiceUnavailable, Code: codeUnavailable, Error: "the coordinator is overloaded and did not answer in time; what was asked may still be done, check before sending it again", retryAfter: 1})
	default:
		r.logger().Error("request failed", "err", err)
		r.fail(newError(http.StatusInternalServerError, codeInternal, "internal error; the request id is in X-Request-Id"))
	}
}

// body reads the request body, up to limit bytes.
func (r *request) body(limit int64) ([]byte, *apiError) {
	// Any Content-Type is read as JSON (curl -d sends application/x-www-form-urlencoded), but
	// a multipart form is certainly not the JSON this route takes.
	if ct := r.ctx.Request.Header.ContentType(); bytes.HasPrefix(bytes.ToLower(ct), []byte("multipart/")) {
		return nil, newError(http.StatusUnsupportedMediaType, codeUnsupportedMedia, "this route takes a JSON body: send it with Content-Type: application/json, not %s", ct)
	}
	if cl := r.ctx.Request.Header.ContentLength(); cl > 0 && int64(cl) > limit {
		return nil, r.tooLarge(limit)
	}
	data, err := io.ReadAll(io.LimitReader(r.bodyStream(), limit+1))
	if err != nil {
		return nil, newError(http.StatusBadRequest, validate.CodeInvalidJSON, "the body could not be read: %v", err)
	}
	if int64(len(data)) > limit {
		return nil, r.tooLarge(limit)
	}
	// Windows PowerShell 5.1 writes a byte-order mark before the JSON it sends: JSON has none
	// to give, so it is dropped.
	return bytes.TrimPrefix(data, utf8BOM), nil
}

var utf8BOM = []byte("\xef\xbb\xbf")

// bodyStream is the request's body as it arrives. A request that sends none (no Content-Length
// and no Transfer-Encoding, as curl -X POST does) has no stream: it reads as empty.
func (r *request) bodyStream() io.Reader {
	if stream := r.ctx.RequestBodyStream(); stream != nil {
		return stream
	}
	return bytes.NewReader(nil)
}

// drainBody reads and drops what the handler left of the request body, up to limit: a client
// still sending a body the route answered without reading (an unknown id, a bad token) would
// otherwise have its connection reset before it reads the answer. Past limit the connection is
// closed after the answer.
func (r *request) drainBody(limit int64) {
	stream := r.ctx.RequestBodyStream()
	if stream == nil {
		return // no body streamed: nothing left unread
	}
	if n, _ := io.CopyN(io.Discard, stream, limit+1); n > limit {
		r.ctx.SetConnectionClose()
	}
}

// drainLimit is how much of a refused body is read and dropped so the client, still sending,
// can read the answer; past it the connection is closed.
const drainLimit = 64 << 20

// tooLarge refuses a body over limit. The client may still be sending it: closing the connection
// with unread data would reset it before the answer is read, so a bounded amount is drained first.
func (r *request) tooLarge(limit int64) *apiError { return r.tooLargeFor(limit, "") }

// tooLargeFor is tooLarge saying which limit the body hit.
func (r *request) tooLargeFor(limit int64, which string) *apiError {
	io.CopyN(io.Discard, r.bodyStream(), drainLimit)
	r.ctx.SetConnectionClose()
	if which != "" {
		which = " (" + which + ")"
	}
	return newError(http.StatusRequestEntityTooLarge, codePayloadTooLarge, "the body is larger than the %d bytes allowed%s", limit, which)
}

// decode reads a small JSON body into v, strictly.
func (r *request) decode(v any) bool {
	body, e := r.body(r.s.cfg.MaxBodyBytes)
	if e != nil {
		r.fail(e)
		return false
	}
	if verr := validate.Strict(body, v); verr != nil {
		r.fail(fromValidation(verr))
		return false
	}
	return true
}

// teamRecord reads (or deletes) the record named by the path's {id} for the request's team with
// do; an id that is unknown or another team's answers missing(id), a malformed one 400.
func teamRecord[T any](r *request, missing func(id string) *apiError, do func(team, id ulid.ULID) (T, error)) (T, bool) {
	var rec T
	id, ok := pathID(r)
	if !ok {
		return rec, false
	}
	rec, err := do(r.team, id)
	if err != nil {
		r.failErr(err, missing(id.String()))
		return rec, false
	}
	return rec, true
}

// pathID reads the path's {id}; one that is not a well-formed ULID is a 400 (an unknown one is
// the caller's 404).
func pathID(r *request) (ulid.ULID, bool) {
	text, _ := r.ctx.UserValue("id").(string)
	id, ok := persistence.ParseID(text)
	if !ok {
		r.fail(badField("id", fmt.Sprintf("%q is not an id (a ULID: 26 characters of 0-9 and A-Z without I, L, O, U)", text)))
	}
	return id, ok
}

func notFound(what, id string) *apiError {
	return newError(http.StatusNotFound, codeNotFound, "no %s %q", what, id)
}
