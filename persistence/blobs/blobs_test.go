package blobs

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestEscapeKeyMatchesPathEscapeBySegment: the shortcut for plain keys gives what escaping each
// segment gives.
func TestEscapeKeyMatchesPathEscapeBySegment(t *testing.T) {
	for _, key := range []string{
		"outputs/01JX0000000000000000000000/out.mp4", "a b/c", "é/ü.png", "x?y/z#1", "a;b,c/d", "$&+:=@/~-_.", "",
	} {
		parts := strings.Split(key, "/")
		for i, p := range parts {
			parts[i] = url.PathEscape(p)
		}
		if got, want := escapeKey(key), strings.Join(parts, "/"); got != want {
			t.Errorf("escapeKey(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestSignedURLs: a URL verifies for its method and key until it expires, and not once changed;
// its signature is the HMAC-SHA256 of method, key and expiry, a line each, in hex, so URLs
// handed out by earlier releases still verify.
func TestSignedURLs(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	s := NewSigner("https://farm.example/", secret)
	expires := time.Unix(1795000000, 0)
	for _, key := range []string{"outputs/01JX0000000000000000000000/out.mp4", "a b/é.png"} {
		raw := s.URL(http.MethodGet, key, expires)
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if want := "https://farm.example" + FilesPrefix + escapeKey(key); !strings.HasPrefix(raw, want+"?") {
			t.Fatalf("%s does not start with %s", raw, want)
		}
		exp, sig := u.Query().Get("exp"), u.Query().Get("sig")
		mac := hmac.New(sha256.New, secret)
		mac.Write([]byte("GET\n" + key + "\n" + exp))
		if want := hex.EncodeToString(mac.Sum(nil)); sig != want || exp != "1795000000" {
			t.Fatalf("exp %s sig %s, want exp 1795000000 sig %s", exp, sig, want)
		}
		if err := s.Verify(http.MethodGet, key, exp, sig, expires); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		for name, err := range map[string]error{
			"other method": s.Verify(http.MethodPut, key, exp, sig, expires),
			"other key":    s.Verify(http.MethodGet, key+"x", exp, sig, expires),
			"later expiry": s.Verify(http.MethodGet, key, "1795000001", sig, expires),
			"expired":      s.Verify(http.MethodGet, key, exp, sig, expires.Add(time.Second)),
		} {
			if err == nil {
				t.Errorf("%s: %s verified", name, raw)
			}
		}
	}
}

// BenchmarkSignedURL: one output URL, as a listing signs one per job.
func BenchmarkSignedURL(b *testing.B) {
	s := NewSigner("https://farm.example", []byte("0123456789abcdef0123456789abcdef"))
	expires := time.Unix(1795000000, 0)
	for b.Loop() {
		s.URL(http.MethodGet, "outputs/01JX0000000000000000000000/result.mp4", expires)
	}
}
