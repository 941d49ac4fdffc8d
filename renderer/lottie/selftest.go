package lottie

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/framefarm/framefarm/renderer"
)

// selfTestAnimation is the Lottie engine's self-test: three frames of a 64x64 orange square.
const selfTestAnimation = `{"v":"5.7.4","nm":"self-test","fr":25,"ip":0,"op":3,"w":64,"h":64,"assets":[],"layers":[` +
	`{"ty":4,"nm":"Square","ind":1,"ip":0,"op":3,"st":0,"ks":{},"shapes":[` +
	`{"ty":"rc","s":{"a":0,"k":[32,32]},"p":{"a":0,"k":[32,32]},"r":{"a":0,"k":0}},` +
	`{"ty":"fl","c":{"a":0,"k":[1,0.5,0,1]},"o":{"a":0,"k":100}}]}]}`

var _ renderer.SelfTester = (*Renderer)(nil)

// SelfTest renders the engine's own three-frame animation to H.264 in dir, the way a job
// renders: Node.js, the worker, ffmpeg and the disk work on this machine.
func (r *Renderer) SelfTest(ctx context.Context, dir string) error {
	var archive bytes.Buffer
	zw := zip.NewWriter(&archive)
	w, err := zw.Create("data.json")
	if err == nil {
		_, err = w.Write([]byte(selfTestAnimation))
	}
	if err == nil {
		err = zw.Close()
	}
	template := filepath.Join(dir, "lottie-self-test.zip")
	if err == nil {
		err = os.WriteFile(template, archive.Bytes(), 0o600)
	}
	work := filepath.Join(dir, "lottie-self-test")
	if err == nil {
		err = os.Mkdir(work, 0o700)
	}
	if err != nil {
		return fmt.Errorf("the Lottie engine's self-test cannot write its files: %w", err)
	}
	var log bytes.Buffer
	settings := renderer.Settings{Type: renderer.OutputVideo, Codec: "video_h264_vbr_1mbps"}
	task := &renderer.Task{JobID: "self-test", Attempt: 1, WorkDir: work, TemplatePath: template, TemplateType: renderer.TemplateZip,
		Settings: settings, OutputPath: filepath.Join(dir, "lottie-self-test"+renderer.OutputExtension(settings)), Log: &log}
	if err := r.Render(ctx, task, func(float64) {}); err != nil {
		return fmt.Errorf("the Lottie engine's self-test render failed: %w: %s", err, bytes.TrimSpace(log.Bytes()))
	}
	if info, err := os.Stat(task.OutputPath); err != nil || info.Size() == 0 {
		return fmt.Errorf("the Lottie engine's self-test render wrote no output: %v", err)
	}
	return nil
}
