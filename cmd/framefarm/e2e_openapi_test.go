package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// TestEveryOperationAnswersWhatClientsSend walks every operation of the OpenAPI document the
// coordinator serves (read with kin-openapi) and sends it what clients send, not only what the
// code expects: no body (curl -X POST), an empty one, one cut short, chunked, broken chunks, one
// past the size limit, a wrong Content-Type, Expect: 100-continue, HTTP/1.0, two requests
// pipelined, no token; then, where the operation takes JSON, a body generated from its schema
// and the same body with one field broken at a time (a wrong type, null, missing when required,
// an unknown field beside it). No answer is a 5xx, each conforms to the document (a status it
// lists, or its default, with a body of the schema given), and a body of the wrong shape is a
// 4xx.
func TestEveryOperationAnswersWhatClientsSend(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	c.control.answerAll(finishAll)
	w := newAPIWalk(t, c)
	sent := 0
	for _, op := range w.operations() {
		t.Run(op.method+" "+op.path, func(t *testing.T) { sent += w.walk(t, op) })
	}
	t.Logf("%d requests over %d operations", sent, len(w.operations()))
}

// TestAViewersTokenOnlyReads tries every operation of the OpenAPI document that a team's token
// opens with a viewer's token of the team, the documented body with it: every read answers 200
// (the team's tokens, a manager's to read, 403), everything else 403 with code forbidden.
func TestAViewersTokenOnlyReads(t *testing.T) {
	c := startCoordinator(t, options{slots: 1})
	c.control.answerAll(finishAll)
	w := newAPIWalk(t, c)
	var viewer struct {
		Token string `json:"token"`
		Role  string `json:"role"`
	}
	(&client{c: c, token: adminToken}).must(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": "walker", "role": "viewer"},
		http.StatusCreated, &viewer)
	if viewer.Role != "viewer" {
		t.Fatalf("a viewer's token made with role %q", viewer.Role)
	}
	tried := 0
	for _, op := range w.operations() {
		if w.token(op) != w.team.token {
			continue
		}
		tried++
		target := w.target(op)
		body := w.generateBody(t, op)
		head := op.method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + viewer.Token + "\r\n" +
			fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
		streams := strings.HasSuffix(op.path, "/events")
		answers, err := exchangeRaw(c.addr, variant{name: "a viewer's token", head: head, body: body}, op.method, streams)
		if err != nil || len(answers) != 1 {
			t.Errorf("%s %s: %v", op.method, op.path, err)
			continue
		}
		a := answers[0]
		want := http.StatusForbidden
		if reads(op.method) && op.path != "/api/v2/tokens" {
			want = http.StatusOK
		}
		if a.status != want {
			t.Errorf("%s %s with a viewer's token: %d, want %d: %.200s", op.method, op.path, a.status, want, a.body)
			continue
		}
		if want == http.StatusForbidden && op.method != http.MethodHead && !strings.Contains(string(a.body), `"code":"forbidden"`) {
			t.Errorf("%s %s: a 403 without code forbidden: %s", op.method, op.path, a.body)
		}
	}
	t.Logf("%d operations tried with a viewer's token", tried)
}

// reads reports whether a method only reads.
func reads(method string) bool { return method == http.MethodGet || method == http.MethodHead }

// apiWalk holds the document and the records whose ids fill its paths.
type apiWalk struct {
	t    *testing.T
	c    *coordinator
	doc  *openapi3.T
	team *client
	// paths maps a documented path to the concrete path (and query) it is walked at.
	paths map[string]string
	// templateID and jobID are what generated bodies name, to reach past the lookups.
	templateID, jobID string
}

// walkOperation is one documented operation.
type walkOperation struct {
	method, path string
	item         *openapi3.PathItem
	op           *openapi3.Operation
}

