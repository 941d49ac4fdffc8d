package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/framefarm/framefarm/http/api"
)

// startDebug serves Go's profiles (heap, goroutines, CPU, ...) on a loopback address, so an
// operator can see where memory and time go on a live farm: go tool pprof http://ADDR/debug/pprof/heap.
// stop closes the listener.
func startDebug(addr string, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serveAside("debug", "profiling", addr, mux, log)
}

// startMetrics serves /metrics on a listener of its own ([metrics] listen), behind the metrics
// token when one is set.
func startMetrics(addr, token string, metrics http.Handler, log *slog.Logger) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if token != "" && !api.BearerMatches(r.Header.Get("Authorization"), token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "/metrics needs the metrics token as a bearer token", http.StatusUnauthorized)
			return
		}
		metrics.ServeHTTP(w, r)
	})
	return serveAside("metrics", "metrics", addr, mux, log)
}

// serveAside serves h on its own listener beside the API; stop closes it.
func serveAside(name, what, addr string, h http.Handler, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(name+" listener stopped", "err", err)
		}
	}()
	log.Info(what+" on the "+name+" listener", "listen", ln.Addr().String())
	return func() { srv.Close() }, nil
}
