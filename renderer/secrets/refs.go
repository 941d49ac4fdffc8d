// Package secrets is the vocabulary of a team's secrets in a job: the references a job writes
// (${secret.NAME}) and their substitution, and the hiding of the values they reveal in whatever
// is said of the job (a node's error and log, a webhook's failure). Coordinator and render nodes
// both use it; sealing the values for storage is persistence/secretbox's.
package secrets

import (
	"regexp"
	"slices"
	"strings"
)

// NamePattern is what a secret name may look like.
var NamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// refPattern matches ${secret.NAME} and ${secrets.NAME}.
var refPattern = regexp.MustCompile(`\$\{secrets?\.([A-Za-z0-9_-]{1,128})\}`)

// References lists the secret names s refers to, in order, without repeats.
func References(s string) []string {
	if !strings.Contains(s, "${secret") {
		return nil
	}
	var names []string
	for _, m := range refPattern.FindAllStringSubmatch(s, -1) {
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

// Expand replaces every reference in s by lookup(name); the first lookup error is returned.
func Expand(s string, lookup func(name string) (string, error)) (string, error) {
	if !strings.Contains(s, "${secret") {
		return s, nil
	}
	var firstErr error
	out := refPattern.ReplaceAllStringFunc(s, func(ref string) string {
		v, err := lookup(refPattern.FindStringSubmatch(ref)[1])
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return v
	})
	return out, firstErr
}
