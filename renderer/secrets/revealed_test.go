package secrets

import (
	"strings"
	"testing"
)

func TestScrubHidesValuesHoweverTheyAreWritten(t *testing.T) {
	r := &Revealed{}
	r.Add("tok", "s3cr3t/value&x=1")
	r.Add("short", "ab")
	r.Add("key", "AKIA-long-key")
	msg := `Post "http://hook.example/h?t=s3cr3t%2Fvalue%26x%3D1": dial tcp; raw s3cr3t/value&x=1; path s3cr3t%2Fvalue&x=1; ` +
		`json "s3cr3t/value\u0026x=1"; key AKIA-long-key; ab stays`
	got := r.Scrub(msg)
	for _, leak := range []string{"s3cr3t", "AKIA-long-key"} {
		if strings.Contains(got, leak) {
			t.Fatalf("%q survived: %s", leak, got)
		}
	}
	if !strings.Contains(got, "${secret.tok}") || !strings.Contains(got, "${secret.key}") || !strings.Contains(got, "ab stays") {
		t.Fatalf("scrubbed: %s", got)
	}
	node := NewRevealed(r.Named())
	if got := node.Scrub("key AKIA-long-key"); got != "key ${secret.key}" {
		t.Fatalf("unnamed: %s", got)
	}
	if got := (&Revealed{}).Scrub("x"); got != "x" {
		t.Fatal(got)
	}
	unnamed := &Revealed{}
	unnamed.Add("", "long-enough")
	if got := unnamed.Scrub("a long-enough b"); got != "a [secret] b" {
		t.Fatalf("unnamed: %s", got)
	}
	var none *Revealed
	if none.Scrub("x") != "x" || len(none.ScrubAll([]string{"y"})) != 1 {
		t.Fatal("a nil Revealed must scrub nothing")
	}
}
