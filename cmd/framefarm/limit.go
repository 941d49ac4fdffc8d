package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
)

// limitView is a limit as GET /api/v2/admin/limits shows it.
type limitView struct {
	Name   string `json:"name"`
	Count  int    `json:"count"`
	InUse  int    `json:"inUse"`
	HeldBy []struct {
		Job   string `json:"job"`
		Chunk *int   `json:"chunk"`
		Name  string `json:"name"`
	} `json:"heldBy"`
}

const limitUsage = "usage: framefarm limit list | set NAME COUNT | delete NAME [--url URL] [--admin-token TOKEN]"

// limitCommand runs `framefarm limit list|set|delete`: the farm's limits (licence counts) and
// the renders holding them.
func limitCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(limitUsage)
	}
	verb := args[0]
	fs := commandFlags("limit " + verb)
	admin := addAdminFlags(fs)
	operands, err := parseInterspersed(fs, stdout, args[1:])
	if err != nil {
		return err
	}
	var limits []limitView
	switch {
	case verb == "list" && len(operands) == 0:
		if _, err := admin.ask(http.MethodGet, "/api/v2/admin/limits", nil, &limits); err != nil {
			return err
		}
	case verb == "set" && len(operands) == 2:
		count, err := strconv.Atoi(operands[1])
		if err != nil || count < 0 {
			return fmt.Errorf("COUNT %q: a whole number, the renders that may hold the limit at once", operands[1])
		}
		var l limitView
		if _, err := admin.ask(http.MethodPut, "/api/v2/admin/limits/"+url.PathEscape(operands[0]), map[string]int{"count": count}, &l); err != nil {
			return err
		}
		limits = append(limits, l)
	case verb == "delete" && len(operands) == 1:
		if _, err := admin.ask(http.MethodDelete, "/api/v2/admin/limits/"+url.PathEscape(operands[0]), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted limit %s; jobs naming it wait until it is made again\n", operands[0])
		return nil
	default:
		return errors.New(limitUsage)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "LIMIT\tCOUNT\tIN USE\tHELD BY")
	for _, l := range limits {
		held := make([]string, 0, len(l.HeldBy))
		for _, h := range l.HeldBy {
			text := h.Job
			if h.Chunk != nil {
				text += fmt.Sprintf(" (chunk %d)", *h.Chunk)
			}
			if h.Name != "" {
				text += fmt.Sprintf(" %q", h.Name)
			}
			held = append(held, text)
		}
		if len(held) == 0 {
			held = append(held, "-")
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", l.Name, l.Count, l.InUse, strings.Join(held, ", "))
	}
	return w.Flush()
}
