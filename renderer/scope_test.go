package renderer

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// nestedInspection: Main shows Scene (through a layer named "Scene layer"), Scene shows Card
// twice, Card shows Main (a loop a hostile file can make); Other stands apart.
func nestedInspection() *Inspection {
	id := func(n int) *int { return &n }
	return &Inspection{Compositions: []Composition{
		{ID: 1, Name: "Main", Layers: []Layer{{Name: "Scene layer", SourceCompID: id(2)}, {Name: "Title"}}},
		{ID: 2, Name: "Scene", Layers: []Layer{{Name: "Card", SourceCompID: id(3)}, {Name: "Card copy", SourceCompID: id(3)}}},
		{ID: 3, Name: "Card", Layers: []Layer{{Name: "Title"}, {Name: "Back", SourceCompID: id(1)}}},
		{ID: 4, Name: "Other", Layers: []Layer{{Name: "Title"}}},
	}}
}

func TestScopeFollowsNexrenderConventions(t *testing.T) {
	in := nestedInspection()
	for _, tc := range []struct {
		rendered, composition string
		want                  []string
		badComposition        string
	}{
		{rendered: "Main", want: []string{"Main", "Scene", "Card"}},
		{rendered: "Scene", want: []string{"Scene", "Card", "Main"}},
		{rendered: "Other", want: []string{"Other"}},
		{rendered: "Main", composition: "*", want: []string{"Main", "Scene", "Card", "Other"}},
		{rendered: "Main", composition: "Other", want: []string{"Other"}},
		{rendered: "Main", composition: "Main->Scene layer->Card", want: []string{"Card"}},
		{rendered: "Main", composition: "Main->Scene->Card copy", want: []string{"Card"}},
		{rendered: "Other", composition: "Scene->Card", want: []string{"Card"}},
		{rendered: "Main", composition: "Main->Other", badComposition: "Other"},
		{rendered: "Main", composition: "Nope->Card", badComposition: "Nope"},
		{rendered: "Main", composition: "Nope", badComposition: "Nope"},
		{rendered: "Gone", badComposition: "Gone"},
	} {
		got, err := Scope(in, tc.rendered, tc.composition)
		var se *ScopeError
		switch {
		case tc.badComposition != "":
			if !errors.As(err, &se) || se.Composition != tc.badComposition || !strings.Contains(err.Error(), tc.badComposition) {
				t.Errorf("%s %q: %v, want an error about %q", tc.rendered, tc.composition, err, tc.badComposition)
			}
		case err != nil || !slices.Equal(got, tc.want):
			t.Errorf("%s %q: %v %v, want %v", tc.rendered, tc.composition, got, err, tc.want)
		}
	}
}
