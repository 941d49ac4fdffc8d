// Package aerender renders After Effects templates (aep, aepx, zip, mogrt) through Adobe's
// command-line renderer, aerender, on nodes where After Effects is installed (Windows or macOS).
// The job's assets are applied by a generated ExtendScript file aerender runs before rendering;
// aerender writes a lossless intermediate that ffmpeg encodes as the job's settings ask.
package aerender

import (
	"archive/zip"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/ffmpeg"
	"github.com/framefarm/framefarm/renderer/inspect"
	"github.com/framefarm/framefarm/renderer/workfiles"
)

// Config says where one After Effects version is and how to drive it.
type Config struct {
	// Engine is the engine name this installation serves: ae2025 or ae2026.
	Engine string
	// Aerender is the path of the aerender program.
	Aerender string
	// OutputModule is the output module template of the intermediate render, and Extension
	// its file extension; the intermediate must keep alpha and sound for every output to be
	// made from it.
	OutputModule string
	Extension    string
	// RenderSettings and DraftSettings are render settings templates for final and draft
	// (quality: draft, preview: true) renders.
	RenderSettings string
	DraftSettings  string
	// FontsDir is where fonts are installed for the user running After Effects.
	FontsDir string
	Tools    ffmpeg.Tools
}

// Defaults of the templates: those After Effects installs.
const (
	DefaultOutputModule   = "Lossless with Alpha"
	DefaultExtension      = ".mov"
	DefaultRenderSettings = "Best Settings"
	DefaultDraftSettings  = "Draft Settings"
)

// Renderer drives one After Effects installation.
type Renderer struct{ cfg Config }

var _ renderer.Renderer = (*Renderer)(nil)

