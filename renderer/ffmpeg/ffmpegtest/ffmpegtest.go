// Package ffmpegtest reads back what the engines render, with ffprobe, for tests.
package ffmpegtest

import (
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/ffmpeg"
)

// CheckRate reads a video with ffprobe -count_frames: it holds frames frames, declares rate
// exactly (its r_frame_rate and avg_frame_rate are that fraction, not one near it), its picture
// lasts as long as its frames at that rate, and its sound (withSound) as long as its picture,
// within a frame.
func CheckRate(t testing.TB, tools ffmpeg.Tools, name, file string, frames int, rate renderer.Rate, withSound bool) {
	t.Helper()
	out, err := exec.Command(tools.FFprobe, "-v", "error", "-count_frames", "-show_entries",
		"stream=codec_type,nb_read_frames,r_frame_rate,avg_frame_rate,duration", "-of", "json", file).Output()
	if err != nil {
		t.Fatalf("%s: ffprobe: %v", name, err)
	}
	var probe struct {
		Streams []struct {
			Type     string `json:"codec_type"`
			Frames   string `json:"nb_read_frames"`
			Rate     string `json:"r_frame_rate"`
			Average  string `json:"avg_frame_rate"`
			Duration string `json:"duration"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(out, &probe); err != nil {
		t.Fatal(err)
	}
	declared := fmt.Sprintf("%d/%d", rate.Num, rate.Den) // as ffprobe writes it
	want := rate.Seconds(frames)
	var video, audio float64
	sawAudio := false
	for _, s := range probe.Streams {
		d, _ := strconv.ParseFloat(s.Duration, 64)
		switch s.Type {
		case "video":
			video = d
			if s.Frames != strconv.Itoa(frames) || s.Rate != declared || s.Average != declared {
				t.Errorf("%s: %s frames at %s (average %s), want %d at %s", name, s.Frames, s.Rate, s.Average, frames, declared)
			}
			if math.Abs(d-want) > rate.Seconds(1)/2 {
				t.Errorf("%s: the picture lasts %.4fs, %d frames at %s last %.4fs", name, d, frames, declared, want)
			}
		case "audio":
			audio, sawAudio = d, true
		}
	}
	if withSound && (!sawAudio || math.Abs(audio-video) > rate.Seconds(1)) {
		t.Errorf("%s: the sound lasts %.4fs (present: %v), the picture %.4fs", name, audio, sawAudio, video)
	}
}

// Rate reads a rate as ffprobe writes it ("30000/1001", "25/1").
func Rate(s string) renderer.Rate {
	num, den, _ := strings.Cut(s, "/")
	n, err1 := strconv.Atoi(num)
	d, err2 := strconv.Atoi(den)
	if err1 != nil || err2 != nil {
		return renderer.Rate{}
	}
	return renderer.Rate{Num: n, Den: d}
}
