package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/framefarm/framefarm/cluster/clock"
)

// TestTokensExpireAndRevocationTakesEffectAtOnce: a token with an expiry stops working then, a
// revoked token stops at once although the server had it cached, and the list names tokens
// without revealing them.
func TestTokensExpireAndRevocationTakesEffectAtOnce(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	_, url := serveWith(t, io.Discard, Config{AdminToken: "admin-token-for-tests"}, clk)
	call := func(method, path, token string, body any) (int, []byte) {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, url+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, data
	}
	type info struct {
		ID, Token string
		ExpiresAt *time.Time
		Expired   bool
	}
	create := func(body map[string]any) info {
		t.Helper()
		code, raw := call(http.MethodPost, "/api/v2/admin/tokens", "admin-token-for-tests", body)
		var i info
		if code != http.StatusCreated || json.Unmarshal(raw, &i) != nil || len(i.ID) != 16 || i.Token == "" {
			t.Fatalf("create: %d %s", code, raw)
		}
		return i
	}
	expiring := create(map[string]any{"team": "acme", "expiresAt": clk.Now().Add(time.Hour)})
	lasting := create(map[string]any{"team": "acme"})
	if code, _ := call(http.MethodPost, "/api/v2/admin/tokens", "admin-token-for-tests", map[string]any{"team": "acme", "expiresAt": clk.Now().Add(-time.Second)}); code != http.StatusBadRequest {
		t.Fatalf("an expiry in the past: %d", code)
	}
	for _, tok := range []info{expiring, lasting} {
		if code, _ := call(http.MethodGet, "/api/v2/secrets", tok.Token, nil); code != http.StatusOK {
			t.Fatalf("a new token: %d", code)
		}
	}

	clk.Advance(2 * time.Hour)
	if code, _ := call(http.MethodGet, "/api/v2/secrets", expiring.Token, nil); code != http.StatusUnauthorized {
		t.Fatalf("an expired token: %d", code)
	}
	code, raw := call(http.MethodGet, "/api/v2/admin/tokens", "admin-token-for-tests", nil)
	var list []info
	if code != http.StatusOK || json.Unmarshal(raw, &list) != nil || len(list) != 2 || bytes.Contains(raw, []byte(lasting.Token)) {
		t.Fatalf("list: %d %s", code, raw)
	}
	for _, i := range list {
		if i.ID == expiring.ID && (!i.Expired || i.ExpiresAt == nil) || i.ID == lasting.ID && (i.Expired || i.ExpiresAt != nil) {
			t.Fatalf("list: %s", raw)
		}
	}

	if code, _ := call(http.MethodDelete, "/api/v2/admin/tokens/"+lasting.ID, "admin-token-for-tests", nil); code != http.StatusOK {
		t.Fatalf("revoke: %d", code)
	}
	if code, _ := call(http.MethodGet, "/api/v2/secrets", lasting.Token, nil); code != http.StatusUnauthorized {
		t.Fatalf("a revoked token still works: %d", code)
	}
	if code, _ := call(http.MethodDelete, "/api/v2/admin/tokens/"+lasting.ID, "admin-token-for-tests", nil); code != http.StatusNotFound {
		t.Fatalf("revoking twice: %d", code)
	}
	if code, _ := call(http.MethodGet, "/api/v2/admin/tokens", lasting.Token, nil); code != http.StatusUnauthorized {
		t.Fatalf("admin route with a revoked team token: %d", code)
	}
}
