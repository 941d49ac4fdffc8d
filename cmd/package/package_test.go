package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// envDist names a folder `make package` wrote (make test passes it); without it the test makes
// the packages itself.
const envDist = "FRAMEFARM_DIST"

// packagesDir returns the folder of the packages under test.
func packagesDir(t *testing.T) string {
	if dir := os.Getenv(envDist); dir != "" {
		return dir
	}
	dir := t.TempDir()
	build := exec.Command("make", "-C", "../..", "package", "DIST="+dir)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make package: %v\n%s", err, out)
	}
	return dir
}

func onlyFile(t *testing.T, pattern string) string {
	t.Helper()
	matches, _ := filepath.Glob(pattern)
	if len(matches) != 1 {
		t.Fatalf("%s: %d files, want one", pattern, len(matches))
	}
	return matches[0]
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestThePackages: what make package writes, read as an operator's machine would read it. The
// Debian packages hold only their paths, with the owners and modes a service needs, and name
// their dependencies; the extracted amd64 binary runs as the coordinator with the packaged
// configuration (its two paths pointed into the extraction), and its embedded node offers the
// Lottie engine once the packaged worker passed its self-test; systemd accepts the units; the
// Windows zip and the macOS tarball hold their binaries and files.
func TestThePackages(t *testing.T) {
	dist := packagesDir(t)
	for _, arch := range debianArchitectures {
		t.Run("deb "+arch, func(t *testing.T) { checkDebian(t, onlyFile(t, filepath.Join(dist, "framefarm_*_"+arch+".deb")), arch) })
	}
	t.Run("coordinator from the package", func(t *testing.T) {
		runPackagedCoordinator(t, onlyFile(t, filepath.Join(dist, "framefarm_*_amd64.deb")))
	})
	t.Run("systemd units", checkUnits)
	t.Run("windows zip", func(t *testing.T) {
		checkWindowsZip(t, onlyFile(t, filepath.Join(dist, "framefarm-*-windows-amd64.zip")))
	})
	t.Run("macos tarball", func(t *testing.T) {
		checkMacTarball(t, onlyFile(t, filepath.Join(dist, "framefarm-*-darwin-arm64.tar.gz")))
	})
}

// packagePaths are where a package may put files: the binary, the Lottie worker (the built-in
// Linux engine runs it), the units, the configuration and the data folder.
var packagePaths = []string{"/usr/bin/framefarm", "/usr/lib/framefarm/lottie-worker/", "/lib/systemd/system/framefarm.service",
	"/lib/systemd/system/framefarm-node.service", "/etc/framefarm/config.toml", "/var/lib/framefarm/"}

func checkDebian(t *testing.T, deb, arch string) {
	fields := run(t, "dpkg-deb", "--field", deb, "Package", "Architecture", "Depends", "Version")
	for _, want := range []string{"Package: framefarm", "Architecture: " + arch, "Depends: ffmpeg, nodejs (>= 18), passwd"} {
		if !strings.Contains(fields, want) {
			t.Errorf("control fields lack %q:\n%s", want, fields)
		}
	}
	if !regexp.MustCompile(`(?m)^Version: [0-9]`).MatchString(fields) {
		t.Errorf("the version does not start with a digit:\n%s", fields)
	}
	if conffiles := run(t, "dpkg-deb", "--info", deb, "conffiles"); strings.TrimSpace(conffiles) != "/etc/framefarm/config.toml" {
		t.Errorf("conffiles %q", conffiles)
	}
	for _, script := range []string{"preinst", "postinst", "prerm", "postrm"} {
		run(t, "dpkg-deb", "--info", deb, script)
	}
	listing := run(t, "dpkg-deb", "--contents", deb)
	seen := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(listing), "\n") {
		f := strings.Fields(line)
		path := strings.TrimPrefix(f[len(f)-1], ".")
		seen[path] = f[0] + " " + f[1]
		if path == "/" || strings.HasSuffix(path, "/") && slices.ContainsFunc(packagePaths, func(p string) bool { return strings.HasPrefix(p, path) }) {
			continue // a folder on the way to one of the paths
		}
		if !slices.ContainsFunc(packagePaths, func(p string) bool { return path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(path, p) }) {
			t.Errorf("the package installs %s, outside its paths", path)
		}
	}
	for path, want := range map[string]string{
		"/usr/bin/framefarm":                                             "-rwxr-xr-x root/root",
		"/etc/framefarm/config.toml":                                     "-rw-r----- root/framefarm",
		"/var/lib/framefarm/":                                            "drwxr-x--- framefarm/framefarm",
		"/usr/lib/framefarm/lottie-worker/worker.js":                     "-rw-r--r-- root/root",
		"/lib/systemd/system/framefarm.service":                          "-rw-r--r-- root/root",
		"/lib/systemd/system/framefarm-node.service":                     "-rw-r--r-- root/root",
		"/usr/lib/framefarm/lottie-worker/node_modules/@napi-rs/canvas/": "drwxr-xr-x root/root",
	} {
		if seen[path] != want {
			t.Errorf("%s is %q, want %q", path, seen[path], want)
		}
	}
	native := map[string]string{"amd64": "canvas-linux-x64-gnu", "arm64": "canvas-linux-arm64-gnu"}[arch]
	if _, ok := seen["/usr/lib/framefarm/lottie-worker/node_modules/@napi-rs/"+native+"/"]; !ok {
		t.Errorf("the Lottie worker lacks its native module for %s (@napi-rs/%s)", arch, native)
	}
}

