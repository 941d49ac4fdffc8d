package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/persistence/porttest"
)

// TestATrialFarmFromHAInit: framefarm ha init writes a farm of three replicas on this machine,
// and the commands it prints, run as printed, make a farm that works: behind the built-in
// balancer a team's job renders on the render node and its output downloads; the leader is
// killed, and the next job renders too, through the same address.
func TestATrialFarmFromHAInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "farm")
	port := porttest.FreeRange(t, 15)
	out, err := framefarm("ha", "init", "--dir", dir, "--port", strconv.Itoa(port))
	if err != nil {
		t.Fatalf("ha init: %v\n%s", err, out)
	}
	if again, err := framefarm("ha", "init", "--dir", dir); err == nil || !strings.Contains(string(again), "is not empty") {
		t.Fatalf("ha init over a farm: %v\n%s", err, again)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	control := newRenderControl(t)
	processes := map[string]*exec.Cmd{}
	for _, line := range strings.Split(string(out), "\n") {
		command, ok := strings.CutPrefix(line, "  "+self+" ")
		if !ok || strings.HasPrefix(command, "token ") {
			continue
		}
		cmd := exec.Command(self, strings.Fields(command)...)
		cmd.Env = append(os.Environ(), envRun+"=1", envControl+"="+control.url, envJobSignals+"=0")
		startProcess(t, command, cmd)
		processes[command] = cmd
	}
	if len(processes) != 5 {
		t.Fatalf("ha init printed %d commands to start, not 5 (three replicas, the balancer, a node):\n%s", len(processes), out)
	}
	farm := &coordinator{t: t, url: "http://127.0.0.1:" + strconv.Itoa(port)}
	admin := &client{c: farm}
	pollUntil(t, "the first replica's admin token", func() bool {
		tokenOut, err := framefarm("token", "admin", "--config", filepath.Join(dir, "c1.toml"))
		if err != nil {
			return false
		}
		admin.token = strings.TrimSpace(strings.Split(string(tokenOut), "\n")[1])
		return true
	})
	pollUntil(t, "the render node ready behind the balancer", func() bool {
		status, body, _ := admin.call(http.MethodGet, "/api/v2/nodes", nil)
		var nodes []actors.NodeInfo
		return status == http.StatusOK && json.Unmarshal(body, &nodes) == nil && len(nodes) == 1 && nodes[0].State == actors.NodeReady
	})
	var issued struct {
		Token string `json:"token"`
	}
	admin.must(http.MethodPost, "/api/v2/admin/tokens", map[string]string{"team": "acme"}, http.StatusCreated, &issued)
	acme := &client{c: farm, token: issued.Token}
	tplID := uploadAndWait(t, acme)
	render := func(what string) {
		// During a failover the farm answers 503 (the write was not made): send it again.
		var made created
		pollUntil(t, what+" created", func() bool {
			status, body, _ := acme.call(http.MethodPost, "/api/v2/jobs", renderJob(tplID))
			if status != http.StatusServiceUnavailable && status != http.StatusCreated {
				t.Fatalf("%s: POST /jobs answered %d: %s", what, status, body)
			}
			return status == http.StatusCreated && json.Unmarshal(body, &made) == nil
		})
		control.next(t).answer(renderReply{Result: "finish"})
		pollUntil(t, what, func() bool { return acme.job(made.ID).Status == "finished" })
		if status, data := get(t, acme.job(made.ID).OutputURL); status != http.StatusOK || len(data) == 0 {
			t.Fatalf("%s: its output answered %d, %d bytes", what, status, len(data))
		}
	}
	render("a job through the trial farm's address")

	var cluster struct {
		Leader string `json:"leader"`
	}
	admin.must(http.MethodGet, "/api/v2/admin/cluster", nil, http.StatusOK, &cluster)
	leader := processes["serve --config "+filepath.Join(dir, cluster.Leader+".toml")]
	if leader == nil {
		t.Fatalf("no process runs the leader %q", cluster.Leader)
	}
	leader.Process.Signal(syscall.SIGKILL)
	render("a job after the leader was killed")
}

// uploadAndWait uploads the test template and waits, polling, until it is uploaded.
func uploadAndWait(t *testing.T, cl *client) string {
	var tpl templateAnswer
	cl.must(http.MethodPost, "/api/v2/templates", map[string]string{"type": "zip", "displayName": "Test"}, http.StatusCreated, &tpl)
	cl.put(tpl.UploadInfo.URL, templateZip(t, inspection()), http.StatusOK)
	pollUntil(t, "the template uploaded", func() bool {
		cl.must(http.MethodGet, "/api/v2/templates/"+tpl.ID, nil, http.StatusOK, &tpl)
		return tpl.Status == "uploaded"
	})
	return tpl.ID
}
