//go:build windows

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/mgr"
)

// windowsServices is Windows's service manager.
type windowsServices struct{}

var services serviceManager = windowsServices{}

// install registers the service with the service manager: started at boot (once the
// network is up), and again after a failure.
func (windowsServices) install(in serviceInstall) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("the service manager (run as an administrator): %w", err)
	}
	defer m.Disconnect()
	if s, err := m.OpenService(in.name); err == nil {
		s.Close()
		return fmt.Errorf("the service %s is installed already (framefarm node service uninstall removes it)", in.name)
	}
	s, err := m.CreateService(in.name, in.executable, mgr.Config{
		DisplayName: in.displayName, Description: in.description, StartType: mgr.StartAutomatic, DelayedAutoStart: true,
		ServiceStartName: in.user, Password: in.password,
	}, in.args...)
	if err != nil {
		return err
	}
	defer s.Close()
	restart := []mgr.RecoveryAction{
		{Type: mgr.ServiceRestart, Delay: 10 * time.Second},
		{Type: mgr.ServiceRestart, Delay: 30 * time.Second},
		{Type: mgr.ServiceRestart, Delay: time.Minute},
	}
	if err := s.SetRecoveryActions(restart, uint32((24 * time.Hour).Seconds())); err != nil {
		return err
	}
	return s.SetRecoveryActionsOnNonCrashFailures(true)
}

// control starts, stops or removes the installed service.
func (windowsServices) control(name, verb string) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("the service manager (run as an administrator): %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(name)
	if err != nil {
		return fmt.Errorf("the service %s (framefarm node service install registers it): %w", name, err)
	}
	defer s.Close()
	switch verb {
	case "start":
		return s.Start()
	case "stop":
		_, err := s.Control(svc.Stop)
		return err
	}
	return s.Delete()
}

// run runs the node as the service manager started it, logging to node.log in its data
// folder (a service has no console).
func (windowsServices) run(name string, ns nodeSettings, p plugins) error {
	if err := os.MkdirAll(ns.cfg.Server.DataDir, 0o755); err != nil {
		return err
	}
	logFile, err := os.OpenFile(filepath.Join(ns.cfg.Server.DataDir, "node.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	return svc.Run(name, &nodeServiceHandler{run: func(stop, now context.Context) error {
		return serveNode(stop, func() (context.Context, context.CancelFunc) { return context.WithCancel(now) }, ns, logFile, logFile, p)
	}})
}

// nodeServiceHandler turns the service manager's requests into superviseService's.
type nodeServiceHandler struct {
	run func(stop, now context.Context) error
}

func (h *nodeServiceHandler) Execute(_ []string, changes <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	requests := make(chan serviceRequest)
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		for c := range changes {
			r, ok := map[svc.Cmd]serviceRequest{svc.Stop: serviceStop, svc.Shutdown: serviceShutdown, svc.Interrogate: serviceInterrogate}[c.Cmd]
			if !ok {
				continue
			}
			select {
			case requests <- r:
			case <-stopped:
				return
			}
		}
	}()
	err := superviseService(requests, func(s serviceState) {
		accepts := svc.AcceptStop | svc.AcceptShutdown
		switch s {
		case serviceStartPending:
			status <- svc.Status{State: svc.StartPending}
		case serviceRunning:
			status <- svc.Status{State: svc.Running, Accepts: accepts}
		case serviceStopPending: // draining: renders may take long
			status <- svc.Status{State: svc.StopPending, Accepts: accepts, WaitHint: uint32((30 * time.Minute).Milliseconds())}
		}
	}, h.run)
	if err != nil {
		return true, 1 // a failure: the service manager's recovery starts it again
	}
	return false, 0
}
