package ui

import (
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

func get(path string) *fasthttp.RequestCtx {
	ctx := &fasthttp.RequestCtx{}
	ctx.Request.SetRequestURI(path)
	Handler(ctx)
	return ctx
}

// TestFilesDeepLinksAndHeaders: files with their types, any other path under /ui/ the page
// itself (a screen), a strict CSP, nothing outside the embedded folder.
func TestFilesDeepLinksAndHeaders(t *testing.T) {
	for path, want := range map[string]string{
		"/ui/app.js":        "text/javascript",
		"/ui/style.css":     "text/css",
		"/ui/favicon.svg":   "image/svg+xml",
		"/ui/":              "text/html",
		"/ui/jobs/01JABCDE": "text/html",
		"/ui/templates":     "text/html",
		"/ui/../ui.go":      "text/html",
		"/ui/nope.js":       "text/html",
	} {
		ctx := get(path)
		if got := string(ctx.Response.Header.ContentType()); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
		if csp := string(ctx.Response.Header.Peek("Content-Security-Policy")); !strings.Contains(csp, "script-src 'self'") ||
			string(ctx.Response.Header.Peek("X-Content-Type-Options")) != "nosniff" {
			t.Errorf("%s: headers %q", path, csp)
		}
		if strings.Contains(string(ctx.Response.Body()), "package ui") {
			t.Errorf("%s served Go source", path)
		}
	}
	if body := string(get("/ui/jobs").Response.Body()); !strings.Contains(body, `<script type="module" src="/ui/app.js">`) {
		t.Errorf("a deep link is not the page: %s", body)
	}
	ctx := &fasthttp.RequestCtx{}
	Redirect(ctx)
	if ctx.Response.StatusCode() != fasthttp.StatusFound || !strings.HasSuffix(string(ctx.Response.Header.Peek("Location")), "/ui/") {
		t.Errorf("redirect: %d %s", ctx.Response.StatusCode(), ctx.Response.Header.Peek("Location"))
	}
}
