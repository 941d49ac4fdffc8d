// Command package writes framefarm's packages into a folder (`make package`: dist/) from the
// binaries and Lottie workers the Makefile built into its build folder:
//
//   - framefarm_VERSION_amd64.deb and _arm64.deb, through nfpm with deploy/nfpm.yaml: the binary,
//     the Lottie worker, the coordinator's and a render node's systemd units, the configuration
//     (a conffile) and the data folder, owned by the framefarm system user;
//   - framefarm-VERSION-windows-amd64.zip: framefarm.exe (its render node installs itself as a
//     Windows service: framefarm node service install) and the documented configuration;
//   - framefarm-VERSION-darwin-arm64.tar.gz: the binary, the configuration and a launchd agent.
//
// Every file goes in with a fixed time and mode, so the same build makes the same archives.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// The build folder holds, from the Makefile: framefarm-GOOS-GOARCH[.exe] and
// lottie-worker-GOARCH (worker.js with the node modules of that architecture).
func main() {
	root := flag.String("root", ".", "the repository's root folder")
	dist := flag.String("dist", "dist", "the folder the packages are written to")
	build := flag.String("build", "dist/build", "the folder of the built binaries and Lottie workers")
	version := flag.String("version", "dev", "the release (a tag such as v1.2.3, or what git describe says)")
	nfpm := flag.String("nfpm", "nfpm", "the nfpm program")
	flag.Parse()
	p := packager{root: *root, dist: *dist, build: *build, version: *version, nfpm: *nfpm}
	if err := p.run(); err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
}

type packager struct {
	root, dist, build, version, nfpm string
}

// debianArchitectures are the Debian packages made, by Go architecture.
var debianArchitectures = []string{"amd64", "arm64"}

func (p packager) run() error {
	example, err := os.ReadFile(filepath.Join(p.root, "config.example.toml"))
	if err != nil {
		return err
	}
	config, err := packagedConfig(example)
	if err != nil {
		return err
	}
	// nfpm reads the files by the paths written into its spec: absolute, wherever it runs.
	build, err := filepath.Abs(p.build)
	if err != nil {
		return err
	}
	stage := filepath.Join(build, "stage")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	configFile := filepath.Join(stage, "config.toml")
	if err := os.WriteFile(configFile, config, 0o644); err != nil {
		return err
	}
	nfpmTemplate, err := os.ReadFile(filepath.Join(p.root, "deploy", "nfpm.yaml"))
	if err != nil {
		return err
	}
	deploy, err := filepath.Abs(filepath.Join(p.root, "deploy"))
	if err != nil {
		return err
	}
	for _, arch := range debianArchitectures {
		values := map[string]string{
			"ARCH": arch, "VERSION": debianVersion(p.version), "DEPLOY": deploy, "CONFIG": configFile,
			"BINARY": filepath.Join(build, "framefarm-linux-"+arch), "LOTTIE_WORKER": filepath.Join(build, "lottie-worker-"+arch),
		}
		spec, err := expand(string(nfpmTemplate), values)
		if err != nil {
			return err
		}
		specFile := filepath.Join(stage, "nfpm-"+arch+".yaml")
		if err := os.WriteFile(specFile, []byte(spec), 0o644); err != nil {
			return err
		}
		cmd := exec.Command(p.nfpm, "package", "--config", specFile, "--packager", "deb", "--target", p.dist)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("nfpm for %s: %w", arch, err)
		}
	}
	release := strings.TrimPrefix(p.version, "v")
	windows := []archiveFile{
		{name: "framefarm.exe", src: filepath.Join(p.build, "framefarm-windows-amd64.exe"), mode: 0o755},
		{name: "config.toml", data: example, mode: 0o644},
		{name: "README.txt", data: []byte(windowsReadme), mode: 0o644},
	}
	if err := writeArchive(filepath.Join(p.dist, "framefarm-"+release+"-windows-amd64.zip"), windows, writeZip); err != nil {
		return err
	}
	plist, err := os.ReadFile(filepath.Join(p.root, "deploy", "launchd", "com.framefarm.node.plist"))
	if err != nil {
		return err
	}
	macos := []archiveFile{
		{name: "framefarm/framefarm", src: filepath.Join(p.build, "framefarm-darwin-arm64"), mode: 0o755},
		{name: "framefarm/config.toml", data: example, mode: 0o644},
		{name: "framefarm/com.framefarm.node.plist", data: plist, mode: 0o644},
		{name: "framefarm/README.txt", data: []byte(macosReadme), mode: 0o644},
	}
	return writeArchive(filepath.Join(p.dist, "framefarm-"+release+"-darwin-arm64.tar.gz"), macos, writeTarGz)
}