func runPackagedCoordinator(t *testing.T, deb string) {
	root := t.TempDir()
	run(t, "dpkg-deb", "--extract", deb, root)
	binary := filepath.Join(root, "usr/bin/framefarm")
	if out := run(t, binary, "version"); !strings.HasPrefix(out, "framefarm ") {
		t.Fatalf("version: %s", out)
	}
	packaged, err := os.ReadFile(filepath.Join(root, "etc/framefarm/config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "var/lib/framefarm")
	config := strings.NewReplacer(
		`data_dir = "/var/lib/framefarm"`, fmt.Sprintf("data_dir = %q", data),
		`lottie_worker = "/usr/lib/framefarm/lottie-worker"`, fmt.Sprintf("lottie_worker = %q", filepath.Join(root, "usr/lib/framefarm/lottie-worker")),
	).Replace(string(packaged))
	if config == string(packaged) || strings.Count(config, root) != 2 {
		t.Fatal("the packaged configuration does not set data_dir and lottie_worker to the package's paths")
	}
	configFile := filepath.Join(root, "config.toml")
	if err := os.WriteFile(configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	created := run(t, binary, "token", "create", "--config", configFile, "--team", "packaged")
	lines := strings.Split(strings.TrimSpace(created), "\n")
	token := strings.TrimSpace(lines[len(lines)-1])

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serve := exec.CommandContext(ctx, binary, "serve", "--config", configFile, "--listen", "127.0.0.1:0")
	serve.Cancel = func() error { return serve.Process.Signal(os.Interrupt) }
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	serve.Stderr = &stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		serve.Wait()
		if t.Failed() {
			t.Logf("the coordinator's log:\n%s", stderr.String())
		}
	}()
	listening := make(chan string, 1)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if addr, ok := strings.CutPrefix(scanner.Text(), "framefarm listening on "); ok {
				listening <- addr
			}
		}
	}()
	var addr string
	select {
	case addr = <-listening:
	case <-ctx.Done():
		t.Fatal("the packaged coordinator did not start listening")
	}
	api := &apiClient{t: t, ctx: ctx, base: "http://" + addr, token: token}
	renderThroughThePackage(api)
}

