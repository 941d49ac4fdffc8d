package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/framefarm/framefarm/renderer"
)

// Job views (and the answer to a creation) write their own JSON: pages of jobs are most of what
// the API sends, and encoding/json spent a third of a listing's time on them (reflection, and a
// second pass over each time and raw value it had written). The bytes are those encoding/json
// writes without HTML escaping, as request.json and marshal use it;
// TestJobViewsEncodeLikeEncodingJSON holds every field to that.

// jsonAppender is an answer that appends its own JSON encoding to b.
type jsonAppender interface {
	appendJSON(b []byte) ([]byte, error)
}

var (
	_ jsonAppender = (*createdJob)(nil)
	_ jsonAppender = (*jobView)(nil)
	_ jsonAppender = jobPage(nil)
	_ jsonAppender = minimalJobPage(nil)
)

// jobPage is a page of Job objects.
type jobPage []*jobView

// minimalJobPage is a page of minimal Job objects.
type minimalJobPage []*minimalJobView

func (l jobPage) appendJSON(b []byte) ([]byte, error) { return appendList(b, l) }

func (l minimalJobPage) appendJSON(b []byte) ([]byte, error) { return appendList(b, l) }

// appendList writes a list of answers as a JSON array (null for a nil list).
func appendList[V jsonAppender](b []byte, list []V) ([]byte, error) {
	if list == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, v := range list {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = v.appendJSON(b); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

func (v *createdJob) appendJSON(b []byte) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	b = appendString(append(b, `{"id":`...), v.ID)
	b = appendString(append(b, `,"status":`...), v.Status)
	b = appendString(append(b, `,"outputUrl":`...), v.OutputURL)
	if len(v.Children) > 0 {
		var err error
		if b, err = appendList(append(b, `,"children":`...), v.Children); err != nil {
			return nil, err
		}
	}
	b = appendStrings(append(b, `,"missingFonts":`...), v.MissingFonts)
	if v.Index != nil {
		b = strconv.AppendInt(append(b, `,"index":`...), int64(*v.Index), 10)
	}
	return append(b, '}'), nil
}

func (v *jobView) appendJSON(b []byte) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	b, err := appendJobHead(b, v.ID, v.TemplateID, v.Status, v.Progress)
	if err != nil {
		return nil, err
	}
	if b, err = v.Stats.appendJSON(append(b, `,"stats":`...)); err != nil {
		return nil, err
	}
	b = appendString(append(b, `,"outputUrl":`...), v.OutputURL)
	b = append(b, `,"assets":`...)
	if v.Assets == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range v.Assets {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendAsset(b, &v.Assets[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if v.Composition != "" {
		b = appendString(append(b, `,"composition":`...), v.Composition)
	}
	if b, err = appendSettings(append(b, `,"settings":`...), &v.Settings); err != nil {
		return nil, err
	}
	b = v.appendFields(b)
	if len(v.Children) > 0 {
		b = appendStrings(append(b, `,"children":`...), v.Children)
	}
	if len(v.Chunks) > 0 { // GET /jobs/{id} of a split job only
		chunks, err := marshal(v.Chunks)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"chunks":`...), chunks...)
	}
	if v.ChunksRenderDuration != nil {
		if b, err = appendFloat(append(b, `,"chunksRenderDuration":`...), *v.ChunksRenderDuration); err != nil {
			return nil, err
		}
	}
	if v.Team != nil {
		b = appendString(append(b, `,"team":{"id":`...), v.Team.ID)
		b = append(appendString(append(b, `,"name":`...), v.Team.Name), '}')
	}
	if v.TemplateName != "" {
		b = appendString(append(b, `,"templateName":`...), v.TemplateName)
	}
	if len(v.Data) > 0 {
		if b, err = appendRaw(append(b, `,"data":`...), v.Data); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func (st *jobStats) appendJSON(b []byte) ([]byte, error) {
	if st == nil {
		return append(b, "null"...), nil
	}
	var err error
	if b, err = appendTime(append(b, `{"createdAt":`...), st.CreatedAt); err != nil {
		return nil, err
	}
	if b, err = appendTime(append(b, `,"updatedAt":`...), st.UpdatedAt); err != nil {
		return nil, err
	}
	for _, t := range []struct {
		name string
		at   *time.Time
	}{{`,"startedAt":`, st.StartedAt}, {`,"finishedAt":`, st.FinishedAt}, {`,"errorAt":`, st.ErrorAt}} {
		b = append(b, t.name...)
		if t.at == nil {
			b = append(b, "null"...)
		} else if b, err = appendTime(b, *t.at); err != nil {
			return nil, err
		}
	}
	b = strconv.AppendInt(append(b, `,"totalAssets":`...), int64(st.TotalAssets), 10)
	b = append(b, `,"renderDuration":`...)
	if st.RenderDuration == nil {
		b = append(b, "null"...)
	} else if b, err = appendFloat(b, *st.RenderDuration); err != nil {
		return nil, err
	}
	b = appendOptionalString(append(b, `,"error":`...), st.Error)
	if st.WaitingFor != "" {
		b = appendString(append(b, `,"waitingFor":`...), st.WaitingFor)
	}
	return append(b, '}'), nil
}

func (v *minimalJobView) appendJSON(b []byte) ([]byte, error) {
	if v == nil {
		return append(b, "null"...), nil
	}
	b, err := appendJobHead(b, v.ID, v.TemplateID, v.Status, v.Progress)
	if err != nil {
		return nil, err
	}
	b = appendString(append(b, `,"outputUrl":`...), v.OutputURL)
	if b, err = appendTime(append(b, `,"stats":{"createdAt":`...), v.Stats.CreatedAt); err != nil {
		return nil, err
	}
	if v.Stats.FinishedAt != nil {
		if b, err = appendTime(append(b, `,"finishedAt":`...), *v.Stats.FinishedAt); err != nil {
			return nil, err
		}
	}
	b = append(b, '}')
	if v.Name != "" {
		b = appendString(append(b, `,"name":`...), v.Name)
	}
	return append(b, '}'), nil
}

// appendJobHead opens a Job object, full or minimal, with the fields both begin with.
func appendJobHead(b []byte, id string, templateID *string, status string, progress float64) ([]byte, error) {
	b = appendString(append(b, `{"id":`...), id)
	b = appendOptionalString(append(b, `,"templateId":`...), templateID)
	b = appendString(append(b, `,"status":`...), status)
	return appendFloat(append(b, `,"progress":`...), progress)
}

func appendAsset(b []byte, a *renderer.Asset) ([]byte, error) {
	var err error
	b = appendString(append(b, `{"type":`...), a.Type)
	for _, f := range []struct{ name, value string }{
		{`,"layerName":`, a.LayerName}, {`,"composition":`, a.Composition}, {`,"property":`, a.Property},
	} {
		if f.value != "" {
			b = appendString(append(b, f.name...), f.value)
		}
	}
	if len(a.Value) > 0 {
		if b, err = appendRaw(append(b, `,"value":`...), a.Value); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct{ name, value string }{
		{`,"expression":`, a.Expression}, {`,"src":`, a.Src}, {`,"name":`, a.Name},
	} {
		if f.value != "" {
			b = appendString(append(b, f.name...), f.value)
		}
	}
	if len(a.Params) > 0 {
		if b, err = appendRaw(append(b, `,"params":`...), a.Params); err != nil {
			return nil, err
		}
	}
	if a.JobID != "" {
		b = appendString(append(b, `,"jobId":`...), a.JobID)
	}
	return append(b, '}'), nil
}

func appendSettings(b []byte, s *renderer.Settings) ([]byte, error) {
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(append(append(b, '"'), name...), `":`...)
	}
	if s.Type != "" {
		field("type")
		b = appendString(b, s.Type)
	}
	if s.Frames != nil {
		frames, err := s.Frames.MarshalJSON()
		if err != nil {
			return nil, err
		}
		field("frames")
		if b, err = appendRaw(b, frames); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct{ name, value string }{
		{"quality", s.Quality}, {"codec", s.Codec}, {"engine", s.Engine}, {"preset", s.Preset},
	} {
		if f.value != "" {
			field(f.name)
			b = appendString(b, f.value)
		}
	}
	return append(b, '}'), nil
}

func appendStrings(b []byte, list []string) []byte {
	if list == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

func appendOptionalString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}

// appendTime writes a time as time.Time's MarshalJSON does: RFC 3339 with the nanoseconds it
// has, and an error for a year it cannot write.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return nil, errors.New("time: year outside of range [0,9999]")
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// appendFloat writes a float64 as encoding/json does: the shortest form that reads back the
// same, in exponent form only below 1e-6 or from 1e21 on, with a one-digit negative exponent
// unpadded.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errors.New("json: unsupported value: " + strconv.FormatFloat(f, 'g', -1, 64))
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b, nil
}

// appendRaw writes a JSON value kept as it came (asset values, params, webhook data): stored
// values are compact already, and are compacted here only when they might not be.
func appendRaw(b []byte, raw []byte) ([]byte, error) {
	if !bytes.ContainsAny(raw, " \t\r\n") && json.Valid(raw) {
		return append(b, raw...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// appendString writes s as a JSON string the way encoding/json does without HTML escaping:
// quotes, backslashes and control characters escaped (the usual ones by name), invalid UTF-8
// replaced by U+FFFD, and U+2028 and U+2029 escaped for JavaScript.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plainJSONByte[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}

// plainJSONByte marks the bytes a JSON string holds as they are: ASCII from the space on, but
// for the quote and the backslash.
var plainJSONByte = func() (plain [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
	}
	return plain
}()