func newAPIWalk(t *testing.T, c *coordinator) *apiWalk {
	w := &apiWalk{t: t, c: c, team: c.team("walker")}
	status, raw := get(t, c.url+"/api/v2/openapi.json")
	if status != http.StatusOK {
		t.Fatalf("GET /api/v2/openapi.json: %d", status)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the served OpenAPI document is not valid: %v", err)
	}
	w.doc = doc

	// Records of every kind the paths name: a template, a job that finished (its output is a
	// file), a batch, a font, a secret, a token to revoke, the embedded node.
	w.templateID = w.team.uploadTemplate(inspection())
	var job created
	w.team.must(http.MethodPost, "/api/v2/jobs", renderJob(w.templateID), http.StatusCreated, &job)
	c.waitJob(job.ID, "finished")
	w.jobID = job.ID
	finished := w.team.job(job.ID)
	var batch struct {
		ID string `json:"batchId"`
	}
	w.team.must(http.MethodPost, "/api/v2/batches", map[string]any{"jobs": []any{renderJob(w.templateID)}}, http.StatusCreated, &batch)
	font, err := os.ReadFile("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		ID string `json:"id"`
	}
	if status, body := w.team.uploadFont("Walk.ttf", font, ""); status != http.StatusCreated || json.Unmarshal(body, &f) != nil {
		t.Fatalf("font: %d %s", status, body)
	}
	var secret struct {
		ID string `json:"id"`
	}
	w.team.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "WALK", "value": "s"}, http.StatusCreated, &secret)
	admin := &client{c: c, token: adminToken}
	var throwaway struct {
		ID string `json:"id"`
	}
	admin.must(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": "throwaway"}, http.StatusCreated, &throwaway)
	var nodes []struct {
		ID string `json:"id"`
	}
	admin.must(http.MethodGet, "/api/v2/nodes", nil, http.StatusOK, &nodes)
	if len(nodes) == 0 {
		t.Fatal("no render node")
	}
	var fresh templateAnswer
	w.team.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "Awaiting"}, http.StatusCreated, &fresh)
	upload, err := url.Parse(fresh.UploadInfo.URL)
	if err != nil {
		t.Fatal(err)
	}
	output, err := url.Parse(finished.OutputURL)
	if err != nil {
		t.Fatal(err)
	}
	w.paths = map[string]string{
		"/api/v2/templates/{id}":                        "/api/v2/templates/" + w.templateID,
		"/api/v2/jobs/{id}":                             "/api/v2/jobs/" + job.ID,
		"/api/v2/batches/{id}":                          "/api/v2/batches/" + batch.ID,
		"/api/v2/fonts/{id}":                            "/api/v2/fonts/" + f.ID,
		"/api/v2/secrets/{id}":                          "/api/v2/secrets/" + secret.ID,
		"/api/v2/admin/tokens/{token}":                  "/api/v2/admin/tokens/" + throwaway.ID,
		"/api/v2/admin/cluster/replicas/{id}":           "/api/v2/admin/cluster/replicas/c9",
		"/api/v2/admin/teams/{team}":                    "/api/v2/admin/teams/throwaway",
		"/api/v2/admin/limits/{name}":                   "/api/v2/admin/limits/walk",
		"/api/v2/tokens/{token}":                        "/api/v2/tokens/" + throwaway.ID,
		"/api/v2/admin/jobs/{id}":                       "/api/v2/admin/jobs/" + job.ID,
		"/api/v2/admin/jobs/{id}/chunks/{index}":        "/api/v2/admin/jobs/" + job.ID + "/chunks/0",
		"/api/v2/nodes/{node}":                          "/api/v2/nodes/" + nodes[0].ID,
		"/api/v3/templates/{id}":                        "/api/v3/templates/" + w.templateID,
		"/files/{key}":                                  output.RequestURI(),
		"/files/uploads/templates/{team}/{id}/{window}": upload.RequestURI(),
		"/files/uploads/templates/{team}/{id}":          strings.Join(strings.Split(upload.Path, "/")[:6], "/") + "?" + upload.RawQuery,
		"/files/outputs/{job}/{attempt}/{name}":         "/files/outputs/" + job.ID + "/1/out.mp4?expires=1&sig=00",
	}
	return w
}

// operations are the document's operations, in a stable order; destructive ones come last so
// the records the others use still exist when they are walked.
func (w *apiWalk) operations() []walkOperation {
	var ops []walkOperation
	for path, item := range w.doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, walkOperation{method: method, path: path, item: item, op: op})
		}
	}
	rank := func(o walkOperation) int {
		if o.method == http.MethodDelete {
			return 1
		}
		return 0
	}
	sort.Slice(ops, func(i, j int) bool {
		if rank(ops[i]) != rank(ops[j]) {
			return rank(ops[i]) < rank(ops[j])
		}
		return ops[i].path+ops[i].method < ops[j].path+ops[j].method
	})
	return ops
}

