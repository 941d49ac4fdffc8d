package secrets

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// MinScrubLength is the shortest value Scrub hides: replacing every "ab" in a message would
// garble it, and a value that short protects nothing.
const MinScrubLength = 4

// Revealed holds the secret values a piece of work resolved, so that what it writes (an error, a
// log line) can be scrubbed of them before it is logged, stored or returned.
type Revealed struct {
	names map[string]string // value -> secret name ("" when not known)
}

// NewRevealed holds the named values of Named (what a render node is sent).
func NewRevealed(named map[string]string) *Revealed {
	r := &Revealed{}
	for name, v := range named {
		r.Add(name, v)
	}
	return r
}

// Named lists the values held by name, for a render node to scrub what it reports.
func (r *Revealed) Named() map[string]string {
	if r == nil || len(r.names) == 0 {
		return nil
	}
	named := make(map[string]string, len(r.names))
	for v, name := range r.names {
		named[name] = v
	}
	return named
}

// Add remembers a resolved secret.
func (r *Revealed) Add(name, value string) {
	if len(value) < MinScrubLength {
		return
	}
	if r.names == nil {
		r.names = map[string]string{}
	}
	if _, known := r.names[value]; !known || name != "" {
		r.names[value] = name
	}
}

// Values lists the values held, longest first (so a value containing another is hidden whole).
func (r *Revealed) Values() []string {
	if r == nil {
		return nil
	}
	values := make([]string, 0, len(r.names))
	for v := range r.names {
		values = append(values, v)
	}
	slices.SortFunc(values, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return values
}

// Scrub replaces every value held, as written and as URL or JSON escaping writes it, by its
// reference (${secret.NAME}) or, when the name is not known, by [secret].
func (r *Revealed) Scrub(s string) string {
	for _, v := range r.Values() {
		placeholder := "[secret]"
		if name := r.names[v]; name != "" {
			placeholder = "${secret." + name + "}"
		}
		quoted, _ := json.Marshal(v)
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v), string(quoted[1 : len(quoted)-1])} {
			s = strings.ReplaceAll(s, form, placeholder)
		}
	}
	return s
}

// ScrubAll scrubs each line.
func (r *Revealed) ScrubAll(lines []string) []string {
	if r == nil || len(r.names) == 0 {
		return lines
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = r.Scrub(l)
	}
	return out
}
