package validate

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// decodeJobFast reads a job request of the usual shape without reflection: fields spelled as
// documented, each once, no nulls, strings without escapes. It makes exactly what encoding/json
// makes of such a body, and answers false for any other body (valid or not), which encoding/json
// then reads: its values and its errors stay the reference (FuzzFastJobDecoding holds the two
// equal wherever this one answers). A creation spent a tenth of its CPU in encoding/json.
func decodeJobFast(body []byte) (*decodedJob, bool) {
	r := &jsonReader{b: body}
	var job decodedJob
	if !r.object(rawJobFields, func(field int) bool { return r.jobField(&job, field) }) {
		return nil, false
	}
	r.space()
	return &job, r.i == len(r.b)
}

var (
	// ownJobFields are the keys of a job request read here; requestFieldKeys follow them.
	ownJobFields      = []string{"template", "assets", "preview", "fonts", "settings", "upload", "webhook", "chunks"}
	rawJobFields      = append(slices.Clip(ownJobFields), requestFieldKeys...)
	rawAssetFields    = []string{"type", "layerName", "composition", "property", "value", "expression", "src", "name", "params", "template", "assets", "preview", "settings", "fonts"}
	templateRefFields = []string{"id", "composition", "src"}
)

func (r *jsonReader) jobField(job *decodedJob, field int) bool {
	switch rawJobFields[field] {
	case "template":
		return r.templateRef(&job.Template)
	case "assets":
		return r.array(func() bool {
			job.Assets = append(job.Assets, rawAsset{})
			a := &job.Assets[len(job.Assets)-1]
			return r.object(rawAssetFields, func(field int) bool { return r.assetField(a, field) })
		}, func() { job.Assets = []rawAsset{} })
	case "preview":
		return r.boolPointer(&job.Preview)
	case "fonts":
		return r.strings(&job.Fonts)
	case "settings":
		return r.raw(&job.Settings)
	case "upload":
		return r.raw(&job.Upload)
	case "webhook":
		return r.raw(&job.Webhook)
	case "chunks":
		return r.raw(&job.Chunks)
	default:
		return r.requestField(&job.requestFields, field-len(ownJobFields))
	}
}

func (r *jsonReader) assetField(a *rawAsset, field int) bool {
	switch rawAssetFields[field] {
	case "type":
		return r.str(&a.Type)
	case "layerName":
		return r.stringPointer(&a.LayerName)
	case "composition":
		return r.stringPointer(&a.Composition)
	case "property":
		return r.stringPointer(&a.Property)
	case "value":
		return r.raw(&a.Value)
	case "expression":
		return r.stringPointer(&a.Expression)
	case "src":
		return r.stringPointer(&a.Src)
	case "name":
		return r.stringPointer(&a.Name)
	case "params":
		return r.raw(&a.Params)
	case "template":
		return r.templateRef(&a.Template)
	case "assets":
		return r.array(func() bool {
			var raw json.RawMessage
			a.Assets = append(a.Assets, raw)
			return r.raw(&a.Assets[len(a.Assets)-1])
		}, func() { a.Assets = []json.RawMessage{} })
	case "preview":
		return r.boolPointer(&a.Preview)
	case "settings":
		return r.raw(&a.Settings)
	default: // fonts
		return r.strings(&a.Fonts)
	}
}

func (r *jsonReader) templateRef(dst **rawTemplateRef) bool {
	ref := &rawTemplateRef{}
	*dst = ref
	return r.object(templateRefFields, func(field int) bool {
		switch templateRefFields[field] {
		case "id":
			return r.str(&ref.ID)
		case "composition":
			return r.str(&ref.Composition)
		default: // src
			return r.str(&ref.Src)
		}
	})
}

// readStrings reads a well-formed JSON value that is one string (joined) or an array of
// strings; ok is false when it is neither. Plain strings are read here, others by encoding/json.
func readStrings(raw json.RawMessage) (list []string, joined, ok bool) {
	r := &jsonReader{b: raw}
	switch raw[0] {
	case '"':
		var s string
		if !r.str(&s) && json.Unmarshal(raw, &s) != nil {
			return nil, false, false
		}
		return []string{s}, true, true
	case '[':
		if !r.strings(&list) {
			list = nil
			if json.Unmarshal(raw, &list) != nil {
				return nil, false, false
			}
		}
		return list, false, true
	}
	return nil, false, false
}

// jsonReader steps through JSON text; each reader method skips the white space before what it
// reads and reports whether it found it (false ends the fast path).
type jsonReader struct {
	b     []byte
	i     int
	depth int
}

// maxFastDepth is how deep the fast path follows raw values; deeper ones go to encoding/json.
const maxFastDepth = 100