// target is where an operation is walked: its path with ids filled in (the longest documented
// path the walk knows that the operation's path starts with).
func (w *apiWalk) target(op walkOperation) string {
	best := ""
	for documented := range w.paths {
		if (op.path == documented || strings.HasPrefix(op.path, documented+"/")) && len(documented) > len(best) {
			best = documented
		}
	}
	if best == "" {
		if strings.Contains(op.path, "{") {
			w.t.Fatalf("no concrete path for %s", op.path)
		}
		return op.path
	}
	concrete, rest := w.paths[best], op.path[len(best):]
	if rest == "" {
		return concrete
	}
	path, query, _ := strings.Cut(concrete, "?")
	if query != "" {
		w.t.Fatalf("%s has a signed path and more after it", op.path)
	}
	return path + rest
}

// token is the bearer token an operation needs.
func (w *apiWalk) token(op walkOperation) string {
	if op.op.Security != nil && len(*op.op.Security) == 0 {
		return ""
	}
	if strings.HasPrefix(op.path, "/api/v2/admin/") || strings.HasPrefix(op.path, "/api/v2/nodes") {
		return adminToken
	}
	return w.team.token
}

// variant is one request of the walk, as bytes on the wire.
type variant struct {
	name string
	// head is the request line and headers (without the blank line); body follows them.
	head, body string
	// halfClose closes the sending side after the body: the server sees it end there.
	halfClose bool
	// pipelined sends the request this many times in one write.
	pipelined int
	// expect waits for 100 Continue before the body.
	expect bool
	// wrongShape: the body breaks the schema, so the answer must be a 4xx.
	wrongShape bool
}

// walk sends every variant to one operation and checks every answer; it returns how many
// requests it sent.
func (w *apiWalk) walk(t *testing.T, op walkOperation) int {
	target := w.target(op)
	streams := false
	if r := op.op.Responses.Status(http.StatusOK); r != nil && r.Value != nil && r.Value.Content.Get("text/event-stream") != nil {
		streams = true
	}
	auth := ""
	if token := w.token(op); token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	line := func(proto string) string {
		return op.method + " " + target + " " + proto + "\r\nHost: 127.0.0.1\r\n" + auth
	}
	body := w.generateBody(t, op)
	json := "Content-Type: application/json\r\n"
	withLength := func(b string) string { return fmt.Sprintf("Content-Length: %d\r\n", len(b)) }
	variants := []variant{
		{name: "no body, no Content-Length", head: line("HTTP/1.1")},
		{name: "an empty body", head: line("HTTP/1.1") + json + "Content-Length: 0\r\n"},
		{name: "the documented body", head: line("HTTP/1.1") + json + withLength(body), body: body},
		{name: "a body cut short", head: line("HTTP/1.1") + json + fmt.Sprintf("Content-Length: %d\r\n", len(body)+64), body: body, halfClose: true},
		{name: "a chunked body", head: line("HTTP/1.1") + json + "Transfer-Encoding: chunked\r\n", body: chunked(body)},
		{name: "broken chunks", head: line("HTTP/1.1") + json + "Transfer-Encoding: chunked\r\n", body: "zz\r\n{}\r\n0\r\n\r\n"},
		{name: "a body past the limit", head: line("HTTP/1.1") + json + fmt.Sprintf("Content-Length: %d\r\n", 16<<20+1),
			body: `{"x":"` + strings.Repeat("x", 100<<10), halfClose: true},
		{name: "a text/plain body", head: line("HTTP/1.1") + "Content-Type: text/plain\r\n" + withLength(body), body: body},
		{name: "a multipart Content-Type on JSON", head: line("HTTP/1.1") + "Content-Type: multipart/form-data; boundary=x\r\n" + withLength(body), body: body,
			wrongShape: jsonBodySchema(op) != nil},
		{name: "Expect: 100-continue", head: line("HTTP/1.1") + json + "Expect: 100-continue\r\n" + withLength(body), body: body, expect: true},
		{name: "HTTP/1.0", head: line("HTTP/1.0") + json + withLength(body), body: body},
		{name: "no token", head: strings.Replace(line("HTTP/1.1"), auth, "", 1) + json + withLength(body), body: body},
	}
	if !streams {
		variants = append(variants, variant{name: "two requests pipelined", head: line("HTTP/1.1") + json + withLength(body), body: body, pipelined: 2})
	}
	for _, m := range w.mutations(t, op, body) {
		variants = append(variants, variant{name: m.name, head: line("HTTP/1.1") + json + withLength(m.body), body: m.body, wrongShape: m.wrongShape})
	}
	for _, v := range variants {
		answers, err := exchangeRaw(w.c.addr, v, op.method, streams)
		if err != nil {
			t.Errorf("%s: %v", v.name, err)
			continue
		}
		for _, a := range answers {
			w.check(t, op, target, v, a)
		}
	}
	return len(variants)
}

