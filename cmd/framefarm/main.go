// Command framefarm is the render farm coordinator: `framefarm serve` runs it, `framefarm node`
// runs a render node that joins it, `framefarm cluster tls` makes the farm's certificates,
// `framefarm token create|list|revoke|admin` manages API tokens, `framefarm team list|set` shows
// and shapes the teams sharing the farm, `framefarm objects copy --to s3` moves
// a farm's files into a bucket, `framefarm ha status` shows a coordinator's replicas,
// `framefarm version` tells the build.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/inspect"
)

// version, commit and date are set at build time (-ldflags "-X main.version=... -X
// main.commit=... -X main.date=..."); a build without them reads its commit and date from the
// build information Go stamps.
var version, commit, date = "dev", "", ""

// plugins are the engines and the template inspector a coordinator runs with. watch, when set,
// subscribes to what the actors do after the metrics (tests use it to be told of transitions
// instead of polling); store, when set, wraps the store the actors write to (tests use it to
// stop a write on its way).
type plugins struct {
	engines   func(EnginesConfig, *slog.Logger) (engines []renderer.Renderer, stop func())
	inspector renderer.Inspector
	watch     func(*actors.Events)
	store     func(actors.Store) actors.Store
}

func productionPlugins() plugins {
	return plugins{engines: startEngines, inspector: inspect.Inspector{}}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, productionPlugins()))
}

const usage = `usage:
  framefarm serve [--config FILE] [--data-dir DIR] [--listen HOST:PORT] [--public-url URL]
                  [--local-slots N] [--allow-private-urls]
  framefarm node --join HOST:PORT[,HOST:PORT] [--config FILE] [--id ID] [--engines lottie,ae2026]
                 [--slots N] [--bind HOST:PORT] [--advertise HOST:PORT] [--actors-bind HOST:PORT]
                 [--actors-advertise HOST:PORT] [--data-dir DIR] [--pools gpu,4k] [--require-tags a,b]
                 [--label K=V] [--key KEY] [--tls-cert FILE --tls-key FILE --tls-ca FILE | --insecure]
  framefarm node list|drain ID|clear ID|forget ID [--url URL] [--admin-token TOKEN] [--data-dir DIR]
  framefarm cluster tls ca create [--dir DIR] [--days N]
  framefarm cluster tls cert create (--coordinator | --node ID | --any-node) [--dir DIR] [--days N]
  framefarm token create --team NAME [--role viewer|submitter|manager] [--expires 720h] [--data-dir DIR] [--config FILE]
  framefarm token list [--data-dir DIR] [--config FILE]
  framefarm token revoke [--data-dir DIR] [--config FILE] ID
  framefarm token admin [--data-dir DIR] [--config FILE]
  framefarm team list [--url URL] [--admin-token TOKEN] [--data-dir DIR]
  framefarm team create NAME [--url URL] [--admin-token TOKEN]
  framefarm team set NAME [--weight N] [--guaranteed-slots N] [--max-running N] [--max-queued-jobs N]
                 [--max-queued-chunks N] [--max-priority N] [--pools a,b|any] [--limits a,b|any]
                 [--url URL] [--admin-token TOKEN]
  framefarm limit list | set NAME COUNT | delete NAME [--url URL] [--admin-token TOKEN]
  framefarm usage [--team NAME] [--since 24h | --from DATE [--to DATE]] [--url URL] [--admin-token TOKEN]
  framefarm ha status|join --id ID --address HOST:PORT|remove ID [--url URL] [--admin-token TOKEN] [--data-dir DIR]
  framefarm ha recover --config FILE [--data-dir DIR]
  framefarm ha init [--dir DIR] [--replicas 3|5] [--host IP] [--port PORT]
  framefarm ha balance --listen HOST:PORT --to HOST:PORT,HOST:PORT,... [--check-interval 1s]
  framefarm backup --out FILE [--url URL] [--admin-token TOKEN] [--data-dir DIR]
  framefarm restore --data-dir DIR FILE
  framefarm objects copy --to s3 [--config FILE] [--data-dir DIR] [--parallel N] [--progress 5s]
  framefarm version
  framefarm COMMAND --help
`

