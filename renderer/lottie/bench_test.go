package lottie

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/framefarm/framefarm/renderer"
)

// BenchmarkKenburns1080p renders the whole synthetic fixture (1920x1080, 30 fps, 300 frames, an
// image with a slow zoom, a text fading in) to an H.264 MP4 and reports frames per second end to
// end: template extraction, injection, Skottie, the pipe and ffmpeg. first-frame-ms is the time
// from the call to the first frame drawn, warm (mostly ffmpeg starting to read the pipe).
func BenchmarkKenburns1080p(b *testing.B) {
	for _, quality := range []string{"", "draft"} {
		name := "final"
		if quality != "" {
			name = quality
		}
		b.Run(name, func(b *testing.B) {
			r, _ := newTestRenderer(b)
			template := zipDir(b, filepath.Join(fixtures, "synthetic"))
			var frames int
			var elapsed, firstFrame time.Duration
			for b.Loop() {
				task := newTask(b, template, renderer.Settings{Type: renderer.OutputVideo, Quality: quality})
				started := time.Now()
				var first time.Duration
				err := r.Render(context.Background(), task, func(float64) {
					if first == 0 {
						first = time.Since(started)
					}
				})
				if err != nil {
					b.Fatalf("%v\n%s", err, task.Log)
				}
				elapsed += time.Since(started)
				firstFrame += first
				frames += 300
			}
			clips := float64(frames / 300)
			b.ReportMetric(float64(frames)/elapsed.Seconds(), "frames/s")
			b.ReportMetric(elapsed.Seconds()/clips, "s/10s-clip")
			b.ReportMetric(float64(firstFrame.Milliseconds())/clips, "first-frame-ms")
		})
	}
}