// answer is one response read off the wire.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// check holds one answer to the document.
func (w *apiWalk) check(t *testing.T, op walkOperation, target string, v variant, a answer) {
	t.Helper()
	if a.status >= 500 {
		t.Errorf("%s: %d %s", v.name, a.status, a.body)
		return
	}
	if v.wrongShape && a.status < 400 {
		t.Errorf("%s: %d, want a 4xx: %s", v.name, a.status, a.body)
	}
	if a.status >= 400 && op.method != http.MethodHead { // a HEAD answer has no body
		var e struct {
			Error string `json:"error"`
			Code  string `json:"code"`
		}
		if json.Unmarshal(a.body, &e) != nil || e.Error == "" || e.Code == "" {
			t.Errorf("%s: %d without a JSON error and code: %q", v.name, a.status, a.body)
		}
	}
	req, _ := http.NewRequest(op.method, w.c.url+target, nil)
	params := map[string]string{}
	route := &routers.Route{Spec: w.doc, Path: op.path, PathItem: op.item, Method: op.method, Operation: op.op}
	input := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 a.status, Header: a.header, Body: io.NopCloser(bytes.NewReader(a.body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
		input.Options.ExcludeResponseBody = true
	}
	if err := openapi3filter.ValidateResponse(context.Background(), input); err != nil {
		t.Errorf("%s: the answer %d is not as documented: %v\n%.300s", v.name, a.status, err, a.body)
	}
}

// chunked encodes body in two chunks.
func chunked(body string) string {
	half := len(body) / 2
	var b strings.Builder
	for _, part := range []string{body[:half], body[half:]} {
		if part != "" {
			fmt.Fprintf(&b, "%x\r\n%s\r\n", len(part), part)
		}
	}
	return b.String() + "0\r\n\r\n"
}

// exchangeRaw sends v on a connection of its own and reads its answers. An event stream's
// answer is read to its headers.
func exchangeRaw(addr string, v variant, method string, streams bool) ([]answer, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(waitLimit))
	reader := bufio.NewReader(conn)
	request := v.head + "\r\n"
	var answers []answer
	read := func() error {
		resp, err := http.ReadResponse(reader, &http.Request{Method: method})
		if err != nil {
			return fmt.Errorf("reading the answer: %w", err)
		}
		// An event stream's body never ends: it goes with the connection (closing the body
		// would read it to its end).
		a := answer{status: resp.StatusCode, header: resp.Header}
		if !streams || resp.StatusCode != http.StatusOK {
			if a.body, err = io.ReadAll(resp.Body); err != nil {
				return fmt.Errorf("reading the answer's body: %w", err)
			}
		}
		answers = append(answers, a)
		return nil
	}
	switch {
	case v.expect:
		if _, err := io.WriteString(conn, request); err != nil {
			return nil, err
		}
		resp, err := http.ReadResponse(reader, &http.Request{Method: method})
		if err != nil {
			return nil, fmt.Errorf("reading the interim answer: %w", err)
		}
		if resp.StatusCode != http.StatusContinue {
			// Refused before the body (a bad token, a body too large): the final answer.
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			return []answer{{status: resp.StatusCode, header: resp.Header, body: data}}, nil
		}
		if _, err := io.WriteString(conn, v.body); err != nil {
			return nil, err
		}
		return answers, read()
	case v.pipelined > 1:
		if _, err := io.WriteString(conn, strings.Repeat(request+v.body, v.pipelined)); err != nil {
			return nil, err
		}
		for range v.pipelined {
			if err := read(); err != nil {
				return answers, err
			}
		}
		return answers, nil
	}
	if _, err := io.WriteString(conn, request+v.body); err != nil && !v.halfClose {
		return nil, err
	}
	if v.halfClose {
		conn.(*net.TCPConn).CloseWrite()
	}
	return answers, read()
}

