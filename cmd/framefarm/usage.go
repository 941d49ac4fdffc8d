package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/framefarm/framefarm/persistence"
)

// usageCommand runs `framefarm usage`: what each team used of the farm over a time (GET
// /api/v2/admin/usage), for billing or for a word with a team.
func usageCommand(args []string, stdout io.Writer) error {
	fs := commandFlags("usage")
	admin := addAdminFlags(fs)
	team := fs.String("team", "", "one team (its name or id); default every team")
	since := fs.Duration("since", 24*time.Hour, "the time up to now to cover")
	from := fs.String("from", "", "the start of the time to cover (RFC 3339, such as 2026-11-01T00:00:00Z), instead of --since")
	to := fs.String("to", "", "its end (RFC 3339); default now")
	if err := parseFlags(fs, stdout, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errors.New("usage: framefarm usage [--team NAME] [--since 24h | --from DATE [--to DATE]] [--url URL] [--admin-token TOKEN]")
	}
	q := url.Values{}
	if *team != "" {
		q.Set("team", *team)
	}
	switch {
	case *from != "":
		q.Set("from", *from)
	case *to != "":
		return errors.New("--to needs --from")
	default:
		q.Set("from", time.Now().Add(-*since).UTC().Format(time.RFC3339))
	}
	if *to != "" {
		q.Set("to", *to)
	}
	var report struct {
		From  time.Time `json:"from"`
		To    time.Time `json:"to"`
		Teams []struct {
			Team struct {
				Name string `json:"name"`
			} `json:"team"`
			Total   persistence.Usage `json:"total"`
			Engines []struct {
				Engine string `json:"engine"`
				persistence.Usage
			} `json:"engines"`
		} `json:"teams"`
	}
	if _, err := admin.ask(http.MethodGet, "/api/v2/admin/usage?"+q.Encode(), nil, &report); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "from %s to %s\n", report.From.Format(time.RFC3339), report.To.Format(time.RFC3339))
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TEAM\tENGINE\tRENDER TIME\tFRAMES\tFINISHED\tFAILED\tOUTPUT")
	row := func(team, engine string, u persistence.Usage) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\n", team, engine, (time.Duration(u.RenderSeconds) * time.Second).String(),
			u.Frames, u.JobsFinished, u.JobsFailed, byteCount(u.OutputBytes))
	}
	for _, t := range report.Teams {
		row(t.Team.Name, "all", t.Total)
		if len(t.Engines) > 1 {
			for _, e := range t.Engines {
				row("", e.Engine, e.Usage)
			}
		}
	}
	if len(report.Teams) == 0 {
		fmt.Fprintln(w, "(nothing rendered)\t\t\t\t\t\t")
	}
	return w.Flush()
}
