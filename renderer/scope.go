package renderer

import (
	"fmt"
	"slices"
	"strings"
)

// Values of an asset's composition with a meaning of their own, as nexrender users write them.
const (
	// EveryComposition makes an asset change its layer in every composition of the template.
	EveryComposition = "*"
	// CompositionPathSeparator joins a path of nested compositions: "A->B->C" is C as used in B
	// as used in A.
	CompositionPathSeparator = "->"
)

// CompositionTree is what finding an asset's layers needs to know about a template: its
// compositions and which compositions each one nests.
type CompositionTree interface {
	CompositionNames() []string
	// Nested lists the precomp layers of a composition, in timeline order.
	Nested(composition string) []NestedComposition
}

// NestedComposition is a precomp layer: its name and the composition it shows.
type NestedComposition struct {
	Layer       string
	Composition string
}

// ScopeError says that an asset's composition names one the template does not have.
type ScopeError struct {
	Composition string
	Reason      string
}

func (e *ScopeError) Error() string { return e.Reason }

// maxScope bounds how many compositions one asset may search; a hostile file cannot make the
// walk through nested compositions run away.
const maxScope = 10000

// Scope lists the compositions where an asset finds its layer, following nexrender's
// conventions: without a composition, the rendered composition and every composition nested in
// it, at any depth; "*", every composition; "A->B->C", composition C as used in B as used in A
// (A need not be the root); any other name, that composition alone.
func Scope(t CompositionTree, rendered, composition string) ([]string, error) {
	names := t.CompositionNames()
	exists := func(name string) bool { return slices.Contains(names, name) }
	switch {
	case composition == EveryComposition:
		return names, nil
	case composition == "":
		if !exists(rendered) {
			return nil, &ScopeError{Composition: rendered, Reason: fmt.Sprintf("no composition named %q", rendered)}
		}
		return nestedFrom(t, rendered), nil
	case strings.Contains(composition, CompositionPathSeparator):
		parts := strings.Split(composition, CompositionPathSeparator)
		if !exists(parts[0]) {
			return nil, &ScopeError{Composition: parts[0], Reason: fmt.Sprintf("no composition named %q (the start of %q)", parts[0], composition)}
		}
		at := parts[0]
		for _, part := range parts[1:] {
			next := ""
			for _, n := range t.Nested(at) {
				if n.Layer == part || n.Composition == part {
					next = n.Composition
					break
				}
			}
			if next == "" {
				return nil, &ScopeError{Composition: part, Reason: fmt.Sprintf("composition %q has no precomp layer or nested composition named %q (in %q)", at, part, composition)}
			}
			at = next
		}
		return []string{at}, nil
	}
	if !exists(composition) {
		return nil, &ScopeError{Composition: composition, Reason: fmt.Sprintf("no composition named %q", composition)}
	}
	return []string{composition}, nil
}

// nestedFrom lists a composition and every composition nested in it, breadth first, each once.
func nestedFrom(t CompositionTree, root string) []string {
	out := []string{root}
	seen := map[string]bool{root: true}
	for i := 0; i < len(out) && len(out) < maxScope; i++ {
		for _, n := range t.Nested(out[i]) {
			if !seen[n.Composition] {
				seen[n.Composition] = true
				out = append(out, n.Composition)
			}
		}
	}
	return out
}

// Nested lists the precomp layers of a composition whose source the inspection knows.
func (in *Inspection) Nested(composition string) []NestedComposition {
	comp := in.Composition(composition)
	if comp == nil {
		return nil
	}
	var out []NestedComposition
	for _, l := range comp.Layers {
		if l.SourceCompID == nil {
			continue
		}
		for _, c := range in.Compositions {
			if c.ID == *l.SourceCompID {
				out = append(out, NestedComposition{Layer: l.Name, Composition: c.Name})
				break
			}
		}
	}
	return out
}

var _ CompositionTree = (*Inspection)(nil)