// generateBody is a JSON body of the operation's schema, naming the walk's records where it
// takes ids; "" when the operation takes no JSON body.
func (w *apiWalk) generateBody(t *testing.T, op walkOperation) string {
	schema := jsonBodySchema(op)
	if schema == nil {
		return ""
	}
	value := generate(schema, 0)
	w.nameRecords(op, value)
	return marshalBody(t, value)
}

// nameRecords puts the walk's records where a generated body names them.
func (w *apiWalk) nameRecords(op walkOperation, value any) {
	body, ok := value.(map[string]any)
	if !ok {
		return
	}
	template := map[string]any{"id": w.templateID, "composition": "main"}
	switch op.path {
	case "/api/v2/jobs":
		body["template"] = template
	case "/api/v2/batches":
		body["jobs"] = []any{map[string]any{"template": template}}
	case "/api/v2/jobs/cancel":
		body["jobs"] = []any{w.jobID}
	case "/api/v2/jobs/join":
		body["assets"] = []any{map[string]any{"type": "video", "src": w.c.url + "/healthz"}}
	case "/api/v2/admin/tokens":
		body["team"] = "walker"
	}
}

// jsonBodySchema is the operation's JSON request body schema, if it takes one.
func jsonBodySchema(op walkOperation) *openapi3.Schema {
	if op.op.RequestBody == nil || op.op.RequestBody.Value == nil {
		return nil
	}
	media := op.op.RequestBody.Value.Content.Get("application/json")
	if media == nil || media.Schema == nil {
		return nil
	}
	return media.Schema.Value
}

// generate makes a value of schema: its example or default, else its first enum value, else a
// value of its type with the required properties.
func generate(s *openapi3.Schema, depth int) any {
	switch {
	case s == nil:
		return "x"
	case s.Example != nil:
		return s.Example
	case s.Default != nil:
		return s.Default
	case len(s.Enum) > 0:
		return s.Enum[0]
	case len(s.OneOf) > 0:
		return generate(s.OneOf[0].Value, depth)
	case len(s.AnyOf) > 0:
		return generate(s.AnyOf[0].Value, depth)
	}
	types := s.Type.Slice()
	kind := "string"
	if len(types) > 0 {
		kind = types[0]
	} else if len(s.Properties) > 0 {
		kind = "object"
	}
	switch kind {
	case "object":
		out := map[string]any{}
		if depth < 4 {
			for _, name := range s.Required {
				if p := s.Properties[name]; p != nil {
					out[name] = generate(p.Value, depth+1)
				}
			}
		}
		return out
	case "array":
		n := 1
		if s.MinItems > 1 {
			n = int(s.MinItems)
		}
		var items []any
		for range n {
			if s.Items != nil && depth < 4 {
				items = append(items, generate(s.Items.Value, depth+1))
			}
		}
		return items
	case "integer":
		if s.Min != nil {
			return int(*s.Min)
		}
		return 1
	case "number":
		return 1.5
	case "boolean":
		return true
	}
	return "walk"
}

// mutation is a body with one field broken.
type mutation struct {
	name, body string
	wrongShape bool
}

