package api

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/framefarm/framefarm/persistence"
)

// maxIdempotencyKey caps the Idempotency-Key header.
const maxIdempotencyKey = 255

// idempotent is a creation request's Idempotency-Key and what identifies the request itself.
type idempotent struct {
	key, requestHash string
}

// idempotency reads the request's Idempotency-Key (nil when none is sent); a malformed one is
// answered with a 400.
func (r *request) idempotency(body []byte) (*idempotent, bool) {
	raw := r.ctx.Request.Header.Peek("Idempotency-Key")
	if raw == nil {
		return nil, true
	}
	if len(raw) == 0 || len(raw) > maxIdempotencyKey {
		r.fail(badField("Idempotency-Key", "must be 1 to 255 visible ASCII characters"))
		return nil, false
	}
	for _, c := range raw {
		if c < 0x21 || c > 0x7e {
			r.fail(badField("Idempotency-Key", "must be 1 to 255 visible ASCII characters"))
			return nil, false
		}
	}
	h := sha256.New()
	h.Write(r.ctx.Method())
	h.Write([]byte{0})
	h.Write(r.ctx.Path())
	h.Write([]byte{0})
	h.Write(body)
	return &idempotent{key: string(raw), requestHash: hex.EncodeToString(h.Sum(nil))}, true
}

// createOnce answers a creation with status and answer, after create stores its records. With an
// Idempotency-Key, the answer is encoded before the write and kept in the same write (create
// receives it); a key answered within a day gets that answer again for the same request, or a
// 409 for another one.
func (r *request) createOnce(body []byte, status int, answer any, create func(remember *persistence.Answer) error) {
	once, ok := r.idempotency(body)
	if !ok {
		return
	}
	encoded, err := marshal(answer)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	var remember *persistence.Answer
	if once != nil {
		remember = &persistence.Answer{TeamID: r.team, Key: once.key, RequestHash: once.requestHash, Status: status, Body: encoded}
	}
	if err := create(remember); err != nil {
		if !once.replay(r, err) {
			r.failCreate(err)
		}
		return
	}
	r.raw(status, encoded)
}

// replay answers a request whose key was answered within a day: that answer again for the same
// request, a 409 for another one. It reports whether err was such a refusal.
func (i *idempotent) replay(r *request, err error) bool {
	var answered *persistence.AnsweredError
	if i == nil || !errors.As(err, &answered) {
		return false
	}
	if answered.Answer.RequestHash != i.requestHash {
		r.fail(newError(http.StatusConflict, codeConflict, "the Idempotency-Key %q was used for another request within the last 24 hours", i.key))
		return true
	}
	r.ctx.Response.Header.Set("Idempotent-Replayed", "true")
	r.ctx.SetStatusCode(answered.Answer.Status)
	r.ctx.SetContentType("application/json")
	r.ctx.SetBody(answered.Answer.Body)
	return true
}