func (r *jsonReader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// next takes the byte c if it comes next.
func (r *jsonReader) next(c byte) bool {
	r.space()
	return r.take(c)
}

// object reads an object whose keys are among fields, each at most once, and hands each value to
// value with its field's index.
func (r *jsonReader) object(fields []string, value func(field int) bool) bool {
	if !r.next('{') {
		return false
	}
	if r.next('}') {
		return true
	}
	var seen uint32
	for {
		name, ok := r.plain()
		if !ok || !r.next(':') {
			return false
		}
		field := slices.IndexFunc(fields, func(f string) bool { return string(name) == f })
		if field < 0 || seen&(1<<field) != 0 {
			return false
		}
		seen |= 1 << field
		if !value(field) {
			return false
		}
		if !r.next(',') {
			return r.next('}')
		}
	}
}

// array reads an array, each element by element; empty runs for one without any (encoding/json
// makes an empty slice of it, not nil).
func (r *jsonReader) array(element func() bool, empty func()) bool {
	if !r.next('[') {
		return false
	}
	if r.next(']') {
		empty()
		return true
	}
	for {
		if !element() {
			return false
		}
		if !r.next(',') {
			return r.next(']')
		}
	}
}

// str reads a string without escapes or control characters, in valid UTF-8.
func (r *jsonReader) str(dst *string) bool {
	s, ok := r.plain()
	if ok {
		*dst = string(s)
	}
	return ok
}

// plain reads the text of a string without escapes or control characters, in valid UTF-8.
func (r *jsonReader) plain() ([]byte, bool) {
	if !r.next('"') {
		return nil, false
	}
	start := r.i
	for r.i < len(r.b) {
		switch c := r.b[r.i]; {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			return s, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		r.i++
	}
	return nil, false
}

func (r *jsonReader) stringPointer(dst **string) bool {
	var s string
	*dst = &s
	return r.str(&s)
}

func (r *jsonReader) strings(dst *[]string) bool {
	return r.array(func() bool {
		var s string
		*dst = append(*dst, s)
		return r.str(&(*dst)[len(*dst)-1])
	}, func() { *dst = []string{} })
}

func (r *jsonReader) boolPointer(dst **bool) bool {
	r.space()
	b := r.literal("true")
	if !b && !r.literal("false") {
		return false
	}
	*dst = &b
	return true
}

func (r *jsonReader) literal(lit string) bool {
	if len(r.b)-r.i >= len(lit) && string(r.b[r.i:r.i+len(lit)]) == lit {
		r.i += len(lit)
		return true
	}
	return false
}

func (r *jsonReader) float(dst **float64) bool {
	r.space()
	start := r.i
	if !r.number() {
		return false
	}
	f, err := strconv.ParseFloat(string(r.b[start:r.i]), 64)
	if err != nil {
		return false
	}
	*dst = &f
	return true
}

// number steps over a number as JSON spells it (no white space inside).
func (r *jsonReader) number() bool {
	r.take('-')
	switch {
	case r.take('0'):
	case r.digits() == 0:
		return false
	}
	if r.take('.') && r.digits() == 0 {
		return false
	}
	if r.take('e') || r.take('E') {
		if !r.take('+') {
			r.take('-')
		}
		if r.digits() == 0 {
			return false
		}
	}
	return true
}

// take takes the byte c if it is the very next one.
func (r *jsonReader) take(c byte) bool {
	if r.i < len(r.b) && r.b[r.i] == c {
		r.i++
		return true
	}
	return false
}

func (r *jsonReader) digits() int {
	start := r.i
	for r.i < len(r.b) && r.b[r.i] >= '0' && r.b[r.i] <= '9' {
		r.i++
	}
	return r.i - start
}

// raw reads any value but null and keeps a copy of its text, as json.RawMessage does.
func (r *jsonReader) raw(dst *json.RawMessage) bool {
	r.space()
	start := r.i
	if r.literal("null") || !r.value() {
		return false
	}
	*dst = append(json.RawMessage(nil), r.b[start:r.i]...)
	return true
}

// value steps over one well-formed value of any kind.
func (r *jsonReader) value() bool {
	r.space()
	if r.i >= len(r.b) {
		return false
	}
	switch c := r.b[r.i]; {
	case c == '{' || c == '[':
		if r.depth++; r.depth > maxFastDepth {
			return false
		}
		defer func() { r.depth-- }()
		if c == '[' {
			return r.array(r.value, func() {})
		}
		r.i++
		if r.next('}') {
			return true
		}
		for {
			if !r.quoted() || !r.next(':') || !r.value() {
				return false
			}
			if !r.next(',') {
				return r.next('}')
			}
		}
	case c == '"':
		return r.quoted()
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	}
	return r.literal("true") || r.literal("false") || r.literal("null")
}

// quoted steps over a string with any escapes JSON allows; its bytes need not be valid UTF-8
// (encoding/json keeps a raw value's bytes as they are).
func (r *jsonReader) quoted() bool {
	if !r.next('"') {
		return false
	}
	for r.i < len(r.b) {
		c := r.b[r.i]
		r.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if r.i >= len(r.b) {
				return false
			}
			e := r.b[r.i]
			r.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					if r.i >= len(r.b) || !isHex(r.b[r.i]) {
						return false
					}
					r.i++
				}
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
