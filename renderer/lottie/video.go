package lottie

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/framefarm/framefarm/renderer/ffmpeg"
)

// maxVideoFrames caps the frames one placed video contributes (ten minutes at 30 fps).
const maxVideoFrames = 18000

// isVideo tells a nested job's video output from its still image, by extension.
func isVideo(file string) bool {
	switch strings.ToLower(filepath.Ext(file)) {
	case ".mp4", ".mov", ".m4v", ".webm", ".mkv":
		return true
	}
	return false
}

// placeVideo shows a video in an image layer. Skottie has no video footage, so the layer becomes
// a precomp holding one single-frame image layer per video frame, extracted by ffmpeg at the
// animation's frame rate and the layer's size. As in After Effects, the video's first frame falls
// on the layer's start time; its sound is muxed in after the render.
func (d *document) placeVideo(ctx context.Context, l obj, file string) error {
	old, err := d.imageAsset(l)
	if err != nil {
		return fmt.Errorf("%w; a video replaces an image layer", err)
	}
	w, h := intOf(old["w"]), intOf(old["h"])
	if w < 1 || h < 1 {
		return fmt.Errorf("its image asset has no size")
	}
	media, err := ffmpeg.Probe(ctx, d.tools, file)
	if err != nil {
		return err
	}
	ip, _ := number(l["ip"])
	op, _ := number(l["op"])
	st, _ := number(l["st"])
	// Video frame k shows at animation frame st+k; the layer shows frames ip..op.
	first := max(0, int(math.Ceil(ip-st)))
	last := min(int(math.Ceil(op-st)), int(math.Floor(media.Duration*d.rate.FPS()+0.5)))
	count := last - first
	if count < 1 {
		return fmt.Errorf("the video (%.2fs) ends before the layer starts", media.Duration)
	}
	if count > maxVideoFrames {
		return fmt.Errorf("the video would place %d frames; at most %d", count, maxVideoFrames)
	}
	rel, err := d.stagingDir()
	if err != nil {
		return err
	}
	ext := ".jpg"
	quality := []string{"-q:v", "3"}
	if media.Alpha {
		ext, quality = ".png", nil
	}
	args := append([]string{"-hide_banner", "-nostats", "-loglevel", "error", "-y",
		"-ss", strconv.FormatFloat(d.rate.Seconds(first), 'f', 6, 64), "-protocol_whitelist", "file", "-i", file,
		"-vf", fmt.Sprintf("fps=%s,scale=%d:%d", d.rate, w, h),
		"-frames:v", strconv.Itoa(count)}, quality...)
	args = append(args, filepath.Join(d.dir, filepath.FromSlash(rel), "%06d"+ext))
	if out, err := exec.CommandContext(ctx, d.tools.FFmpeg, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("the video's frames cannot be extracted: %v: %s", err, strings.TrimSpace(string(out)))
	}
	entries, err := os.ReadDir(filepath.Join(d.dir, filepath.FromSlash(rel)))
	if err != nil || len(entries) == 0 {
		return fmt.Errorf("the video gave no frames")
	}
	comp := fmt.Sprintf("framefarm_video_%d", d.staged)
	identity := obj{"o": obj{"a": 0, "k": 100}, "r": obj{"a": 0, "k": 0}, "p": obj{"a": 0, "k": []int{0, 0, 0}},
		"a": obj{"a": 0, "k": []int{0, 0, 0}}, "s": obj{"a": 0, "k": []int{100, 100, 100}}}
	layers := make([]any, 0, len(entries))
	for i := range entries {
		id := fmt.Sprintf("%s_%d", comp, i)
		d.addAsset(obj{"id": id, "w": w, "h": h, "u": rel, "p": fmt.Sprintf("%06d%s", i+1, ext), "e": 0})
		k := first + i
		layers = append(layers, obj{"ty": layerImage, "nm": id, "refId": id, "ip": k, "op": k + 1, "st": 0, "ks": identity})
	}
	d.addAsset(obj{"id": comp, "w": w, "h": h, "layers": layers})
	l["ty"], l["refId"], l["w"], l["h"] = layerPrecomp, comp, w, h
	if media.HasAudio {
		d.addSound(l, file)
	}
	return nil
}
