// Package ui is the dashboard: plain HTML, CSS and JavaScript modules embedded in the binary and
// served by the coordinator under /ui/. It talks to the public API only (and its event stream).
package ui

import (
	"embed"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/valyala/fasthttp"
)

//go:embed assets
var assets embed.FS

// Prefix is where the dashboard lives.
const Prefix = "/ui/"

// securityHeaders keep the page to its own scripts and its own origin: the token it holds can
// only be sent where it sends it. Media and images may come from a job's own S3 bucket.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob: https: http:; media-src 'self' https: http:; " +
		"style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
}

// Handler serves the dashboard's files; any other path under /ui/ is a screen of the page (a deep
// link such as /ui/jobs/ID), answered with index.html.
func Handler(ctx *fasthttp.RequestCtx) {
	for k, v := range securityHeaders {
		ctx.Response.Header.Set(k, v)
	}
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	name := strings.TrimPrefix(string(ctx.Path()), Prefix)
	if name != "" && !strings.Contains(name, "..") {
		if data, err := fs.ReadFile(assets, path.Join("assets", name)); err == nil {
			ctx.SetContentType(contentType(name))
			ctx.SetBody(data)
			return
		}
	}
	data, _ := fs.ReadFile(assets, "assets/index.html")
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(data)
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// Redirect sends / to the dashboard.
func Redirect(ctx *fasthttp.RequestCtx) { ctx.Redirect(Prefix, fasthttp.StatusFound) }
