package ffmpeg

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// SelfTest encodes three frames of ffmpeg's own test picture to H.264 in dir and reads them
// back: ffmpeg and ffprobe start, encode and write on this machine.
func SelfTest(ctx context.Context, t Tools, dir string) error {
	out := filepath.Join(dir, "ffmpeg-self-test.mp4")
	var log strings.Builder
	args := []string{"-f", "lavfi", "-i", "testsrc=size=64x64:rate=25", "-frames:v", "3", "-c:v", "libx264", "-pix_fmt", "yuv420p", out}
	if err := run(ctx, t, args, 0, &log, func(float64) {}); err != nil {
		return fmt.Errorf("ffmpeg's self-test encode failed: %w: %s", err, strings.TrimSpace(log.String()))
	}
	m, err := Probe(ctx, t, out)
	if err != nil {
		return fmt.Errorf("ffmpeg's self-test output cannot be read back: %w", err)
	}
	if m.Width != 64 || m.Height != 64 {
		return fmt.Errorf("ffmpeg's self-test output is %dx%d, not 64x64", m.Width, m.Height)
	}
	return nil
}

// SelfTest is the ffmpeg engine's: ffmpeg encodes on this machine.
func (j *Joiner) SelfTest(ctx context.Context, dir string) error { return SelfTest(ctx, j.Tools, dir) }
