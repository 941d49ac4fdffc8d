package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// service is one long-running part of a process, with the one shape every part has: start returns
// once the part runs (or why it cannot), stop once it has stopped or the shutdown's deadline
// passed. Either may be nil when there is nothing to do.
type service struct {
	name  string
	start func() error
	stop  func(ctx context.Context) error
}

// runServices starts the services in the order listed; then, when ctx ends or a running service
// reports through failed that it stopped by itself, it stops them in the reverse order, all
// within shutdownTimeout. A service that cannot start stops those started before it, in reverse,
// and its error is returned. ready runs once every service has started.
func runServices(ctx context.Context, log *slog.Logger, services []service, failed <-chan error, shutdownTimeout time.Duration, ready func()) error {
	for i, s := range services {
		if s.start == nil {
			continue
		}
		if err := s.start(); err != nil {
			stopServices(log, services[:i], shutdownTimeout)
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	ready()
	var cause error
	select {
	case <-ctx.Done():
	case cause = <-failed:
		log.Error("a service stopped by itself: shutting down", "err", cause)
	}
	log.Info("shutting down")
	stopServices(log, services, shutdownTimeout)
	log.Info("stopped")
	return cause
}

// stopServices stops services in the reverse order, sharing one deadline.
func stopServices(log *slog.Logger, services []service, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for i := len(services) - 1; i >= 0; i-- {
		s := services[i]
		if s.stop == nil {
			continue
		}
		if err := s.stop(ctx); err != nil {
			log.Warn("a service did not stop cleanly", "service", s.name, "err", err)
		}
	}
}

// background is a service that runs run in a goroutine until it is stopped.
func background(name string, run func(ctx context.Context)) service {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	return service{
		name:  name,
		start: func() error { go func() { defer close(done); run(ctx) }(); return nil },
		stop: func(deadline context.Context) error {
			cancel()
			select {
			case <-done:
				return nil
			case <-deadline.Done():
				return errors.New("still running at the shutdown deadline")
			}
		},
	}
}