// renderThroughThePackage renders a real Lottie template (a fixture, its licence beside it) on
// the packaged coordinator's embedded node: Node.js runs the packaged worker with its packaged
// native module, and ffmpeg encodes what it draws.
func renderThroughThePackage(api *apiClient) {
	t := api.t
	fixture, err := os.ReadFile("../../renderer/testdata/fixtures/lottie/CenteredText.json")
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	zw := zip.NewWriter(&archive)
	w, _ := zw.Create("CenteredText.json")
	w.Write(fixture)
	zw.Close()
	var tpl struct {
		ID           string   `json:"id"`
		Status       string   `json:"status"`
		Compositions []string `json:"compositions"`
		UploadInfo   struct {
			URL string `json:"url"`
		} `json:"uploadInfo"`
	}
	api.call(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "packaged"}, http.StatusCreated, &tpl)
	api.call(http.MethodPut, tpl.UploadInfo.URL, archive.Bytes(), http.StatusOK, nil)
	api.await("the template is read", func() bool {
		api.call(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &tpl)
		return tpl.Status == "uploaded"
	})
	var job struct {
		ID        string `json:"id"`
		Status    string `json:"status"`
		OutputURL string `json:"outputUrl"`
	}
	api.call(http.MethodPost, "/api/v2/jobs", map[string]any{
		"template": map[string]any{"id": tpl.ID, "composition": tpl.Compositions[0]},
		"assets":   []map[string]any{{"type": "text", "layerName": "Text", "value": "packaged"}},
		"settings": map[string]any{"type": "video", "frames": []int{0, 4}},
	}, http.StatusCreated, &job)
	api.await("the job renders", func() bool {
		api.call(http.MethodGet, "/api/v2/jobs/"+job.ID, nil, http.StatusOK, &job)
		if job.Status == "error" {
			t.Fatalf("the job failed on the packaged node")
		}
		return job.Status == "finished"
	})
	var video []byte
	api.call(http.MethodGet, job.OutputURL, nil, http.StatusOK, &video)
	if len(video) < 8 || string(video[4:8]) != "ftyp" {
		t.Fatalf("the output (%d bytes) is not an MP4 file", len(video))
	}
}

// apiClient calls the packaged coordinator's API.
type apiClient struct {
	t     *testing.T
	ctx   context.Context
	base  string
	token string
}

