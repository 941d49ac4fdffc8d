package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/framefarm/framefarm/http/api"
)

// teamPolicyFlags are the flags of `framefarm team set`, each the policy field it sets; the
// fields that are lists (pools, limits) take names separated by commas.
var teamPolicyFlags = []struct {
	flag, field, help string
	list              bool
}{
	{"weight", "weight", "the team's share of the running slots against other teams' weights (default 1)", false},
	{"guaranteed-slots", "guaranteedSlots", "slots the team is served before any share", false},
	{"max-running", "maxRunning", "most render slots the team's renders hold at once", false},
	{"max-queued-jobs", "maxQueuedJobs", "most jobs the team may have waiting to render", false},
	{"max-queued-chunks", "maxQueuedChunks", "most chunks of split jobs the team may have waiting", false},
	{"max-priority", "maxPriority", "highest priority the team's jobs may ask", false},
	{"pools", "pools", `comma-separated pools the team's jobs may name and render in ("any": every pool, the default)`, true},
	{"limits", "limits", `comma-separated farm limits the team's jobs may name ("any": every limit, the default)`, true},
}

// teamCommand runs `framefarm team list|create|set`: the farm admin's view and shaping of the
// teams.
func teamCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: framefarm team list|create NAME|set NAME [flags]")
	}
	switch args[0] {
	case "list":
		return teamList(args[1:], stdout)
	case "create":
		return teamCreate(args[1:], stdout)
	case "set":
		return teamSet(args[1:], stdout)
	}
	return fmt.Errorf("unknown team command %q; usage: framefarm team list|create NAME|set NAME [flags]", args[0])
}

// teamCreate makes a team with no token yet, so that its policy can be set first.
func teamCreate(args []string, stdout io.Writer) error {
	fs := commandFlags("team create")
	admin := addAdminFlags(fs)
	operands, err := parseInterspersed(fs, stdout, args)
	if err != nil {
		return err
	}
	if len(operands) != 1 {
		return errors.New("usage: framefarm team create NAME [--url URL] [--admin-token TOKEN]")
	}
	var team api.TeamView
	if _, err := admin.ask(http.MethodPost, "/api/v2/admin/teams", map[string]string{"name": operands[0]}, &team); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "created team %s (%s); framefarm team set %s shapes its share, framefarm token create --team %s gives it a token\n",
		team.Name, team.ID, shellWord(team.Name), shellWord(team.Name))
	return nil
}

func teamList(args []string, stdout io.Writer) error {
	fs := commandFlags("team list")
	admin := addAdminFlags(fs)
	if err := parseFlags(fs, stdout, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errors.New("usage: framefarm team list [--url URL] [--admin-token TOKEN]")
	}
	var teams []api.TeamView
	if _, err := admin.ask(http.MethodGet, "/api/v2/admin/teams", nil, &teams); err != nil {
		return err
	}
	return printTeams(stdout, teams)
}

func printTeams(stdout io.Writer, teams []api.TeamView) error {
	capText := func(v *int) string {
		if v == nil {
			return "-"
		}
		return strconv.Itoa(*v)
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	listText := func(v *[]string) string {
		switch {
		case v == nil:
			return "any"
		case len(*v) == 0:
			return "none"
		}
		return strings.Join(*v, ",")
	}
	fmt.Fprintln(w, "TEAM\tWEIGHT\tGUARANTEED\tMAX RUNNING\tMAX QUEUED JOBS\tMAX QUEUED CHUNKS\tMAX PRIORITY\tPOOLS\tLIMITS\tRUNNING\tSHARE\tQUEUED JOBS\tQUEUED CHUNKS")
	for _, t := range teams {
		p := t.Policy
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%.0f%%\t%d\t%d\n", t.Name, p.Weight, p.GuaranteedSlots, capText(p.MaxRunning),
			capText(p.MaxQueuedJobs), capText(p.MaxQueuedChunks), capText(p.MaxPriority), listText(p.Pools), listText(p.Limits), t.Running, 100*t.Share,
			t.Waiting.Jobs, t.Waiting.Chunks)
	}
	return w.Flush()
}

// teamSet sends the policy fields whose flags are given: a number (or a list) sets the field,
// "none" puts a number back at its default, "any" a list.
func teamSet(args []string, stdout io.Writer) error {
	fs := commandFlags("team set")
	admin := addAdminFlags(fs)
	values := map[string]*string{}
	for _, f := range teamPolicyFlags {
		help := f.help + `; "none" puts back the default`
		if f.list {
			help = f.help + `; "none": no ` + strings.TrimSuffix(f.field, "s")
		}
		values[f.flag] = fs.String(f.flag, "", help)
	}
	operands, err := parseInterspersed(fs, stdout, args)
	if err != nil {
		return err
	}
	if len(operands) != 1 {
		return errors.New("usage: framefarm team set NAME [--weight N] [--guaranteed-slots N] [--max-running N] [--max-queued-jobs N] [--max-queued-chunks N] [--max-priority N] [--pools a,b|any] [--limits a,b|any]")
	}
	change := map[string]any{}
	var bad error
	fs.Visit(func(f *flag.Flag) {
		for _, pf := range teamPolicyFlags {
			if pf.flag != f.Name {
				continue
			}
			v := strings.TrimSpace(*values[f.Name])
			switch {
			case pf.list && v == "any", !pf.list && v == "none":
				change[pf.field] = nil
			case pf.list:
				names := []string{}
				for _, p := range strings.Split(v, ",") {
					if p = strings.TrimSpace(p); p != "" && p != "none" {
						names = append(names, p)
					}
				}
				change[pf.field] = names
			default:
				n, err := strconv.Atoi(v)
				if err != nil {
					bad = fmt.Errorf("--%s %q: a whole number, or none", f.Name, v)
				}
				change[pf.field] = n
			}
		}
	})
	if bad != nil {
		return bad
	}
	if len(change) == 0 {
		return errors.New("nothing to set: give at least one of --weight, --guaranteed-slots, --max-running, --max-queued-jobs, --max-queued-chunks, --max-priority, --pools, --limits")
	}
	var team api.TeamView
	if _, err := admin.ask(http.MethodPatch, "/api/v2/admin/teams/"+url.PathEscape(operands[0]), change, &team); err != nil {
		return err
	}
	return printTeams(stdout, []api.TeamView{team})
}

// shellWord writes s as one word of a POSIX shell's command line.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,:/@%+=-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
