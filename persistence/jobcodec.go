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
// first byte is the form's version; records written as JSON before it (they start with '{')
// are still read.
const jobCodecVersion = 1

var errBadJobRecord = errors.New("malformed job record")

func encodeJob(j *Job) []byte {
	w := recordWriter{b: make([]byte, 0, 512)}
	w.byte(jobCodecVersion)
	w.id(j.ID)
	w.id(j.TeamID)
	w.string(string(j.Kind))
	w.id(j.TemplateID)
	w.byte(byte(j.State))
	w.float(j.Progress)
	w.int(int64(j.Priority))
	w.strings(j.Tags)
	w.string(j.Engine)
	w.id(j.BatchID)
	w.int(int64(j.BatchIndex))
	w.id(j.ParentID)
	w.list(j.Children != nil, len(j.Children))
	for _, c := range j.Children {
		w.id(c)
	}
	w.int(int64(j.Depth))
	w.spec(&j.Spec)
	w.strings(j.MissingFonts)
	w.int(int64(j.Attempts))
	w.string(j.Node)
	w.list(j.Failures != nil, len(j.Failures))
	for _, f := range j.Failures {
		w.int(int64(f.Attempt))
		w.string(f.Node)
		w.string(f.Error)
		w.time(f.At)
	}
	w.string(j.OutputName)
	w.string(j.OutputURL)
	for _, t := range []time.Time{j.CreatedAt, j.UpdatedAt, j.StartedAt, j.FinishedAt, j.ErrorAt} {
		w.time(t)
	}
	w.int(int64(j.RenderDuration))
	w.string(j.Error)
	return w.b
}

func (w *recordWriter) spec(s *JobSpec) {
	w.string(s.Composition)
	w.string(s.TemplateSrc)
	w.list(s.Assets != nil, len(s.Assets))
	for i := range s.Assets {
		a := &s.Assets[i]
		for _, f := range []string{a.Type, a.LayerName, a.Composition, a.Property, a.Expression, a.Src, a.Name, a.JobID} {
			w.string(f)
		}
		w.raw(a.Value)
		w.raw(a.Params)
	}
	w.bool(s.Preview)
	w.strings(s.Fonts)
	st := &s.Settings
	for _, f := range []string{st.Type, st.Quality, st.Codec, st.Engine, st.Preset} {
		w.string(f)
	}
	w.bool(st.Frames != nil)
	if st.Frames != nil {
		w.int(int64(st.Frames.Start))
		w.int(int64(st.Frames.End))
		w.bool(st.Frames.Range)
	}
	w.bool(s.Upload != nil)
	if u := s.Upload; u != nil {
		w.string(u.Prefix)
		w.string(u.OutputURL)
		w.string(u.Provider)
		w.bool(u.Params != nil)
		if p := u.Params; p != nil {
			for _, f := range []string{p.Endpoint, p.Region, p.Bucket, p.ACL, p.AccessKeyID, p.AccessKeySecret} {
				w.string(f)
			}
		}
	}
	w.bool(s.Webhook != nil)
	if h := s.Webhook; h != nil {
		w.string(h.URL)
		w.string(h.Method)
		names := make([]string, 0, len(h.Headers))
		for name := range h.Headers {
			names = append(names, name)
		}
		slices.Sort(names)
		w.list(h.Headers != nil, len(names))
		for _, name := range names {
			w.string(name)
			w.string(h.Headers[name])
		}
		w.raw(h.Data)
		w.bool(h.Custom)
	}
}

func decodeJob(raw []byte) (*Job, error) {
	j := new(Job)
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, j); err != nil {
			return nil, fmt.Errorf("decode job: %w", err)
		}
		return j, nil
	}
	r := recordReader{b: raw, s: string(raw)}
	if v := r.byte(); v != jobCodecVersion {
		return nil, fmt.Errorf("decode job: record form %d unknown", v)
	}
	j.ID = r.id()
	j.TeamID = r.id()
	j.Kind = JobKind(r.string())
	j.TemplateID = r.id()
	j.State = JobState(r.byte())
	j.Progress = r.float()
	j.Priority = int(r.int())
	j.Tags = r.strings()
	j.Engine = r.string()
	j.BatchID = r.id()
	j.BatchIndex = int(r.int())
	j.ParentID = r.id()
	if present, n := r.list(16); present {
		j.Children = make([]ulid.ULID, n)
		for i := range j.Children {
			j.Children[i] = r.id()
		}
	}
	j.Depth = int(r.int())
	r.spec(&j.Spec)
	j.MissingFonts = r.strings()
	j.Attempts = int(r.int())
	j.Node = r.string()
	if present, n := r.list(4); present {
		j.Failures = make([]AttemptFailure, n)
		for i := range j.Failures {
			f := &j.Failures[i]
			f.Attempt = int(r.int())
			f.Node = r.string()
			f.Error = r.string()
			f.At = r.time()
		}
	}
	j.OutputName = r.string()
	j.OutputURL = r.string()
	for _, t := range []*time.Time{&j.CreatedAt, &j.UpdatedAt, &j.StartedAt, &j.FinishedAt, &j.ErrorAt} {
		*t = r.time()
	}
	j.RenderDuration = time.Duration(r.int())
	j.Error = r.string()
	if r.err != nil || len(r.b) != 0 {
		return nil, fmt.Errorf("decode job: %w", errBadJobRecord)
	}
	return j, nil
}

