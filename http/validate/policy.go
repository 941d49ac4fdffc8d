package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/persistence"
)

// policyBounds are the values each integer field of a team policy may take.
var policyBounds = map[string][2]int{
	"weight":          {1, 10_000},
	"guaranteedSlots": {0, 100_000},
	"maxRunning":      {0, 1_000_000},
	"maxQueuedJobs":   {0, 100_000_000},
	"maxQueuedChunks": {0, 100_000_000},
	"maxPriority":     {-maxPriority, maxPriority},
}

// maxPolicyList bounds the pools, or the limits, a team's policy names.
const maxPolicyList = 64

// ParsePolicyChange reads a change of a team's policy: an object with any of the policy's
// fields, each a value (set) or null (back to its default: weight 1, nothing guaranteed, no cap,
// any pool, any limit).
func ParsePolicyChange(body []byte) (persistence.PolicyChange, *Error) {
	var change persistence.PolicyChange
	c := &checker{cat: noCatalog{}}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		c.add(CodeValidation, "", "the body must be a JSON object with any of %v", persistence.PolicyFields)
		return change, c.err()
	}
	ints := map[string]**int{"weight": &change.Set.Weight, "guaranteedSlots": &change.Set.GuaranteedSlots,
		"maxRunning": &change.Set.MaxRunning, "maxQueuedJobs": &change.Set.MaxQueuedJobs,
		"maxQueuedChunks": &change.Set.MaxQueuedChunks, "maxPriority": &change.Set.MaxPriority}
	lists := map[string]**[]string{"pools": &change.Set.Pools, "limits": &change.Set.Limits}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		raw := bytes.TrimSpace(fields[name])
		if !slices.Contains(persistence.PolicyFields, name) {
			c.add(CodeValidation, name, "is not a field of a team's policy (%v)", persistence.PolicyFields)
			continue
		}
		if bytes.Equal(raw, []byte("null")) {
			change.Clear = append(change.Clear, name)
			continue
		}
		if list, ok := lists[name]; ok {
			what := strings.TrimSuffix(name, "s") // pool, limit
			var names []string
			if err := json.Unmarshal(raw, &names); err != nil || len(names) > maxPolicyList {
				c.add(CodeValidation, name, "must be a list of at most %d %s names, or null for any %s", maxPolicyList, what, what)
				continue
			}
			for i, p := range names {
				if !ValidTag(p) {
					c.add(CodeValidation, fmt.Sprintf("%s[%d]", name, i), "must match ^[a-zA-Z0-9_-]{1,64}$")
				}
			}
			names = slices.Compact(slices.Sorted(slices.Values(names)))
			*list = &names
			continue
		}
		bounds := policyBounds[name]
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil || v != math.Trunc(v) || v < float64(bounds[0]) || v > float64(bounds[1]) {
			c.add(CodeValidation, name, "must be an integer from %d to %d, or null to remove it", bounds[0], bounds[1])
			continue
		}
		value := int(v)
		*ints[name] = &value
	}
	return change, c.err()
}
