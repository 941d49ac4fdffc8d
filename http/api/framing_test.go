package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
)

// framingSeeds are requests as clients send them, right and wrong; TOKEN stands for a team's
// token.
var framingSeeds = []string{
	"POST /api/v2/jobs HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\n\r\n",
	"POST /api/v2/batches HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\nContent-Length: 0\r\n\r\n",
	"PATCH /api/v2/jobs/01ARZ3NDEKTSV4RRFFQ69G5FAV HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\nContent-Length: 40\r\n\r\n{\"priority\":",
	"POST /api/v2/templates HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"typ\r\n1d\r\ne\":\"zip\",\"displayName\":\"x\"}\r\n0\r\n\r\n",
	"POST /api/v2/jobs/cancel HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
	"POST /api/v2/jobs HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
	"POST /api/v2/jobs HTTP/1.0\r\nAuthorization: Bearer TOKEN\r\nContent-Length: 2\r\n\r\n{}",
	"GET /api/v2/jobs HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\n\r\nGET /api/v2/team HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\n\r\n",
	"POST /api/v2/jobs HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\nContent-Type: multipart/form-data; boundary=x\r\nContent-Length: 2\r\n\r\n{}",
	"PUT /api/v2/secrets HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\nContent-Length: 99999999\r\n\r\n{\"name\":\"x\"",
	"POST /api/v2/fonts HTTP/1.1\r\nHost: f\r\nAuthorization: Bearer TOKEN\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 20\r\n\r\n--b\r\n\r\n--b--\r\n",
	"PUT /files/uploads/templates/01ARZ3NDEKTSV4RRFFQ69G5FAV/01ARZ3NDEKTSV4RRFFQ69G5FAV?exp=1&sig=00 HTTP/1.1\r\nHost: f\r\n\r\n",
	"GET /jobs HTTP/1.1\r\nHost: f\r\n\r\n",
	"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
	"GET / HTTP/1.1\r\nHost: f\r\nX: " + strings.Repeat("y", 9000) + "\r\n\r\n",
}

// FuzzRequestFraming sends raw bytes to a live API (real store and actors, over loopback): no
// bytes make it answer a 5xx or stop answering.
func FuzzRequestFraming(f *testing.F) {
	_, base := serveWith(f, io.Discard, Config{AdminToken: "framing-admin"}, clock.Real{})
	token := issueToken(f, base, "framing-admin")
	addr := strings.TrimPrefix(base, "http://")
	for _, seed := range framingSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, status := range exchangeBytes(t, addr, bytes.ReplaceAll(raw, []byte("TOKEN"), []byte(token))) {
			if status >= 500 {
				t.Fatalf("answered %d to %q", status, raw)
			}
		}
		if resp, err := http.Get(base + "/healthz"); err != nil {
			t.Fatalf("after %q the server no longer answers: %v", raw, err)
		} else {
			resp.Body.Close()
		}
	})
}

// issueToken issues a team's token through the admin route, with the admin's token.
func issueToken(t testing.TB, base, admin string) string {
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v2/admin/tokens", strings.NewReader(`{"team":"framing"}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Token == "" {
		t.Fatalf("no token: %d %v", resp.StatusCode, err)
	}
	return out.Token
}

// exchangeBytes writes raw on a connection of its own, closes its sending side and returns the
// status of every answer read until the server closes the connection.
func exchangeBytes(t *testing.T, addr string, raw []byte) []int {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	conn.Write(raw)
	conn.(*net.TCPConn).CloseWrite()
	// Answers are told apart by their status lines; bodies are JSON or files, whose lines
	// never start as a status line does.
	var statuses []int
	lines := bufio.NewScanner(conn)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, "HTTP/1.") || len(line) < 12 {
			continue
		}
		if status, err := strconv.Atoi(line[9:12]); err == nil {
			statuses = append(statuses, status)
		}
	}
	if err := lines.Err(); err != nil && !isReset(err) {
		t.Fatalf("reading the answers to %q: %v", raw, err)
	}
	return statuses
}

// isReset reports whether err is the server resetting a connection it closed with bytes unread,
// which is how it ends a request it refused mid-body.
func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}