// mutations breaks the generated body one field at a time: every property the schema names (to
// a depth of three), set to a value of another type, to null, left out when required, and an
// unknown field beside them.
func (w *apiWalk) mutations(t *testing.T, op walkOperation, body string) []mutation {
	schema := jsonBodySchema(op)
	if schema == nil {
		return nil
	}
	var out []mutation
	add := func(name string, value any, wrongShape bool) {
		out = append(out, mutation{name: name, body: marshalBody(t, value), wrongShape: wrongShape})
	}
	add("a JSON array for the object", []any{}, true)
	add("a JSON string for the object", "walk", true)
	out = append(out, mutation{name: "a second JSON value after the body", body: body + " {}", wrongShape: true})
	// visit breaks the fields of the object at path, in a body holding that object (made from
	// its schema when the generated body has none there).
	var visit func(path []any, s *openapi3.Schema, body string, depth int)
	visit = func(path []any, s *openapi3.Schema, body string, depth int) {
		if s == nil || depth > 3 {
			return
		}
		if getAt(mustDecode(t, body), path) == nil {
			body = marshalBody(t, setAt(mustDecode(t, body), path, generate(s, depth)))
		}
		if hasType(s, "array") && s.Items != nil {
			visit(append(slices.Clone(path), 0), s.Items.Value, body, depth+1)
			return
		}
		if !hasType(s, "object") && len(s.Properties) == 0 {
			return
		}
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		add(fmt.Sprintf("an unknown field in %s", describePath(path)), setAt(mustDecode(t, body), append(slices.Clone(path), "walkUnknown"), 1), true)
		for _, name := range names {
			p := s.Properties[name].Value
			at := append(slices.Clone(path), name)
			for _, wrong := range wrongValues(p) {
				add(fmt.Sprintf("%s as %s", describePath(at), describeValue(wrong)), setAt(mustDecode(t, body), at, wrong), true)
			}
			add(fmt.Sprintf("%s as null", describePath(at)), setAt(mustDecode(t, body), at, nil), false)
			if slices.Contains(s.Required, name) {
				add(fmt.Sprintf("%s left out", describePath(at)), removeAt(mustDecode(t, body), at), true)
			}
			visit(at, p, body, depth+1)
		}
	}
	visit(nil, schema, body, 0)
	return out
}

func marshalBody(t *testing.T, v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// getAt is the value at path in body, nil when there is none.
func getAt(body any, path []any) any {
	for _, step := range path {
		switch key := step.(type) {
		case string:
			m, ok := body.(map[string]any)
			if !ok {
				return nil
			}
			body = m[key]
		case int:
			a, ok := body.([]any)
			if !ok || len(a) <= key {
				return nil
			}
			body = a[key]
		}
	}
	return body
}

func mustDecode(t *testing.T, body string) any {
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// hasType reports whether s allows values of kind.
func hasType(s *openapi3.Schema, kind string) bool {
	return s.Type != nil && s.Type.Includes(kind)
}

// wrongValues are values of a type the property does not take: none for a property that takes
// anything (or several types, or one of several schemas).
func wrongValues(s *openapi3.Schema) []any {
	if len(s.OneOf) > 0 || len(s.AnyOf) > 0 || s.Type == nil || len(s.Type.Slice()) != 1 {
		if len(s.Enum) > 0 {
			return []any{"not-one-of-them"}
		}
		return nil
	}
	switch s.Type.Slice()[0] {
	case "string":
		if len(s.Enum) > 0 {
			return []any{12345, "not-one-of-them"}
		}
		return []any{12345, map[string]any{"walk": 1}}
	case "integer":
		return []any{"7", 1.5, 1e300}
	case "number":
		return []any{"7"}
	case "boolean":
		return []any{"true"}
	case "array":
		return []any{map[string]any{}, "walk"}
	case "object":
		return []any{[]any{}, "walk"}
	}
	return nil
}

// setAt sets the value at path in body (creating the objects and arrays on the way), and
// returns body.
func setAt(body any, path []any, value any) any {
	if len(path) == 0 {
		return value
	}
	switch key := path[0].(type) {
	case string:
		m, ok := body.(map[string]any)
		if !ok {
			m = map[string]any{}
		}
		m[key] = setAt(m[key], path[1:], value)
		return m
	case int:
		a, ok := body.([]any)
		if !ok || len(a) == 0 {
			a = []any{map[string]any{}}
		}
		a[0] = setAt(a[0], path[1:], value)
		return a
	}
	return body
}

// removeAt removes the field at path from body, and returns body.
func removeAt(body any, path []any) any {
	if len(path) == 1 {
		if m, ok := body.(map[string]any); ok {
			delete(m, path[0].(string))
		}
		return body
	}
	switch key := path[0].(type) {
	case string:
		if m, ok := body.(map[string]any); ok {
			m[key] = removeAt(m[key], path[1:])
		}
	case int:
		if a, ok := body.([]any); ok && len(a) > 0 {
			a[0] = removeAt(a[0], path[1:])
		}
	}
	return body
}

func describePath(path []any) string {
	if len(path) == 0 {
		return "the body"
	}
	var b strings.Builder
	for i, p := range path {
		switch k := p.(type) {
		case string:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		}
	}
	return b.String()
}

func describeValue(v any) string {
	raw, _ := json.Marshal(v)
	return string(raw)
}
