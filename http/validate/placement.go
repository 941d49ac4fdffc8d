package validate

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/framefarm/framefarm/persistence"
)

// MaxNameLength bounds a job's or a batch's name, in characters.
const MaxNameLength = 200

// maxJobLimits bounds the limits one job names.
const maxJobLimits = 16

// placement is where a job renders and what it holds, as its request names them: its pool and
// limits (the job's nested jobs take them too).
type placement struct {
	pool   string
	limits []string
}

// name checks a job's or a batch's name: up to MaxNameLength characters, no control characters.
func (c *checker) name(raw *string, path string) string {
	if raw == nil {
		return ""
	}
	name := strings.TrimSpace(*raw)
	switch {
	case !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }):
		c.add(CodeValidation, path, "must be text without control characters")
	case utf8.RuneCountInString(name) > MaxNameLength:
		c.add(CodeValidation, path, "must be at most %d characters, got %d", MaxNameLength, utf8.RuneCountInString(name))
	}
	return name
}

// placement checks the pool and limits a request names: a pool the team may name, limits the
// farm has.
func (c *checker) placement(pool *string, limits []string, path string) placement {
	var p placement
	if pool != nil {
		p.pool = *pool
		switch policy := c.cat.Policy(); {
		case !ValidTag(p.pool):
			c.add(CodeValidation, at(path, "pool"), "must match ^[a-zA-Z0-9_-]{1,64}$")
		case !policy.AllowsPool(p.pool):
			c.add(CodeValidation, at(path, "pool"), "the team may name only the pools %q (set by the farm's admin), not %q", *policy.Pools, p.pool)
		}
	}
	if len(limits) > maxJobLimits {
		c.add(CodeValidation, at(path, "limits"), "at most %d limits, got %d", maxJobLimits, len(limits))
		return p
	}
	policy := c.cat.Policy()
	for i, name := range limits {
		switch {
		case !policy.AllowsLimit(name):
			c.add(CodeValidation, fmt.Sprintf("%s[%d]", at(path, "limits"), i), "the team may name only the limits %q (set by the farm's admin), not %q", *policy.Limits, name)
		case !c.cat.LimitExists(name):
			c.add(CodeValidation, fmt.Sprintf("%s[%d]", at(path, "limits"), i), "no limit %q: the farm's limits are made by its admin (PUT /api/v2/admin/limits/{name})", name)
		}
	}
	p.limits = persistence.MergeLimits(limits)
	return p
}

// place gives a job its pool and limits: those of p, and the limits its engine implies (each
// must exist).
func (c *checker) place(job *Job, p placement, path string) {
	job.Pool = p.pool
	implied := c.lim.EngineLimits[job.Engine]
	for _, name := range implied {
		if !slices.Contains(p.limits, name) && !c.cat.LimitExists(name) {
			c.add(CodeValidation, path, "no limit %q, which every %q job holds ([engines.%s] limits): the farm's admin makes it (PUT /api/v2/admin/limits/%s)", name, job.Engine, job.Engine, name)
		}
	}
	job.Limits = persistence.MergeLimits(p.limits, implied)
}