func (r *recordReader) spec(s *JobSpec) {
	s.Composition = r.string()
	s.TemplateSrc = r.string()
	if present, n := r.list(10); present {
		s.Assets = make([]renderer.Asset, n)
		for i := range s.Assets {
			a := &s.Assets[i]
			for _, f := range []*string{&a.Type, &a.LayerName, &a.Composition, &a.Property, &a.Expression, &a.Src, &a.Name, &a.JobID} {
				*f = r.string()
			}
			a.Value = r.raw()
			a.Params = r.raw()
		}
	}
	s.Preview = r.bool()
	s.Fonts = r.strings()
	st := &s.Settings
	for _, f := range []*string{&st.Type, &st.Quality, &st.Codec, &st.Engine, &st.Preset} {
		*f = r.string()
	}
	if r.bool() {
		st.Frames = &renderer.Frames{Start: int(r.int()), End: int(r.int()), Range: r.bool()}
	}
	if r.bool() {
		u := &Upload{Prefix: r.string(), OutputURL: r.string(), Provider: r.string()}
		if r.bool() {
			p := &UploadParams{}
			for _, f := range []*string{&p.Endpoint, &p.Region, &p.Bucket, &p.ACL, &p.AccessKeyID, &p.AccessKeySecret} {
				*f = r.string()
			}
			u.Params = p
		}
		s.Upload = u
	}
	if r.bool() {
		h := &Webhook{URL: r.string(), Method: r.string()}
		hasHeaders, n := r.list(2)
		if hasHeaders {
			h.Headers = make(map[string]string, n)
		}
		for range n {
			name := r.string()
			value := r.string()
			if h.Headers != nil {
				h.Headers[name] = value
			}
		}
		h.Data = r.raw()
		h.Custom = r.bool()
		s.Webhook = h
	}
}

// recordWriter appends the fields of a record.
type recordWriter struct{ b []byte }

func (w *recordWriter) byte(v byte)      { w.b = append(w.b, v) }
func (w *recordWriter) id(u ulid.ULID)   { w.b = append(w.b, u[:]...) }
func (w *recordWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *recordWriter) int(v int64)      { w.b = binary.AppendVarint(w.b, v) }
func (w *recordWriter) float(v float64) {
	w.b = binary.BigEndian.AppendUint64(w.b, math.Float64bits(v))
}
func (w *recordWriter) string(s string) { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *recordWriter) raw(b []byte)    { w.uvarint(uint64(len(b))); w.b = append(w.b, b...) }
func (w *recordWriter) strings(l []string) {
	w.list(l != nil, len(l))
	for _, s := range l {
		w.string(s)
	}
}

// list writes whether a list (or map) is there at all, then its length: nil and empty stay apart.
func (w *recordWriter) list(present bool, n int) {
	w.bool(present)
	w.uvarint(uint64(n))
}

func (w *recordWriter) bool(v bool) {
	if v {
		w.byte(1)
	} else {
		w.byte(0)
	}
}

// time writes a zero time as one 0 byte, any other as 1, seconds and nanoseconds (UTC).
func (w *recordWriter) time(t time.Time) {
	if t.IsZero() {
		w.byte(0)
		return
	}
	w.byte(1)
	w.int(t.Unix())
	w.uvarint(uint64(t.Nanosecond()))
}

// recordReader reads what recordWriter wrote, remembering the first error. Its strings are
// cut from s, one copy of the whole record, so a record costs one string allocation.
type recordReader struct {
	b   []byte
	s   string
	err error
}

func (r *recordReader) fail() { r.err, r.b = errBadJobRecord, nil }

func (r *recordReader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *recordReader) bool() bool { return r.byte() == 1 }

func (r *recordReader) id() ulid.ULID {
	var u ulid.ULID
	if len(r.b) < 16 {
		r.fail()
		return u
	}
	copy(u[:], r.b)
	r.b = r.b[16:]
	return u
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

func (r *recordReader) int() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// list reads what recordWriter.list wrote. A length the rest of the record cannot hold, at
// minSize bytes an item, is refused: a corrupt length never allocates more than the record.
func (r *recordReader) list(minSize int) (bool, int) {
	present := r.bool()
	n := r.uvarint()
	if n > uint64(len(r.b)/minSize) {
		r.fail()
		return false, 0
	}
	return present && r.err == nil, int(n)
}

func (r *recordReader) float() float64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := math.Float64frombits(binary.BigEndian.Uint64(r.b))
	r.b = r.b[8:]
	if math.IsNaN(v) || math.IsInf(v, 0) {
		r.fail() // no record holds one: these bytes are damaged
		return 0
	}
	return v
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

func (r *recordReader) string() string {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
	}
	if r.err != nil {
		return ""
	}
	start := len(r.s) - len(r.b)
	r.b = r.b[n:]
	return r.s[start : start+int(n)]
}

// raw copies: the record's bytes belong to the store's transaction.
func (r *recordReader) raw() json.RawMessage {
	if b := r.bytes(); len(b) > 0 {
		return slices.Clone(b)
	}
	return nil
}

func (r *recordReader) strings() []string {
	present, n := r.list(1)
	if !present {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = r.string()
	}
	return l
}

func (r *recordReader) time() time.Time {
	if r.byte() == 0 {
		return time.Time{}
	}
	sec := r.int()
	nsec := r.uvarint()
	if nsec >= 1e9 {
		r.fail()
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}
