package inspect

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// A text layer's document (the btdk chunk) is a COS dictionary: << /key value ... >>, arrays,
// (strings) that are UTF-16 with a byte order mark, names, numbers and booleans. Keys are numbers
// written as names; the paths below were read off projects of After Effects 15 to 22.
var (
	cosTextPath      = []any{"1", "1", 0, "0", "0"}
	cosFontSetPath   = []any{"0", "1", "0"}
	cosFontNamePath  = []any{"0", "0", "0"}
	cosStyleRunsPath = []any{"1", "1", 0, "0", "6", "0"}
	cosRunFontPath   = []any{"0", "0", "6", "0"}
	// A style run's font size, whether its leading is automatic, and its leading.
	cosRunSizePath        = []any{"0", "0", "6", "1"}
	cosRunAutoLeadingPath = []any{"0", "0", "6", "4"}
	cosRunLeadingPath     = []any{"0", "0", "6", "5"}
)

const (
	maxCOSDepth  = 64
	maxCOSTokens = 1_000_000
)

type cosParser struct {
	b      []byte
	i      int
	tokens int
}

// parseCOS reads a text document into maps, slices and strings (numbers and names as text).
func parseCOS(b []byte) (map[string]any, error) {
	p := &cosParser{b: b}
	root := map[string]any{}
	for {
		p.skipSpace()
		if p.i >= len(p.b) {
			return root, nil
		}
		if p.b[p.i] != '/' {
			return nil, errors.New("text document: a key was expected")
		}
		key := p.name()
		v, err := p.value(0)
		if err != nil {
			return nil, err
		}
		root[key] = v
	}
}

func (p *cosParser) skipSpace() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\r' || p.b[p.i] == '\n') {
		p.i++
	}
}

func (p *cosParser) name() string {
	p.i++ // the slash
	start := p.i
	for p.i < len(p.b) && !strings.ContainsRune(" \t\r\n/[]<>()", rune(p.b[p.i])) {
		p.i++
	}
	return string(p.b[start:p.i])
}

var errCOSEnd = errors.New("text document: a container closes where a value was expected")

func (p *cosParser) value(depth int) (any, error) {
	if depth > maxCOSDepth {
		return nil, errors.New("text document nests too deep")
	}
	if p.tokens++; p.tokens > maxCOSTokens {
		return nil, errors.New("text document is too large")
	}
	p.skipSpace()
	if p.i >= len(p.b) {
		return nil, errors.New("text document ends early")
	}
	switch c := p.b[p.i]; {
	case c == '<' && p.i+1 < len(p.b) && p.b[p.i+1] == '<':
		p.i += 2
		m := map[string]any{}
		for {
			p.skipSpace()
			if p.i+1 < len(p.b) && p.b[p.i] == '>' && p.b[p.i+1] == '>' {
				p.i += 2
				return m, nil
			}
			if p.i >= len(p.b) || p.b[p.i] != '/' {
				return nil, errors.New("text document: a key was expected in a dictionary")
			}
			key := p.name()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
	case c == '[':
		p.i++
		var a []any
		for {
			p.skipSpace()
			if p.i < len(p.b) && p.b[p.i] == ']' {
				p.i++
				return a, nil
			}
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
	case c == '(':
		return p.str()
	case c == '/':
		return p.name(), nil
	case c == ']' || c == '>':
		return nil, errCOSEnd
	default:
		start := p.i
		for p.i < len(p.b) && !strings.ContainsRune(" \t\r\n/[]<>()", rune(p.b[p.i])) {
			p.i++
		}
		if p.i == start {
			return nil, errors.New("text document: unexpected character")
		}
		return string(p.b[start:p.i]), nil
	}
}

// str reads a (string): a backslash escapes the next byte; a UTF-16 byte order mark makes the
// rest UTF-16.
func (p *cosParser) str() (string, error) {
	p.i++
	var out []byte
	for depth := 1; ; p.i++ {
		if p.i >= len(p.b) {
			return "", errors.New("text document: unterminated string")
		}
		c := p.b[p.i]
		switch {
		case c == '\\' && p.i+1 < len(p.b):
			p.i++
			out = append(out, p.b[p.i])
			continue
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth == 0 {
				p.i++
				return decodeCOSString(out), nil
			}
		}
		out = append(out, c)
	}
}

func decodeCOSString(b []byte) string {
	if len(b) >= 2 && b[0] == 0xfe && b[1] == 0xff {
		b = b[2:]
		u := make([]uint16, len(b)/2)
		for i := range u {
			u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		}
		return string(utf16.Decode(u))
	}
	return string(b)
}

// at follows a path of keys and indexes.
func at(v any, path []any) any {
	for _, step := range path {
		switch s := step.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[s]
		case int:
			a, ok := v.([]any)
			if !ok || s >= len(a) {
				return nil
			}
			v = a[s]
		}
	}
	return v
}

// aeText is what a text document says: its text, the fonts its style runs use, and the largest
// font size of its runs with its leading (0: automatic).
type aeText struct {
	text          string
	fonts         []string
	size, leading float64
}

// textDocument reads a text document.
func textDocument(b []byte) (aeText, error) {
	var out aeText
	doc, err := parseCOS(b)
	if err != nil {
		return out, err
	}
	out.text, _ = at(doc, cosTextPath).(string)
	// Paragraphs end with a carriage return; the last one is always there.
	out.text = strings.ReplaceAll(strings.TrimSuffix(out.text, "\r"), "\r", "\n")
	fontSet, _ := at(doc, cosFontSetPath).([]any)
	runs, _ := at(doc, cosStyleRunsPath).([]any)
	for _, run := range runs {
		if size := cosNumber(at(run, cosRunSizePath)); size > out.size {
			out.size, out.leading = size, 0
			if auto, _ := at(run, cosRunAutoLeadingPath).(string); auto == "false" {
				out.leading = cosNumber(at(run, cosRunLeadingPath))
			}
		}
		idx, _ := at(run, cosRunFontPath).(string)
		n, err := strconv.Atoi(idx)
		if err != nil || n < 0 || n >= len(fontSet) {
			continue
		}
		if name, ok := at(fontSet[n], cosFontNamePath).(string); ok && name != "" && !slices.Contains(out.fonts, name) {
			out.fonts = append(out.fonts, name)
		}
	}
	return out, nil
}

// cosNumber reads a number of a document (0 when it is none, or not a size).
func cosNumber(v any) float64 {
	s, _ := v.(string)
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(n) || n < 0 || n > 1e6 {
		return 0
	}
	return n
}
