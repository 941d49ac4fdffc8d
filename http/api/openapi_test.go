package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/framefarm/framefarm/cluster/clock"
)

// TestOpenAPIMatchesRoutes fails when a registered route is missing from the OpenAPI document or
// a documented route is not registered.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	s := New(Config{}, Deps{Clock: clock.Real{}, Logger: slog.New(slog.DiscardHandler)})
	catchAll := regexp.MustCompile(`\{(\w+):\*\}`)
	var registered []string
	for _, r := range s.Routes() {
		registered = append(registered, r.Method+" "+catchAll.ReplaceAllString(r.Path, "{$1}"))
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("registered but not documented: %s", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("documented but not registered: %s", d)
		}
	}
	if len(registered) < 30 {
		t.Fatalf("only %d routes registered", len(registered))
	}
}

// TestOpenAPIDocumentIsValid: the document is valid OpenAPI 3.1 as a maintained library reads
// it (every path parameter declared, every reference resolved, schemas well formed).
func TestOpenAPIDocumentIsValid(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestStaleReadsAreDocumented: every read a replica answers from its records after catching up
// documents ?stale, and no other operation does.
func TestStaleReadsAreDocumented(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPIDocument)
	if err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documented := false
			for _, p := range append(slices.Clone(item.Parameters), op.Parameters...) {
				documented = documented || (p.Value.Name == "stale" && p.Value.In == "query")
			}
			if want := placementOf(method, path) == caughtUp; documented != want {
				t.Errorf("%s %s: documents ?stale %v, answered after catching up %v", method, path, documented, want)
			}
		}
	}
}
