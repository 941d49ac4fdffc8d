package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A render node on a Windows machine (After Effects) runs as a Windows service:
// `framefarm node service install` registers it, `start`, `stop` and `uninstall` control it, and
// the service manager starts `framefarm node service run` with the node's flags. What a service
// decides (which flags it is installed with, how a stop drains the node) is here, apart from
// Windows, so that it is tested on every system; service_windows.go only talks to the service
// manager.

const (
	nodeServiceName        = "framefarm-node"
	nodeServiceDisplayName = "framefarm render node"
	nodeServiceDescription = "Renders the jobs of a framefarm render farm (framefarm node)."
	// envServicePassword holds the password of the account the service runs as (never a flag:
	// the process list shows flags).
	envServicePassword = "FRAMEFARM_SERVICE_PASSWORD"
)

// serviceInstall is a service as `node service install` registers it.
type serviceInstall struct {
	name, displayName, description string
	executable                     string
	// args are what the service manager starts the executable with.
	args []string
	// user is the account it runs as (empty: LocalSystem), with its password.
	user, password string
}

// nodeServiceInstall reads `node service install [--user ACCOUNT] NODE-FLAGS` into the service to
// register: the node's flags are checked as `framefarm node` reads them, and its files must be
// named by absolute paths (a service starts in the system's folder, not this one).
func nodeServiceInstall(executable string, args []string, getenv func(string) string) (serviceInstall, error) {
	s := serviceInstall{name: nodeServiceName, displayName: nodeServiceDisplayName, description: nodeServiceDescription, executable: executable}
	nodeArgs, user, given := takeFlag(args, "user")
	if given && user == "" {
		return s, errors.New("--user needs an account, such as .\\render or DOMAIN\\render")
	}
	s.user = user
	if s.user != "" {
		if s.password = getenv(envServicePassword); s.password == "" {
			return s, fmt.Errorf("the password of %s goes in $%s", s.user, envServicePassword)
		}
	}
	paths := flagValues(nodeArgs, "config", "data-dir", "tls-cert", "tls-key", "tls-ca")
	if paths["data-dir"] == "" {
		return s, errors.New("--data-dir is needed: a service starts in the system's folder, no place for a node's renders")
	}
	for _, name := range slices.Sorted(maps.Keys(paths)) {
		if p := paths[name]; !filepath.IsAbs(p) && !isWindowsAbs(p) {
			return s, fmt.Errorf("--%s %s: a service needs an absolute path (it starts in the system's folder)", name, p)
		}
	}
	if _, err := nodeConfig(nodeArgs, io.Discard); err != nil {
		return s, err
	}
	s.args = append([]string{"node", "service", "run"}, nodeArgs...)
	return s, nil
}

// takeFlag takes the flag name (-name V, --name V or --name=V) out of args and returns the rest
// and its value.
func takeFlag(args []string, name string) (rest []string, value string, given bool) {
	for i := 0; i < len(args); i++ {
		flagName, v, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") || flagName != name {
			rest = append(rest, args[i])
			continue
		}
		if !hasValue && i+1 < len(args) {
			i++
			v = args[i]
		}
		value, given = v, true
	}
	return rest, value, given
}

// flagValues are the values given to the named flags among args, by name.
func flagValues(args []string, names ...string) map[string]string {
	values := map[string]string{}
	for _, name := range names {
		if _, value, given := takeFlag(args, name); given {
			values[name] = value
		}
	}
	return values
}

// isWindowsAbs reports whether p is an absolute Windows path (C:\x, C:/x or \\host\share),
// whatever system reads it.
func isWindowsAbs(p string) bool {
	if strings.HasPrefix(p, `\\`) {
		return true
	}
	return len(p) >= 3 && (p[0] >= 'A' && p[0] <= 'Z' || p[0] >= 'a' && p[0] <= 'z') && p[1] == ':' && (p[2] == '\\' || p[2] == '/')
}

// serviceRequest is what the service manager asks of a running service.
type serviceRequest int

const (
	serviceStop        serviceRequest = iota // an operator stops it
	serviceShutdown                          // the machine shuts down
	serviceInterrogate                       // the manager asks for the state again
)

// serviceState is what a service tells the manager.
type serviceState int

const (
	serviceStartPending serviceState = iota
	serviceRunning
	serviceStopPending
	serviceStopped
)

func (s serviceState) String() string {
	return [...]string{"start pending", "running", "stop pending", "stopped"}[s]
}

// superviseService runs a node under a service manager, as a terminal runs it on a signal: the
// first stop drains it (stop ends: it finishes its renders and takes no new ones), a second
// stop or the machine's shutdown stops it at once (now ends: its renders run again elsewhere).
// It reports each state through report and returns the node's error once it stopped.
func superviseService(requests <-chan serviceRequest, report func(serviceState), run func(stop, now context.Context) error) error {
	report(serviceStartPending)
	stop, drain := context.WithCancel(context.Background())
	now, stopNow := context.WithCancel(context.Background())
	defer drain()
	defer stopNow()
	done := make(chan error, 1)
	go func() { done <- run(stop, now) }()
	state := serviceRunning
	report(state)
	for {
		select {
		case err := <-done:
			report(serviceStopped)
			return err
		case r := <-requests:
			switch {
			case r == serviceInterrogate:
				report(state)
				continue
			case r == serviceShutdown || state == serviceStopPending:
				stopNow()
			}
			drain()
			state = serviceStopPending
			report(state)
		}
	}
}

// serviceManager is the system's service manager: Windows's (service_windows.go), none elsewhere.
type serviceManager interface {
	install(serviceInstall) error
	// control starts, stops or uninstalls the service name.
	control(name, verb string) error
	// run runs the node as the manager started it.
	run(name string, ns nodeSettings, p plugins) error
}

// nodeService is `framefarm node service install|uninstall|start|stop|run`.
func nodeService(args []string, stdout io.Writer, p plugins) error {
	if services == nil {
		return errors.New("framefarm node service registers a Windows service; on Linux the framefarm-node systemd unit of the Debian package runs a node, on macOS the launchd agent of the macOS tarball")
	}
	if len(args) == 0 {
		return errors.New("usage: framefarm node service install [--user ACCOUNT] NODE-FLAGS | uninstall | start | stop")
	}
	switch args[0] {
	case "install":
		executable, err := os.Executable()
		if err != nil {
			return err
		}
		s, err := nodeServiceInstall(executable, args[1:], os.Getenv)
		if err != nil {
			return err
		}
		if err := services.install(s); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "installed the service %s: it starts at boot and again after a failure; framefarm node service start starts it now\n", s.name)
		return nil
	case "uninstall", "start", "stop":
		return services.control(nodeServiceName, args[0])
	case "run":
		ns, err := nodeConfig(args[1:], io.Discard)
		if err != nil {
			return err
		}
		return services.run(nodeServiceName, ns, p)
	}
	return fmt.Errorf("framefarm node service %s: want install, uninstall, start or stop", args[0])
}
