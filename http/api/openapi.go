package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument describes the API as implemented; TestOpenAPIMatchesRoutes keeps it honest.
//
//go:embed openapi.json
var openAPIDocument []byte

func (s *Server) openAPI(r *request) {
	r.ctx.SetStatusCode(http.StatusOK)
	r.ctx.SetContentType("application/json")
	r.ctx.SetBody(openAPIDocument)
}