// packagedConfig is the documented configuration with the paths a package installs: the data
// folder and the Lottie worker.
func packagedConfig(example []byte) ([]byte, error) {
	out := example
	for _, r := range []struct{ key, value string }{
		{"data_dir", "/var/lib/framefarm"},
		{"lottie_worker", "/usr/lib/framefarm/lottie-worker"},
	} {
		line := regexp.MustCompile(`(?m)^` + r.key + ` = ".*"$`)
		if len(line.FindAll(out, -1)) != 1 {
			return nil, fmt.Errorf("config.example.toml: want one %s line to set for the package", r.key)
		}
		out = line.ReplaceAll(out, []byte(r.key+` = "`+r.value+`"`))
	}
	return out, nil
}

var semver = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-|$)`)

// debianVersion is a release as Debian orders versions: v1.2.3 is 1.2.3, a build after a tag
// (v1.2.3-4-gabcdef) is 1.2.3+4.gabcdef, and a build before any tag 0.0.0+its description.
func debianVersion(release string) string {
	v := strings.TrimPrefix(release, "v")
	if !semver.MatchString(v) {
		v = "0.0.0-" + v
	}
	base, rest, found := strings.Cut(v, "-")
	if !found {
		return base
	}
	return base + "+" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' {
			return r
		}
		return '.'
	}, rest)
}

// expand fills in the ${NAME} values of an nfpm template; a name without a value is an error.
func expand(template string, values map[string]string) (string, error) {
	var missing []string
	out := os.Expand(template, func(name string) string {
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("deploy/nfpm.yaml: no value for %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// archiveFile is one file of a zip or tarball: its bytes, or the file they are read from.
type archiveFile struct {
	name string
	src  string
	data []byte
	mode os.FileMode
}

func (f archiveFile) contents() ([]byte, error) {
	if f.src == "" {
		return f.data, nil
	}
	return os.ReadFile(f.src)
}

// writeArchive writes files into path through write.
func writeArchive(path string, files []archiveFile, write func(io.Writer, []archiveFile) error) error {
	var b bytes.Buffer
	if err := write(&b, files); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

const windowsReadme = `framefarm for Windows: a render node for After Effects machines.

1. Copy framefarm.exe and config.toml to a folder such as C:\framefarm.
2. In config.toml: the [cluster] table (seeds: the coordinator's gossip address, key, and the
   node's certificates from "framefarm cluster tls cert create --node ID"), and the aerender path
   of [engines.ae2025] or [engines.ae2026].
3. In an administrator's prompt, install the node as a service that runs as the user After
   Effects is signed in for (aerender uses that user's licence), with its password in
   FRAMEFARM_SERVICE_PASSWORD:
     framefarm.exe node service install --user .\render --config C:\framefarm\config.toml --data-dir C:\framefarm\node --slots 1
   It starts at boot and again after a failure; "framefarm.exe node service start|stop|uninstall"
   control it, and its log is node.log in the data folder.
`

const macosReadme = `framefarm for macOS: a render node for After Effects machines.

1. Copy framefarm to /usr/local/bin and config.toml to /usr/local/etc/framefarm/config.toml.
2. In config.toml: the [cluster] table (seeds: the coordinator's gossip address, key, and the
   node's certificates from "framefarm cluster tls cert create --node ID"), and the aerender path
   of [engines.ae2025] or [engines.ae2026].
3. As the user After Effects is signed in for (aerender uses that user's licence):
     mkdir -p /usr/local/var/framefarm /usr/local/var/log
     cp com.framefarm.node.plist ~/Library/LaunchAgents/
     launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/com.framefarm.node.plist
   launchd starts it at login and again after a failure; its log is
   /usr/local/var/log/framefarm-node.log.
`
