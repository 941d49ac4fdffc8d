package replicas

import (
	"context"
	"io"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// newRaftLogger is an hclog logger for raft that writes through the coordinator's slog logger.
func newRaftLogger(log *slog.Logger) hclog.Logger {
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Output: io.Discard, Level: hclog.Info})
	l.RegisterSink(slogSink{log})
	return l
}

type slogSink struct{ log *slog.Logger }

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	l := slog.LevelInfo
	switch {
	case level < hclog.Info:
		return // raft's debug lines would drown the coordinator's
	case level >= hclog.Warn:
		// raft calls a replica out of reach an error, every few milliseconds while it is down:
		// a warning here; what stops a replica is logged by the coordinator as an error.
		l = slog.LevelWarn
	}
	s.log.Log(context.Background(), l, msg, append(args, "from", name)...)
}
