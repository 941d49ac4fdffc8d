package blobs

import (
	"net/url"
	"strings"
	"testing"
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