// New checks that aerender is there.
func New(cfg Config) (*Renderer, error) {
	if cfg.Engine != renderer.EngineAE2025 && cfg.Engine != renderer.EngineAE2026 {
		return nil, fmt.Errorf("%q is not an After Effects engine", cfg.Engine)
	}
	info, err := os.Stat(cfg.Aerender)
	if err != nil {
		return nil, fmt.Errorf("aerender for %s: %w", cfg.Engine, err)
	}
	if info.IsDir() {
		return nil, fmt.Errorf("aerender for %s: %s is a folder, not the aerender program", cfg.Engine, cfg.Aerender)
	}
	cfg.OutputModule = or(cfg.OutputModule, DefaultOutputModule)
	cfg.Extension = or(cfg.Extension, DefaultExtension)
	cfg.RenderSettings = or(cfg.RenderSettings, DefaultRenderSettings)
	cfg.DraftSettings = or(cfg.DraftSettings, DefaultDraftSettings)
	return &Renderer{cfg: cfg}, nil
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (r *Renderer) Engine() string { return r.cfg.Engine }

// Render unpacks the template, stages the assets and fonts, has aerender apply the assets and
// render, then encodes the result into task.OutputPath.
func (r *Renderer) Render(ctx context.Context, task *renderer.Task, report func(float64)) error {
	// After Effects resolves every path the script and the arguments give on its own: absolute.
	work, err := filepath.Abs(task.WorkDir)
	if err != nil {
		return err
	}
	projectDir := filepath.Join(work, "project")
	if err := os.MkdirAll(projectDir, 0o700); err != nil {
		return err
	}
	project, kind, err := inspect.ExtractProject(task.TemplatePath, projectDir, inspect.Limits{})
	if err != nil {
		return err
	}
	if kind != inspect.ProjectAfterEffects {
		return errors.New("the template is a Lottie export; After Effects renders .aep, .aepx and mogrt templates")
	}
	releaseFonts, err := r.installFonts(ctx, projectDir, task)
	if err != nil {
		return err
	}
	defer releaseFonts()
	assets, err := stageAssets(projectDir, task.Assets)
	if err != nil {
		return err
	}
	p := plan{Composition: task.Composition, Assets: assets, FailureFile: filepath.Join(work, "script-failure.txt")}
	comp := task.Composition
	for _, a := range assets {
		if a.Type == renderer.AssetEssential && (a.Composition == "" || a.Composition == task.Composition) {
			p.EssentialComp = "framefarm essential " + task.Composition
			comp = p.EssentialComp
		}
	}
	aepOutput := task.Settings.Type == renderer.OutputAEP
	if aepOutput {
		p.SaveTo = filepath.Join(projectDir, strings.TrimSuffix(filepath.Base(project), filepath.Ext(project))+"-framefarm.aep")
	}
	jsx, err := script(p)
	if err != nil {
		return err
	}
	scriptFile := filepath.Join(work, "framefarm.jsx")
	if err := os.WriteFile(scriptFile, jsx, 0o600); err != nil {
		return err
	}
	intermediate := filepath.Join(work, "render"+r.cfg.Extension)
	args := []string{"-project", project, "-comp", comp, "-output", intermediate,
		"-RStemplate", r.renderSettings(task), "-OMtemplate", r.cfg.OutputModule, "-r", scriptFile, "-v", "ERRORS_AND_PROGRESS"}
	switch f := task.Settings.Frames; {
	case aepOutput:
		// The project is what is wanted; one frame proves it opens and renders.
		args = append(args, "-s", "0", "-e", "0")
	case f != nil:
		args = append(args, "-s", strconv.Itoa(f.Start), "-e", strconv.Itoa(f.End))
	}
	runErr := r.run(ctx, args, task.Log, report)
	// A failing asset is the story even when aerender went on and failed later for it.
	if failure, err := os.ReadFile(p.FailureFile); err == nil {
		return fmt.Errorf("applying the assets failed: %s", strings.TrimSpace(string(failure)))
	}
	if runErr != nil {
		return runErr
	}
	if aepOutput {
		if _, err := os.Stat(p.SaveTo); err != nil {
			return errors.New("After Effects did not save the project")
		}
		return workfiles.Zip(projectDir, task.OutputPath, zip.Deflate)
	}
	if _, err := os.Stat(intermediate); err != nil {
		return errors.New("aerender finished without writing its output")
	}
	fmt.Fprintf(task.Log, "encoding %s\n", renderer.OutputExtension(task.Settings))
	return ffmpeg.Transcode(ctx, r.cfg.Tools, intermediate, task.Settings, false, task.OutputPath, task.Log)
}

func (r *Renderer) renderSettings(task *renderer.Task) string {
	if task.Preview || task.Settings.Quality == "draft" {
		return r.cfg.DraftSettings
	}
	return r.cfg.RenderSettings
}

// stageAssets moves the job's files into the project folder, so a collected project (aep output)
// carries them, and returns the assets pointing there.
func stageAssets(projectDir string, assets []renderer.Asset) ([]renderer.Asset, error) {
	dir := filepath.Join(projectDir, "framefarm-assets")
	out := make([]renderer.Asset, len(assets))
	for i, a := range assets {
		out[i] = a
		if a.LocalPath == "" {
			continue
		}
		name := filepath.Base(a.LocalPath)
		target := filepath.Join(dir, fmt.Sprintf("%d-%s", i, name))
		if a.Type == renderer.AssetStatic {
			// Static files go next to the project, under the name the job gave.
			target = filepath.Join(projectDir, filepath.Base(or(a.Name, name)))
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return nil, err
		}
		if err := os.Rename(a.LocalPath, target); err != nil {
			return nil, fmt.Errorf("assets[%d] cannot be staged: %w", i, err)
		}
		out[i].LocalPath = target
	}
	return out, nil
}

// installFonts installs the job's team fonts and the template's bundled ones (team fonts win a
// family both have) for this render; release removes them after it.
func (r *Renderer) installFonts(ctx context.Context, projectDir string, task *renderer.Task) (release func(), err error) {
	fonts := append([]renderer.FontFile(nil), task.Fonts...)
	for _, p := range workfiles.Find(projectDir, ".ttf", ".otf", ".ttc") {
		fonts = append(fonts, renderer.FontFile{FileName: filepath.Base(p), Path: p})
	}
	if len(fonts) == 0 {
		return func() {}, nil
	}
	if r.cfg.FontsDir == "" {
		fmt.Fprintf(task.Log, "%d fonts not installed: no font folder is configured\n", len(fonts))
		return func() {}, nil
	}
	return fontBookFor(r.cfg.FontsDir).install(ctx, fonts, task.Log)
}

// run runs aerender, forwarding its output to the log and its progress to report. Every line
// counts as a sign of life: the node stops a render whose engine stays silent too long.
func (r *Renderer) run(ctx context.Context, args []string, log io.Writer, report func(float64)) error {
	cmd := exec.CommandContext(ctx, r.cfg.Aerender, args...)
	cmd.WaitDelay = 10 * time.Second
	killTree(cmd)
	// One pipe for both streams: their lines reach the log in order, from this goroutine only.
	output, outputWriter, err := os.Pipe()
	if err != nil {
		return err
	}
	defer output.Close()
	cmd.Stdout, cmd.Stderr = outputWriter, outputWriter
	fmt.Fprintf(log, "aerender %s\n", strings.Join(args, " "))
	err = cmd.Start()
	outputWriter.Close()
	if err != nil {
		return fmt.Errorf("%w: aerender cannot start: %w", renderer.ErrNodeFault, err)
	}
	var progress progressParser
	scanner := bufio.NewScanner(output)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		fmt.Fprintln(log, line)
		report(progress.line(line))
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(progress.errors) > 0 {
		return fmt.Errorf("aerender: %s", strings.Join(progress.errors, "; "))
	}
	if err != nil {
		// It stopped without naming an error of the project: the engine itself crashed.
		return fmt.Errorf("%w: aerender stopped without naming an error: %w", renderer.ErrNodeFault, err)
	}
	return nil
}

// DefaultFontsDir is the folder of fonts installed for the current user, where After Effects
// looks: ~/Library/Fonts on macOS, %LOCALAPPDATA%\Microsoft\Windows\Fonts on Windows,
// ~/.local/share/fonts elsewhere.
func DefaultFontsDir() string {
	switch goruntime.GOOS {
	case "windows":
		return filepath.Join(os.Getenv("LOCALAPPDATA"), "Microsoft", "Windows", "Fonts")
	case "darwin":
		home, _ := os.UserHomeDir()
		return filepath.Join(home, "Library", "Fonts")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "fonts")
}

var _ renderer.SelfTester = (*Renderer)(nil)

// SelfTest checks what this machine gives the engine: aerender is still there, and ffmpeg,
// which makes every output from After Effects' render, encodes. (aerender itself renders only a
// project, which the farm has none of its own to give it.)
func (r *Renderer) SelfTest(ctx context.Context, dir string) error {
	if _, err := os.Stat(r.cfg.Aerender); err != nil {
		return fmt.Errorf("aerender for %s is gone: %w", r.cfg.Engine, err)
	}
	return ffmpeg.SelfTest(ctx, r.cfg.Tools, dir)
}