// call sends body (JSON, or bytes as they are) to path (or a full URL), expects status and
// decodes the answer into out (JSON, or the bytes into a *[]byte).
func (c *apiClient) call(method, path string, body any, status int, out any) {
	c.t.Helper()
	var payload io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		payload = bytes.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		payload = bytes.NewReader(data)
	}
	url := path
	if strings.HasPrefix(path, "/") {
		url = c.base + path
	}
	req, err := http.NewRequestWithContext(c.ctx, method, url, payload)
	if err != nil {
		c.t.Fatal(err)
	}
	if strings.HasPrefix(url, c.base+"/api/") {
		req.Header.Set("Authorization", "Bearer "+c.token)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != status {
		c.t.Fatalf("%s %s: %d (want %d), %v: %s", method, path, resp.StatusCode, status, err, data)
	}
	switch o := out.(type) {
	case nil:
	case *[]byte:
		*o = data
	default:
		if err := json.Unmarshal(data, o); err != nil {
			c.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// await polls done until it holds, within the test's time.
func (c *apiClient) await(what string, done func() bool) {
	c.t.Helper()
	for !done() {
		select {
		case <-c.ctx.Done():
			c.t.Fatalf("%s: not within the time given", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func checkUnits(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed here: the units are checked where systemd is")
	}
	// verify checks that ExecStart's program exists: a copy of each unit runs a stand-in.
	dir := t.TempDir()
	standIn := filepath.Join(dir, "framefarm")
	if err := os.WriteFile(standIn, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, unit := range []string{"framefarm.service", "framefarm-node.service"} {
		src, err := os.ReadFile(filepath.Join("../../deploy/systemd", unit))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, unit)
		if err := os.WriteFile(path, bytes.ReplaceAll(src, []byte("=/usr/bin/framefarm "), []byte("="+standIn+" ")), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
		}
		for _, want := range []string{"User=framefarm", "NoNewPrivileges=yes", "PrivateTmp=yes", "ProtectSystem=strict",
			"ReadWritePaths=/var/lib/framefarm", "Restart=on-failure"} {
			if !strings.Contains(string(src), "\n"+want+"\n") {
				t.Errorf("%s lacks %s", unit, want)
			}
		}
		// A render node of a gpu pool sees the GPUs; the coordinator sees no device.
		devices := "PrivateDevices=yes"
		if unit == "framefarm-node.service" {
			devices = "DeviceAllow=char-drm rw"
		}
		if !strings.Contains(string(src), "\n"+devices+"\n") {
			t.Errorf("%s lacks %s", unit, devices)
		}
		if unit == "framefarm-node.service" && strings.Contains(string(src), "\nPrivateDevices=yes\n") {
			t.Errorf("%s hides the GPUs from its renders (PrivateDevices=yes)", unit)
		}
	}
}

func checkWindowsZip(t *testing.T, path string) {
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	files := map[string][]byte{}
	for _, f := range z.File {
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		files[f.Name], err = io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if exe := files["framefarm.exe"]; !bytes.HasPrefix(exe, []byte("MZ")) {
		t.Error("framefarm.exe is not a Windows program")
	}
	if !bytes.Contains(files["README.txt"], []byte("framefarm.exe node service install")) || !bytes.Contains(files["config.toml"], []byte("[engines.ae2026]")) {
		t.Errorf("the zip holds %v", slices.Sorted(maps.Keys(files)))
	}
}

func checkMacTarball(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	modes := map[string]int64{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
		modes[h.Name] = h.Mode
	}
	// A 64-bit Mach-O program, little-endian.
	if bin := files["framefarm/framefarm"]; !bytes.HasPrefix(bin, []byte{0xcf, 0xfa, 0xed, 0xfe}) || modes["framefarm/framefarm"] != 0o755 {
		t.Error("framefarm/framefarm is not a runnable macOS program")
	}
	var plist struct {
		Dict struct {
			Keys    []string `xml:"key"`
			Strings []string `xml:"string"`
			Array   struct {
				Strings []string `xml:"string"`
			} `xml:"array"`
		} `xml:"dict"`
	}
	if err := xml.Unmarshal(files["framefarm/com.framefarm.node.plist"], &plist); err != nil {
		t.Fatalf("the launchd plist: %v", err)
	}
	if args := plist.Dict.Array.Strings; len(args) < 2 || args[0] != "/usr/local/bin/framefarm" || args[1] != "node" ||
		!slices.Contains(plist.Dict.Keys, "KeepAlive") || plist.Dict.Strings[0] != "com.framefarm.node" {
		t.Errorf("the launchd plist runs %v (keys %v)", args, plist.Dict.Keys)
	}
	if !bytes.Contains(files["framefarm/README.txt"], []byte("launchctl bootstrap")) || len(files["framefarm/config.toml"]) == 0 {
		t.Errorf("the tarball holds %v", slices.Sorted(maps.Keys(files)))
	}
}

// TestDebianVersions: a release as Debian orders it.
func TestDebianVersions(t *testing.T) {
	for release, want := range map[string]string{
		"v1.2.3": "1.2.3", "v1.2.3-4-gabcdef0": "1.2.3+4.gabcdef0", "v1.2.3-4-gabcdef0-dirty": "1.2.3+4.gabcdef0.dirty",
		"9fd88a5": "0.0.0+9fd88a5", "dev": "0.0.0+dev", "": "0.0.0+",
	} {
		if got := debianVersion(release); got != want {
			t.Errorf("debianVersion(%q) = %q, want %q", release, got, want)
		}
	}
}

// TestThePackagedConfiguration: the documented configuration with the package's two paths,
// refused when the example no longer has one line to set.
func TestThePackagedConfiguration(t *testing.T) {
	example, err := os.ReadFile("../../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	config, err := packagedConfig(example)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\ndata_dir = \"/var/lib/framefarm\"\n", "\nlottie_worker = \"/usr/lib/framefarm/lottie-worker\"\n"} {
		if !bytes.Contains(config, []byte(want)) {
			t.Errorf("the packaged configuration lacks %q", want)
		}
	}
	if _, err := packagedConfig([]byte("[server]\nlisten = \"x\"\n")); err == nil {
		t.Error("a configuration without data_dir was packaged")
	}
	if _, err := expand("arch: ${ARCH} ${NOPE}", map[string]string{"ARCH": "amd64"}); err == nil || !strings.Contains(err.Error(), "NOPE") {
		t.Errorf("an nfpm value missing: %v", err)
	}
}
