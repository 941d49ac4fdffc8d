package persistence

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/renderer"
)

// Job records are stored in a compact binary form: every field in a fixed order, strings and
// lists length-prefixed, times as seconds and nanoseconds (UTC). It decodes in a fraction of
// the time JSON takes, which listings (a hundred records a page) and intake feel first. The
// first byte is the form's version (jobCodecVersion, jobfields_gen.go); records written as JSON
// before it (they start with '{') are still read, and so are those of earlier forms.

var errBadJobRecord = errors.New("malformed job record")

func encodeJob(j *Job) []byte {
	w := &recordWriter{b: make([]byte, 0, 512)}
	w.b = append(w.b, jobCodecVersion)
	jobFields(w, j, jobCodecVersion)
	return w.b
}

func decodeJob(raw []byte) (*Job, error) {
	j := new(Job)
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, j); err != nil {
			return nil, fmt.Errorf("decode job: %w", err)
		}
		return j, nil
	}
	if len(raw) == 0 || raw[0] < 1 || raw[0] > jobCodecVersion {
		return nil, fmt.Errorf("decode job: %w: its form is not 1 to %d", errBadJobRecord, jobCodecVersion)
	}
	r := &recordReader{b: raw[1:], s: string(raw[1:])}
	jobFields(r, j, raw[0])
	if r.err != nil || len(r.b) != 0 {
		return nil, fmt.Errorf("decode job: %w", errBadJobRecord)
	}
	return j, nil
}

func idList(c fieldCodec, ids *[]ulid.ULID) { listOf(c, ids, 16, c.id) }

func failureFields(c fieldCodec, failures *[]AttemptFailure) {
	listOf(c, failures, 4, func(f *AttemptFailure) {
		c.int(&f.Attempt)
		c.string(&f.Node)
		c.string(&f.Error)
		c.time(&f.At)
	})
}

func specFields(c fieldCodec, s *JobSpec) {
	c.string(&s.Composition)
	c.string(&s.TemplateSrc)
	listOf(c, &s.Assets, 10, func(a *renderer.Asset) {
		for _, f := range []*string{&a.Type, &a.LayerName, &a.Composition, &a.Property, &a.Expression, &a.Src, &a.Name, &a.JobID} {
			c.string(f)
		}
		c.raw(&a.Value)
		c.raw(&a.Params)
	})
	c.bool(&s.Preview)
	c.strings(&s.Fonts)
	st := &s.Settings
	for _, f := range []*string{&st.Type, &st.Quality, &st.Codec, &st.Engine, &st.Preset} {
		c.string(f)
	}
	optional(c, &st.Frames, func(f *renderer.Frames) {
		c.int(&f.Start)
		c.int(&f.End)
		c.bool(&f.Range)
	})
	optional(c, &s.Upload, func(u *Upload) {
		c.string(&u.Prefix)
		c.string(&u.OutputURL)
		c.string(&u.Provider)
		optional(c, &u.Params, func(p *UploadParams) {
			for _, f := range []*string{&p.Endpoint, &p.Region, &p.Bucket, &p.ACL, &p.AccessKeyID, &p.AccessKeySecret} {
				c.string(f)
			}
		})
	})
	optional(c, &s.Webhook, func(h *Webhook) {
		c.string(&h.URL)
		c.string(&h.Method)
		c.stringMap(&h.Headers)
		c.raw(&h.Data)
		c.bool(&h.Custom)
	})
}

// fieldCodec writes or reads one field through a pointer to it.
type fieldCodec interface {
	byte(*byte)
	bool(*bool)
	id(*ulid.ULID)
	int(*int)
	int64(*int64)
	float(*float64)
	string(*string)
	strings(*[]string)
	raw(*json.RawMessage)
	time(*time.Time)
	stringMap(*map[string]string)
	// list writes, or reads and returns, whether a list (or map) is there at all and its
	// length, so nil and empty stay apart; a length read is refused when the rest of the record
	// cannot hold it at minSize bytes an item.
	list(present bool, n, minSize int) (bool, int)
	// present writes, or reads and returns, whether an optional value is there.
	present(bool) bool
	decoding() bool
}

// listOf writes or reads a list, each item through item.
func listOf[T any](c fieldCodec, l *[]T, minSize int, item func(*T)) {
	present, n := c.list(*l != nil, len(*l), minSize)
	if c.decoding() {
		if !present {
			return
		}
		*l = make([]T, n)
	}
	for i := range *l {
		item(&(*l)[i])
	}
}

// optional writes or reads whether a value is there, then the value through fields.
func optional[T any](c fieldCodec, p **T, fields func(*T)) {
	if !c.present(*p != nil) {
		return
	}
	if c.decoding() {
		*p = new(T)
	}
	fields(*p)
}

// recordWriter appends the fields of a record.
type recordWriter struct{ b []byte }

var _ fieldCodec = (*recordWriter)(nil)

