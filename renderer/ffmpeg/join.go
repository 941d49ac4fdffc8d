package ffmpeg

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/framefarm/framefarm/renderer"
)

// Media is what ffprobe tells of a file.
type Media struct {
	Width  int
	Height int
	// Rate is the video's frame rate, read as the exact rate it is near (renderer.RateOf).
	Rate     renderer.Rate
	Codec    string
	Duration float64
	HasAudio bool
	// Alpha says the video stream carries transparency.
	Alpha bool
}

// StagedInput is ffmpeg's input options for a file a job supplied: read through the file protocol
// only, so a playlist or a concat list inside it cannot pull other files or URLs in.
func StagedInput(p string) []string {
	return []string{"-protocol_whitelist", "file", "-i", p}
}

// containers are the formats accepted for video and audio assets (ffprobe's format names). HLS,
// DASH, concat lists and other formats that reference further files are refused: probing and
// decoding them would read whatever they point at.
var containers = []string{"mov", "mp4", "m4a", "3gp", "3g2", "mj2", "matroska", "webm", "avi", "mpegts", "mp3", "wav", "ogg", "flac", "aac", "gif"}

// probeInfo is what ffprobe says of a file.
type probeInfo struct {
	Streams []struct {
		CodecType    string `json:"codec_type"`
		CodecName    string `json:"codec_name"`
		Width        int    `json:"width"`
		Height       int    `json:"height"`
		AvgFrameRate string `json:"avg_frame_rate"`
		RFrameRate   string `json:"r_frame_rate"`
		PixFmt       string `json:"pix_fmt"`
	} `json:"streams"`
	Format struct {
		Name     string `json:"format_name"`
		Duration string `json:"duration"`
	} `json:"format"`
}

// probe runs ffprobe on a supplied file and refuses containers outside the list above.
func probe(ctx context.Context, t Tools, p string) (probeInfo, error) {
	var info probeInfo
	args := append([]string{"-v", "error", "-print_format", "json", "-show_streams", "-show_format", "-protocol_whitelist", "file"}, p)
	out, err := exec.CommandContext(ctx, t.FFprobe, args...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			// The node's own folders are no business of the job's owner: the message names files by their names.
			said := strings.ReplaceAll(string(exit.Stderr), filepath.Dir(p)+string(filepath.Separator), "")
			return info, fmt.Errorf("not a readable media file: %s", strings.TrimSpace(said))
		}
		return info, err
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return info, fmt.Errorf("ffprobe answered something unreadable: %w", err)
	}
	for _, name := range strings.Split(info.Format.Name, ",") {
		if slices.Contains(containers, name) {
			return info, nil
		}
	}
	return info, fmt.Errorf("the file is in the %q format; media assets must be one of %s", info.Format.Name, strings.Join(containers, ", "))
}

// CheckAudio checks that a supplied file is a sound in an accepted container.
func CheckAudio(ctx context.Context, t Tools, p string) error {
	info, err := probe(ctx, t, p)
	if err != nil {
		return err
	}
	for _, s := range info.Streams {
		if s.CodecType == "audio" {
			return nil
		}
	}
	return errors.New("the file has no audio stream")
}

// Probe reads a media file's first video stream, whether it has audio, and its duration.
func Probe(ctx context.Context, t Tools, p string) (Media, error) {
	info, err := probe(ctx, t, p)
	if err != nil {
		return Media{}, err
	}
	var m Media
	found := false
	for _, s := range info.Streams {
		switch s.CodecType {
		case "video":
			if !found {
				m.Width, m.Height, m.Codec, found = s.Width, s.Height, s.CodecName, true
				m.Alpha = hasAlpha(s.PixFmt)
				if m.Rate = renderer.RateOf(rate(s.AvgFrameRate)); m.Rate.IsZero() {
					m.Rate = renderer.RateOf(rate(s.RFrameRate))
				}
			}
		case "audio":
			m.HasAudio = true
		}
	}
	if !found {
		return m, errors.New("the file has no video stream")
	}
	m.Duration, _ = strconv.ParseFloat(info.Format.Duration, 64)
	return m, nil
}

// hasAlpha reads ffmpeg's pixel format names: yuva420p, rgba, argb, bgra, gbrap, ya8 and so on.
func hasAlpha(pixFmt string) bool {
	for _, p := range []string{"yuva", "rgba", "argb", "bgra", "abgr", "gbrap", "ya"} {
		if strings.HasPrefix(pixFmt, p) {
			return true
		}
	}
	return false
}

// rate reads a frame rate written as a fraction ("30000/1001").
func rate(s string) float64 {
	num, den, ok := strings.Cut(s, "/")
	n, err1 := strconv.ParseFloat(num, 64)
	if !ok {
		return n
	}
	d, err2 := strconv.ParseFloat(den, 64)
	if err1 != nil || err2 != nil || d == 0 {
		return 0
	}
	return n / d
}

// Joiner stitches videos one after another: the engine of join jobs.
type Joiner struct{ Tools Tools }

