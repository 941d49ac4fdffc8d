package api

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/oklog/ulid/v2"
	"github.com/valyala/fasthttp"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/persistence"
)

// APIPrefix is where the v2 interface lives.
const APIPrefix = "/api/v2"

// metrics serves Prometheus' page, behind its token when one is set; when the metrics have a
// listener of their own (no handler here), the API's port has none.
func (s *Server) metrics(r *request) {
	switch {
	case s.Metrics == nil:
		r.fail(newError(http.StatusNotFound, codeNotFound, "metrics are served on their own listener ([metrics] listen)"))
	case s.cfg.MetricsToken != "" && !BearerMatches(string(r.ctx.Request.Header.Peek("Authorization")), s.cfg.MetricsToken):
		r.ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="metrics"`)
		r.fail(newError(http.StatusUnauthorized, codeUnauthorized, "/metrics needs the metrics token ([metrics] token) as a bearer token"))
	default:
		s.Metrics(r.ctx)
	}
}

// underPrefix tells a client that missed the API's prefix where the API lives: a path outside
// /api/v2 and /api/v3 is most likely a route of the API with its prefix left out or mistyped.
// It names the route meant when one answers there (the version asked first, then v2, then v3).
func (s *Server) underPrefix(method, path string) string {
	if strings.HasPrefix(path, APIPrefix+"/") || strings.HasPrefix(path, APIv3Prefix+"/") {
		return ""
	}
	rest := path
	if after, ok := strings.CutPrefix(path, "/api"); ok && (after == "" || after[0] == '/') {
		rest = after
	}
	prefixes := []string{APIPrefix, APIv3Prefix}
	if len(rest) > 2 && rest[1] == 'v' && rest[2] >= '0' && rest[2] <= '9' {
		var version string
		version, rest, _ = strings.Cut(rest[1:], "/")
		rest = "/" + rest
		if "/api/"+version == APIv3Prefix {
			prefixes = []string{APIv3Prefix, APIPrefix}
		}
	}
	for _, prefix := range prefixes {
		if handler, _ := s.router.Lookup(method, prefix+rest, &fasthttp.RequestCtx{}); handler != nil {
			return fmt.Sprintf(": the API lives under %s and %s; this route is %s %s%s", APIPrefix, APIv3Prefix, method, prefix, rest)
		}
	}
	return fmt.Sprintf(": the API lives under %s and %s", APIPrefix, APIv3Prefix)
}

// BearerMatches reports, in constant time, whether an Authorization header carries token.
func BearerMatches(header, token string) bool {
	given, ok := strings.CutPrefix(header, "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(given), []byte(token)) == 1
}

func (s *Server) routesV2() {
	v2 := func(method, path string, auth authKind, h func(*request)) { s.handle(method, APIPrefix+path, auth, h) }

	v2(http.MethodPost, "/templates", authTeam, s.createTemplate)
	v2(http.MethodGet, "/templates", authTeam, s.listTemplates)
	v2(http.MethodGet, "/templates/{id}", authTeam, s.getTemplate)
	v2(http.MethodPatch, "/templates/{id}", authTeam, s.renameTemplate)
	v2(http.MethodDelete, "/templates/{id}", authTeam, s.deleteTemplate)
	v2(http.MethodGet, "/templates/{id}/download", authTeam, s.downloadTemplate)
	v2(http.MethodPut, "/templates/{id}/upload", authTeam, s.freshUploadURL)
	v2(http.MethodGet, "/templates/{id}/compositions", authTeam, s.templateCompositions)

	v2(http.MethodPost, "/jobs", authTeam, s.createJob)
	v2(http.MethodGet, "/jobs", authTeam, s.listJobs)
	v2(http.MethodGet, "/jobs/{id}", authTeam, s.getJob)
	v2(http.MethodPatch, "/jobs/{id}", authTeam, s.retagJob)
	v2(http.MethodGet, "/jobs/{id}/logs", authTeam, s.jobLogs)
	v2(http.MethodPatch, "/jobs/{id}/cancel", authTeam, s.cancelJob)
	v2(http.MethodPost, "/jobs/{id}/stop", authTeam, s.stopJob)
	v2(http.MethodPost, "/jobs/{id}/retry", authTeam, s.retryJob)
	v2(http.MethodPost, "/jobs/cancel", authTeam, s.cancelJobs)
	v2(http.MethodPost, "/jobs/join", authTeam, s.joinJobs)

	v2(http.MethodPost, "/batches", authTeam, s.createBatch)
	v2(http.MethodGet, "/batches", authTeam, s.listBatches)
	v2(http.MethodGet, "/batches/{id}", authTeam, s.getBatch)
	v2(http.MethodPost, "/batches/{id}/cancel", authTeam, s.cancelBatch)

	v2(http.MethodPost, "/fonts", authTeam, s.uploadFont)
	v2(http.MethodGet, "/fonts", authTeam, s.listFonts)
	v2(http.MethodGet, "/fonts/{id}", authTeam, s.getFont)
	v2(http.MethodDelete, "/fonts/{id}", authTeam, s.deleteFont)

	v2(http.MethodPut, "/secrets", authTeam, s.putSecret)
	v2(http.MethodGet, "/secrets", authTeam, s.listSecrets)
	v2(http.MethodDelete, "/secrets/{id}", authTeam, s.deleteSecret)

	v2(http.MethodGet, "/team", authTeam, s.getTeam)
	v2(http.MethodGet, "/usage", authTeam, s.teamUsage)
	v2(http.MethodGet, "/tokens", authTeam, s.listTokens)
	v2(http.MethodPost, "/tokens", authTeam, s.createTeamToken)
	v2(http.MethodDelete, "/tokens/{token}", authTeam, s.revokeToken)
	v2(http.MethodGet, "/events", authTeam, s.streamEvents)
	v2(http.MethodPost, "/admin/tokens", authAdmin, s.createToken)
	v2(http.MethodGet, "/admin/tokens", authAdmin, s.listTokens)
	v2(http.MethodGet, "/admin/history", authAdmin, s.farmHistory)
	v2(http.MethodGet, "/admin/events", authAdmin, s.streamFarmEvents)
	v2(http.MethodGet, "/admin/cluster", authAdmin, s.clusterStatus)
	v2(http.MethodPost, "/admin/cluster/replicas", authAdmin, s.addReplica)
	v2(http.MethodDelete, "/admin/cluster/replicas/{id}", authAdmin, s.removeReplica)
	v2(http.MethodDelete, "/admin/tokens/{token}", authAdmin, s.revokeToken)
	v2(http.MethodGet, "/admin/teams", authAdmin, s.listTeams)
	v2(http.MethodPost, "/admin/teams", authAdmin, s.createTeam)
	v2(http.MethodPatch, "/admin/teams/{team}", authAdmin, s.setTeamPolicy)
	v2(http.MethodGet, "/admin/jobs", authAdmin, s.listAllJobs)
	v2(http.MethodGet, "/admin/jobs/{id}", authAdmin, s.anyTeamsJob(s.getAnyJob))
	v2(http.MethodPatch, "/admin/jobs/{id}", authAdmin, s.anyTeamsJob(s.retagJob))
	v2(http.MethodGet, "/admin/jobs/{id}/logs", authAdmin, s.anyTeamsJob(s.jobLogs))
	v2(http.MethodPatch, "/admin/jobs/{id}/cancel", authAdmin, s.anyTeamsJob(s.cancelJob))
	v2(http.MethodPost, "/admin/jobs/{id}/stop", authAdmin, s.anyTeamsJob(s.stopJob))
	v2(http.MethodPost, "/admin/jobs/{id}/retry", authAdmin, s.anyTeamsJob(s.retryJob))
	v2(http.MethodPost, "/admin/jobs/{id}/chunks/{index}/retry", authAdmin, s.anyTeamsJob(s.sendChunkAgain))
	v2(http.MethodGet, "/admin/limits", authAdmin, s.listLimits)
	v2(http.MethodGet, "/admin/usage", authAdmin, s.farmUsage)
	v2(http.MethodGet, "/admin/backup", authAdmin, s.backup)
	v2(http.MethodPut, "/admin/limits/{name}", authAdmin, s.putLimit)
	v2(http.MethodDelete, "/admin/limits/{name}", authAdmin, s.deleteLimit)
	v2(http.MethodGet, "/nodes", authAdmin, s.listNodes)
	v2(http.MethodPost, "/nodes/{node}/drain", authAdmin, s.nodeCommand(true))
	v2(http.MethodPost, "/nodes/{node}/clear", authAdmin, s.nodeCommand(false))
	v2(http.MethodDelete, "/nodes/{node}", authAdmin, s.forgetNode)
	v2(http.MethodGet, "/openapi.json", authNone, s.openAPI)

	s.handle(http.MethodGet, "/files/{key:*}", authNone, s.getFile)
	s.handle(http.MethodHead, "/files/{key:*}", authNone, s.getFile)
	s.handle(http.MethodPut, "/files/uploads/templates/{team}/{id}/{window}", authNone, s.uploadTemplateFile)
	s.handle(http.MethodPut, "/files/uploads/templates/{team}/{id}", authNone, s.uploadTemplateFile)
	s.handle(http.MethodPut, "/files/outputs/{job}/{attempt}/{name}", authNone, s.uploadOutput)

	if s.UI != nil {
		// The dashboard is not part of the API: its routes are left out of the OpenAPI document.
		page := s.wrap("/ui/", authNone, anyReplica, func(r *request) { s.UI(r.ctx) })
		s.router.GET("/ui/{path:*}", page) // also answers /ui
		s.router.HEAD("/ui/{path:*}", page)
		root := s.wrap("/", authNone, anyReplica, func(r *request) { s.UIRedirect(r.ctx) })
		s.router.GET("/", root)
		s.router.HEAD("/", root)
		// Browsers and bookmark tools ask for /favicon.ico whatever the page names.
		favicon := s.wrap("/favicon.ico", authNone, anyReplica, func(r *request) { r.ctx.Redirect("/ui/favicon.svg", http.StatusMovedPermanently) })
		s.router.GET("/favicon.ico", favicon)
		s.router.HEAD("/favicon.ico", favicon)
	}
	s.handle(http.MethodGet, "/healthz", authNone, func(r *request) { r.json(http.StatusOK, map[string]string{"status": "ok"}) })
	s.handle(http.MethodGet, "/readyz", authNone, s.readyz)
	s.handle(http.MethodGet, "/metrics", authNone, s.metrics)
	s.router.NotFound = s.wrap("(unmatched)", authNone, anyReplica, func(r *request) {
		r.fail(newError(http.StatusNotFound, codeNotFound, "no route %s %s%s", r.ctx.Method(), r.ctx.Path(), s.underPrefix(string(r.ctx.Method()), string(r.ctx.Path()))))
	})
	s.router.MethodNotAllowed = s.wrap("(method not allowed)", authNone, anyReplica, func(r *request) {
		allowed := string(r.ctx.Response.Header.Peek("Allow"))
		r.fail(newError(http.StatusMethodNotAllowed, codeMethodNotAllowed, "%s is not allowed on %s; it takes %s", r.ctx.Method(), r.ctx.Path(), allowed))
	})
	s.router.PanicHandler = func(ctx *fasthttp.RequestCtx, p any) {
		s.log.Error("router panic", "panic", p)
		ctx.Error(`{"error":"internal error","code":"internal"}`, http.StatusInternalServerError)
	}
	s.router.RedirectTrailingSlash = false
	s.router.RedirectFixedPath = false
}

// readyz answers 200 while the server takes work, 503 once it drains.
func (s *Server) readyz(r *request) {
	if s.draining.Load() {
		r.fail(&apiError{status: http.StatusServiceUnavailable, Code: codeUnavailable, Error: "shutting down", retryAfter: int(s.cfg.RetryAfter.Seconds())})
		return
	}
	r.json(http.StatusOK, map[string]string{"status": "ready"})
}

type teamView struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// WebhookSigningSecret keys the X-Webhook-Signature of this team's webhooks (not told to
	// a viewer's token: it would let its holder forge the team's webhooks).
	WebhookSigningSecret string `json:"webhookSigningSecret,omitempty"`
	// Engines are those that ready render nodes offer now: a job for another engine waits.
	Engines []string `json:"engines"`
	// Role is what the request's token may do (the dashboard shows only that).
	Role persistence.TokenRole `json:"role"`
}

func (s *Server) getTeam(r *request) {
	team, err := s.Store.Team(r.team)
	if err != nil {
		r.failErr(err, nil)
		return
	}
	engines := []string{}
	for engine, c := range s.Coordinator.Capacities() {
		if c.Nodes > 0 {
			engines = append(engines, engine)
		}
	}
	slices.Sort(engines)
	secret := team.WebhookSecret
	if r.role == persistence.RoleViewer {
		secret = ""
	}
	r.json(http.StatusOK, teamView{ID: team.ID.String(), Name: team.Name, WebhookSigningSecret: secret, Engines: engines, Role: r.role})
}

// nodeView is a render node as GET /api/v2/nodes shows it: what the coordinator knows of it,
// and its renders named as their clients know them (currentJobs holds chunks' own ids).
type nodeView struct {
	actors.NodeInfo
	Rendering []renderHolder `json:"rendering"`
}

func (s *Server) listNodes(r *request) {
	nodes := s.Coordinator.Nodes()
	out := make([]nodeView, len(nodes))
	for i, n := range nodes {
		ids := make([]ulid.ULID, 0, len(n.CurrentJobs))
		for _, text := range n.CurrentJobs {
			if id, err := ulid.ParseStrict(text); err == nil {
				ids = append(ids, id)
			}
		}
		out[i] = nodeView{NodeInfo: n, Rendering: s.holders(ids)}
	}
	r.json(http.StatusOK, out)
}

// forgetNode drops a lost or departed node from the farm's records.
func (s *Server) forgetNode(r *request) {
	nodeID, _ := r.ctx.UserValue("node").(string)
	if err := s.Coordinator.ForgetNode(nodeID); err != nil {
		failNode(r, err)
		return
	}
	r.ctx.SetStatusCode(http.StatusNoContent)
}

// nodeCommand answers an operator's drain or clear of a node with the node as it is now.
func (s *Server) nodeCommand(drain bool) func(*request) {
	return func(r *request) {
		nodeID, _ := r.ctx.UserValue("node").(string)
		command := s.Coordinator.ClearNode
		if drain {
			command = s.Coordinator.DrainNode
		}
		info, err := command(nodeID)
		if err != nil {
			failNode(r, err)
			return
		}
		r.json(http.StatusOK, info)
	}
}

// failNode answers the error of an operator's command on a node.
func failNode(r *request, err error) {
	switch {
	case errors.Is(err, actors.ErrNoSuchNode):
		r.fail(newError(http.StatusNotFound, codeNotFound, "%v", err))
	case errors.Is(err, actors.ErrNodeActive):
		r.fail(newError(http.StatusConflict, codeConflict, "%v; only lost or departed nodes can be forgotten", err))
	default:
		r.failErr(err, nil)
	}
}