func (w *recordWriter) decoding() bool         { return false }
func (w *recordWriter) byte(v *byte)           { w.b = append(w.b, *v) }
func (w *recordWriter) id(u *ulid.ULID)        { w.b = append(w.b, u[:]...) }
func (w *recordWriter) uvarint(v uint64)       { w.b = binary.AppendUvarint(w.b, v) }
func (w *recordWriter) int(v *int)             { w.b = binary.AppendVarint(w.b, int64(*v)) }
func (w *recordWriter) int64(v *int64)         { w.b = binary.AppendVarint(w.b, *v) }
func (w *recordWriter) string(s *string)       { w.uvarint(uint64(len(*s))); w.b = append(w.b, *s...) }
func (w *recordWriter) raw(b *json.RawMessage) { w.uvarint(uint64(len(*b))); w.b = append(w.b, *b...) }
func (w *recordWriter) float(v *float64) {
	w.b = binary.BigEndian.AppendUint64(w.b, math.Float64bits(*v))
}

func (w *recordWriter) strings(l *[]string) {
	listOf(w, l, 1, w.string)
}

func (w *recordWriter) list(present bool, n, _ int) (bool, int) {
	w.present(present)
	w.uvarint(uint64(n))
	return present, n
}

func (w *recordWriter) present(v bool) bool {
	w.bool(&v)
	return v
}

func (w *recordWriter) bool(v *bool) {
	if *v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// time writes a zero time as one 0 byte, any other as 1, seconds and nanoseconds (UTC).
func (w *recordWriter) time(t *time.Time) {
	if t.IsZero() {
		w.b = append(w.b, 0)
		return
	}
	w.b = append(w.b, 1)
	w.b = binary.AppendVarint(w.b, t.Unix())
	w.uvarint(uint64(t.Nanosecond()))
}

// stringMap writes a map's presence, length, and pairs in key order.
func (w *recordWriter) stringMap(m *map[string]string) {
	names := make([]string, 0, len(*m))
	for name := range *m {
		names = append(names, name)
	}
	slices.Sort(names)
	w.list(*m != nil, len(names), 2)
	for _, name := range names {
		value := (*m)[name]
		w.string(&name)
		w.string(&value)
	}
}

// recordReader reads what recordWriter wrote, remembering the first error. Its strings are
// cut from s, one copy of the whole record, so a record costs one string allocation. Without s
// (the reader of an entry, whose job records decodeJob reads with one of their own), each string
// is copied alone.
type recordReader struct {
	b   []byte
	s   string
	err error
}

var _ fieldCodec = (*recordReader)(nil)

func (r *recordReader) decoding() bool { return true }

func (r *recordReader) fail() { r.err, r.b = errBadJobRecord, nil }

func (r *recordReader) next() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *recordReader) byte(v *byte) { *v = r.next() }
func (r *recordReader) bool(v *bool) { *v = r.next() == 1 }

func (r *recordReader) id(u *ulid.ULID) {
	if len(r.b) < 16 {
		r.fail()
		*u = ulid.ULID{}
		return
	}
	copy(u[:], r.b)
	r.b = r.b[16:]
}

func (r *recordReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *recordReader) int(v *int)     { *v = int(r.varint()) }
func (r *recordReader) int64(v *int64) { *v = r.varint() }

func (r *recordReader) list(_ bool, _, minSize int) (bool, int) {
	present := r.next() == 1
	n := r.uvarint()
	if n > uint64(len(r.b)/minSize) {
		r.fail()
		return false, 0
	}
	return present && r.err == nil, int(n)
}

func (r *recordReader) present(bool) bool { return r.next() == 1 }

func (r *recordReader) float(v *float64) {
	if len(r.b) < 8 {
		r.fail()
		*v = 0
		return
	}
	*v = math.Float64frombits(binary.BigEndian.Uint64(r.b))
	r.b = r.b[8:]
	if math.IsNaN(*v) || math.IsInf(*v, 0) {
		r.fail() // no record holds one: these bytes are damaged
		*v = 0
	}
}

func (r *recordReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *recordReader) string(v *string) {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
	}
	if r.err != nil {
		*v = ""
		return
	}
	if r.s == "" {
		*v = string(r.b[:n])
		r.b = r.b[n:]
		return
	}
	start := len(r.s) - len(r.b)
	r.b = r.b[n:]
	*v = r.s[start : start+int(n)]
}

// raw copies: the record's bytes belong to the store's transaction.
func (r *recordReader) raw(v *json.RawMessage) {
	*v = nil
	if b := r.bytes(); len(b) > 0 {
		*v = slices.Clone(b)
	}
}

func (r *recordReader) strings(l *[]string) { listOf(r, l, 1, r.string) }

func (r *recordReader) time(t *time.Time) {
	*t = time.Time{}
	if r.next() == 0 {
		return
	}
	sec := r.varint()
	nsec := r.uvarint()
	if nsec >= 1e9 {
		r.fail()
		return
	}
	*t = time.Unix(sec, int64(nsec)).UTC()
}

// stringMap reads what recordWriter.stringMap wrote; pairs of an absent map are read and dropped.
func (r *recordReader) stringMap(m *map[string]string) {
	present, n := r.list(false, 0, 2)
	if present {
		*m = make(map[string]string, n)
	}
	for range n {
		var name, value string
		r.string(&name)
		r.string(&value)
		if present {
			(*m)[name] = value
		}
	}
}