var _ renderer.Renderer = (*Joiner)(nil)

func (j *Joiner) Engine() string { return renderer.EngineFFmpeg }

// Render concatenates the task's videos, in order, into one MP4. Clips that already agree in
// size, frame rate, codec and audio are copied; otherwise everything is re-encoded to the size and
// frame rate of the first clip, with silence where a clip has no audio.
func (j *Joiner) Render(ctx context.Context, task *renderer.Task, report func(float64)) error {
	var clips []string
	var media []Media
	for i, a := range task.Assets {
		if a.LocalPath == "" {
			return fmt.Errorf("assets[%d] has no file to join", i)
		}
		m, err := Probe(ctx, j.Tools, a.LocalPath)
		if err != nil {
			return fmt.Errorf("assets[%d]: %w", i, err)
		}
		clips, media = append(clips, a.LocalPath), append(media, m)
	}
	if len(clips) == 0 {
		return errors.New("a join needs at least one video")
	}
	total := 0.0
	for _, m := range media {
		total += m.Duration
	}
	var args []string
	if compatible(media) {
		list := filepath.Join(task.WorkDir, "join.txt")
		if err := writeConcatList(list, clips, nil); err != nil {
			return err
		}
		args = append([]string{"-f", "concat", "-safe", "0", "-protocol_whitelist", "file", "-i", list, "-c", "copy"}, containerArgs(".mp4", media[0].Rate)...)
	} else {
		args = reencodeArgs(clips, media, task.Settings.Codec)
	}
	fmt.Fprintf(task.Log, "joining %d clips (%.3fs)\n", len(clips), total)
	return run(ctx, j.Tools, append(args, "-progress", "pipe:1", task.OutputPath), total, task.Log, report)
}

// compatible reports whether the clips can be concatenated without re-encoding.
func compatible(media []Media) bool {
	first := media[0]
	for _, m := range media {
		if m.Width != first.Width || m.Height != first.Height || m.Rate != first.Rate || m.Codec != first.Codec ||
			m.HasAudio != first.HasAudio || m.Codec != "h264" {
			return false
		}
	}
	return true
}

func reencodeArgs(clips []string, media []Media, codec string) []string {
	w, h, fps := media[0].Width+media[0].Width%2, media[0].Height+media[0].Height%2, media[0].Rate
	if fps.IsZero() {
		fps = renderer.Rate{Num: 30, Den: 1}
	}
	audio := false
	for _, m := range media {
		audio = audio || m.HasAudio
	}
	var args []string
	for _, c := range clips {
		args = append(args, StagedInput(c)...)
	}
	var filter strings.Builder
	for i, m := range media {
		fmt.Fprintf(&filter, "[%d:v]scale=%d:%d:force_original_aspect_ratio=decrease,pad=%d:%d:(ow-iw)/2:(oh-ih)/2,setsar=1,fps=%s[v%d];",
			i, w, h, w, h, fps, i)
		if !audio {
			continue
		}
		if m.HasAudio {
			fmt.Fprintf(&filter, "[%d:a]aformat=sample_rates=48000:channel_layouts=stereo,apad,atrim=duration=%s[a%d];", i, seconds(m.Duration), i)
		} else {
			fmt.Fprintf(&filter, "anullsrc=r=48000:cl=stereo,atrim=duration=%s[a%d];", seconds(m.Duration), i)
		}
	}
	for i := range media {
		fmt.Fprintf(&filter, "[v%d]", i)
		if audio {
			fmt.Fprintf(&filter, "[a%d]", i)
		}
	}
	a := 0
	if audio {
		a = 1
	}
	fmt.Fprintf(&filter, "concat=n=%d:v=1:a=%d[v]", len(media), a)
	if audio {
		filter.WriteString("[a]")
	}
	args = append(args, "-filter_complex", filter.String(), "-map", "[v]")
	if audio {
		args = append(append(args, "-map", "[a]"), audioArgs(".mp4")...)
	}
	// The filter above already brought every clip to one even size.
	_, video := videoEncoding(codec, false, false)
	return append(append(append(args, video...), "-r", fps.String()), containerArgs(".mp4", fps)...)
}

func seconds(d float64) string { return strconv.FormatFloat(d, 'f', 3, 64) }

// run runs ffmpeg, reporting progress from its -progress output against the total duration.
func run(ctx context.Context, t Tools, args []string, total float64, log io.Writer, report func(float64)) error {
	cmd := exec.CommandContext(ctx, t.FFmpeg, append([]string{"-hide_banner", "-nostats", "-loglevel", "error", "-y"}, args...)...)
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ffmpeg cannot start: %w", err)
	}
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		if v, ok := strings.CutPrefix(scanner.Text(), "out_time_us="); ok && total > 0 {
			if us, err := strconv.ParseFloat(v, 64); err == nil && us >= 0 {
				report(min(100, us/1e6/total*100))
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("ffmpeg failed: %w", err)
	}
	report(100)
	return nil
}
