// Command standin plays aerender for tests on machines without After Effects. It checks the
// arguments framefarm passes, records them with the script for the test to read, prints
// aerender's progress lines and writes the output a render would: a QuickTime Animation movie with
// alpha and sound made by ffmpeg, and the saved project when the script saves one.
//
// FRAMEFARM_STANDIN_RECORD names a folder where each run leaves run-<pid>.json;
// FRAMEFARM_STANDIN_MODE=silent hangs after the first progress line, =fail reports an error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/inspect"
)

// Record is what a run leaves for the test.
type Record struct {
	Args   []string          `json:"args"`
	Flags  map[string]string `json:"flags"`
	Script string            `json:"script"`
}

func main() {
	if err := run(); err != nil {
		fmt.Println("aerender ERROR: " + err.Error())
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("aerender", flag.ContinueOnError)
	names := []string{"project", "comp", "output", "RStemplate", "OMtemplate", "r", "v", "s", "e"}
	values := map[string]*string{}
	for _, n := range names {
		values[n] = fs.String(n, "", "")
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	rec := Record{Args: os.Args[1:], Flags: map[string]string{}}
	for n, v := range values {
		if *v != "" {
			rec.Flags[n] = *v
		}
	}
	for _, required := range []string{"project", "comp", "output", "RStemplate", "OMtemplate", "r"} {
		if *values[required] == "" {
			return fmt.Errorf("-%s is missing", required)
		}
	}
	for _, file := range []string{*values["project"], *values["r"]} {
		if _, err := os.Stat(file); err != nil {
			return err
		}
	}
	script, err := os.ReadFile(*values["r"])
	if err != nil {
		return err
	}
	if !strings.Contains(string(script), "var framefarm = (function () {") {
		return fmt.Errorf("the script lacks framefarm's runtime")
	}
	rec.Script = string(script)
	if dir := os.Getenv("FRAMEFARM_STANDIN_RECORD"); dir != "" {
		data, _ := json.Marshal(rec)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("run-%d.json", os.Getpid())), data, 0o600); err != nil {
			return err
		}
	}
	// As After Effects does, the composition's own rate and length decide the frames; one the
	// project does not hold (an essential graphics wrapper the script makes) is 30 frames at 30.
	fps, frames := 30.0, 30
	if comp, ok := composition(*values["project"], *values["comp"]); ok {
		fps, frames = comp.FPS, int(math.Round(comp.Duration*comp.FPS))
	}
	if *values["s"] != "" {
		s, err1 := strconv.Atoi(*values["s"])
		e, err2 := strconv.Atoi(*values["e"])
		if err1 != nil || err2 != nil || e < s {
			return fmt.Errorf("bad frame range -s %q -e %q", *values["s"], *values["e"])
		}
		frames = e - s + 1
	}
	fmt.Println("PROGRESS:  Duration: 0:00:01:00")
	fmt.Printf("PROGRESS:  Frame Rate: %.2f (comp)\n", fps)
	switch os.Getenv("FRAMEFARM_STANDIN_MODE") {
	case "silent":
		fmt.Println("PROGRESS:  0:00:00:00 (1): 0 Seconds")
		time.Sleep(time.Hour)
	case "fail":
		return fmt.Errorf("After Effects error: the composition %q has no layers", *values["comp"])
	}
	if save := savedProject(rec.Script); save != "" {
		if err := copyFile(*values["project"], save); err != nil {
			return err
		}
	}
	for i := 1; i <= frames; i++ {
		fmt.Printf("PROGRESS:  0:00:%02d:%02d (%d): 0 Seconds\n", (i-1)/30, (i-1)%30, i)
	}
	ffmpeg := os.Getenv("FRAMEFARM_STANDIN_FFMPEG")
	if ffmpeg == "" {
		ffmpeg = "ffmpeg"
	}
	// The movie declares the rate as the project holds it, a decimal (29.97, not 30000/1001).
	rate := strconv.FormatFloat(fps, 'f', -1, 64)
	seconds := strconv.FormatFloat(float64(frames)/fps, 'f', 6, 64)
	out, err := exec.Command(ffmpeg, "-hide_banner", "-loglevel", "error", "-y",
		"-f", "lavfi", "-i", "testsrc2=size=640x360:rate="+rate,
		"-f", "lavfi", "-i", "sine=frequency=330:duration="+seconds,
		"-t", seconds, "-c:v", "qtrle", "-pix_fmt", "argb", "-c:a", "pcm_s16le", *values["output"]).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ffmpeg: %v: %s", err, out)
	}
	fmt.Println("PROGRESS:  Total Time Elapsed: 1 Seconds")
	return nil
}

// composition reads the named composition's rate and length from the project, as After
// Effects would.
func composition(project, name string) (renderer.Composition, bool) {
	in, err := inspect.Inspector{}.Inspect(context.Background(), "aep", project)
	if err != nil {
		return renderer.Composition{}, false
	}
	for _, c := range in.Compositions {
		if c.Name == name && c.FPS > 0 {
			return c, true
		}
	}
	return renderer.Composition{}, false
}

var saveCall = regexp.MustCompile(`framefarm\.save\(("(?:[^"\\]|\\.)*")\);`)

// savedProject finds the path the script saves the project to.
func savedProject(script string) string {
	m := saveCall.FindStringSubmatch(script)
	if m == nil {
		return ""
	}
	var p string
	json.Unmarshal([]byte(m[1]), &p)
	return p
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	return out.Close()
}