// run is the whole program; main only adds the process around it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, p plugins) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	// `token --help`, `ha -h`: commands whose first word is a verb answer help before it.
	if len(args) >= 2 && isHelpFlag(args[1]) && slices.Contains([]string{"token", "cluster", "ha", "objects", "team", "limit"}, args[0]) {
		fmt.Fprintf(stdout, "usage:\n%s", commandUsage(args[0]))
		return 0
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stdout, stderr, p)
	case "node":
		err = nodeCommand(ctx, args[1:], stdout, stderr, p)
	case "cluster":
		err = clusterCommand(args[1:], stdout, stderr)
	case "token":
		if len(args) < 2 {
			fmt.Fprint(stderr, usage)
			return 2
		}
		err = tokenCommand(args[1:], stdout, stderr)
	case "objects":
		err = objectsCommand(ctx, args[1:], stdout, stderr)
	case "ha":
		err = haCommand(ctx, args[1:], stdout, stderr)
	case "backup":
		err = backupCommand(args[1:], stdout)
	case "restore":
		err = restoreCommand(args[1:], stdout)
	case "team":
		err = teamCommand(args[1:], stdout)
	case "limit":
		err = limitCommand(args[1:], stdout)
	case "usage":
		err = usageCommand(args[1:], stdout)
	case "version", "--version", "-version":
		info, _ := debug.ReadBuildInfo()
		fmt.Fprintln(stdout, describeBuild(info))
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "framefarm:", err)
		if errors.As(err, new(flagError)) {
			fmt.Fprintf(stderr, "framefarm %s --help lists its flags\n", args[0])
		}
		return 1
	}
	return 0
}

func isHelpFlag(arg string) bool { return arg == "-h" || arg == "-help" || arg == "--help" }

// commandUsage is the lines of usage that show command, the first word of a command's name.
func commandUsage(command string) string {
	first, _, _ := strings.Cut(command, " ")
	var b strings.Builder
	showing := false
	for _, line := range strings.SplitAfter(usage, "\n") {
		if rest, ok := strings.CutPrefix(line, "  framefarm "); ok {
			showing = strings.HasPrefix(rest, first+" ") || rest == first+"\n"
		}
		if showing && line != "" && line != "usage:\n" {
			b.WriteString(line)
		}
	}
	return b.String()
}

// commandFlags makes a command's flag set. It prints nothing itself: run prints a parse error
// once, and parseFlags prints the help that -h or --help asks for.
func commandFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// flagError is a command line the flag package refused.
type flagError struct{ error }

func (e flagError) Unwrap() error { return e.error }

// parseFlags parses a command's flags; on -h or --help it prints the command's usage and flags to
// stdout and returns flag.ErrHelp, which run turns into exit status 0.
func parseFlags(fs *flag.FlagSet, stdout io.Writer, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, "usage:\n%s\nflags:\n", commandUsage(fs.Name()))
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		return err
	}
	if err != nil {
		return flagError{err}
	}
	return nil
}

// parseInterspersed parses flags that may come before, between or after a command's operands
// (framefarm team set NAME --weight 2), and returns the operands.
func parseInterspersed(fs *flag.FlagSet, stdout io.Writer, args []string) ([]string, error) {
	var operands []string
	for {
		if err := parseFlags(fs, stdout, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return operands, nil
		}
		operands = append(operands, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// describeBuild says which build this is: its version, commit and date (info: what Go stamped,
// nil when nothing).
func describeBuild(info *debug.BuildInfo) string {
	rev, at, modified := commit, date, false
	if info != nil {
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && rev == "":
				rev = s.Value
			case s.Key == "vcs.time" && at == "":
				at = s.Value
			case s.Key == "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if rev == "" {
		return fmt.Sprintf("framefarm %s (commit not known)", versionOf(info))
	}
	if modified && commit == "" {
		rev += ", with changes not committed"
	}
	return fmt.Sprintf("framefarm %s (commit %s, %s)", versionOf(info), rev, cmp.Or(at, "date not known"))
}

// buildVersion is this build's version: its release's, else "dev" and the commit Go stamped.
func buildVersion() string {
	info, _ := debug.ReadBuildInfo()
	return versionOf(info)
}

func versionOf(info *debug.BuildInfo) string {
	if version != "dev" || info == nil {
		return version
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "dev-" + s.Value[:12]
		}
	}
	return version
}

func newLogger(w io.Writer, cfg LogConfig) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil {
		return nil, fmt.Errorf("log.level %q must be debug, info, warn or error", cfg.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
