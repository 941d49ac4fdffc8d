package validate

import (
	"encoding/json"

	"github.com/framefarm/framefarm/persistence"
)

// Retag is a change of a queued or pending job's priority and tags (PATCH /api/v2/jobs/{id}, an
// extension); nil fields are left as they are.
type Retag struct {
	Priority *int
	Tags     *[]string
}

// ParseRetag reads and checks a PATCH /jobs/{id} body: {"priority": 5, "tags": ["a", "b"]}, either
// field optional, tags in any spelling a job's creation takes ([] clears them); the priority
// within what the team's policy allows.
func ParseRetag(body []byte, policy persistence.TeamPolicy) (*Retag, *Error) {
	var raw struct {
		Priority *float64        `json:"priority"`
		Tags     json.RawMessage `json:"tags"`
	}
	if err := decodeStrict(body, &raw, ""); err != nil {
		return nil, err
	}
	c := &checker{cat: policyOnly{policy: policy}}
	out := &Retag{}
	if raw.Priority != nil {
		p := c.priority(raw.Priority, "priority")
		out.Priority = &p
	}
	if len(raw.Tags) > 0 && string(raw.Tags) != "null" {
		tags := c.tags(raw.Tags, "tags")
		if tags == nil {
			tags = []string{}
		}
		out.Tags = &tags
	}
	if out.Priority == nil && out.Tags == nil {
		c.add(CodeValidation, "", "give priority, tags or both")
	}
	if e := c.err(); e != nil {
		return nil, e
	}
	return out, nil
}

// policyOnly knows a team's policy and nothing else.
type policyOnly struct {
	noCatalog
	policy persistence.TeamPolicy
}

func (p policyOnly) Policy() persistence.TeamPolicy { return p.policy }
