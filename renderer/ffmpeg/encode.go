// Package ffmpeg turns rendered frames into the outputs jobs ask for (H.264 and ProRes videos,
// PNG and JPEG stills, zips of frames), muxes audio in, probes media, and stitches joins.
package ffmpeg

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/workfiles"
)

// Tools are the ffmpeg and ffprobe programs.
type Tools struct {
	FFmpeg  string
	FFprobe string
}

// Find locates the programs: the configured paths, or the ones on PATH.
func Find(ffmpegPath, ffprobePath string) (Tools, error) {
	var t Tools
	var err error
	if t.FFmpeg, err = exec.LookPath(orDefault(ffmpegPath, "ffmpeg")); err != nil {
		return t, fmt.Errorf("ffmpeg not found (install the ffmpeg package, or set engines.ffmpeg): %w", err)
	}
	if t.FFprobe, err = exec.LookPath(orDefault(ffprobePath, "ffprobe")); err != nil {
		return t, fmt.Errorf("ffprobe not found (install the ffmpeg package, or set engines.ffprobe): %w", err)
	}
	return t, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Input is what an encoder reads: raw RGBA frames with premultiplied alpha arriving on a pipe
// or from Frames (Width, Height and Rate set), or a media file (Width zero) such as After Effects'
// render, whose frames are taken one after the other at Rate when it is set.
type Input struct {
	Path   string
	Width  int
	Height int
	Rate   renderer.Rate
	// Frames, when set, brings the raw frames in place of Path.
	Frames io.Reader
}

func (in Input) raw() bool { return in.Width > 0 }

// args are the input options of in.
func (in Input) args() []string {
	path := in.Path
	if in.Frames != nil {
		path = "pipe:0"
	}
	if !in.raw() {
		if in.Rate.IsZero() {
			return []string{"-i", path}
		}
		// Every frame of the file, one after the other at the exact rate: its own timestamps
		// (a decimal rate's) would have ffmpeg drop or repeat frames to meet the output's.
		return []string{"-r", in.Rate.String(), "-i", path}
	}
	return []string{"-f", "rawvideo", "-pix_fmt", "rgba", "-s", fmt.Sprintf("%dx%d", in.Width, in.Height),
		"-framerate", in.Rate.String(), "-i", path}
}

// Encoder is a running ffmpeg that writes one job output.
type Encoder struct {
	cmd    *exec.Cmd
	frames string // folder of a frame range, zipped into out at the end
	out    string
}

// Start begins encoding in into out, as the job's settings ask. draft trades quality for speed.
func Start(ctx context.Context, t Tools, in Input, s renderer.Settings, draft bool, out string, log io.Writer) (*Encoder, error) {
	args := append([]string{"-hide_banner", "-nostats", "-loglevel", "error", "-y"}, in.args()...)
	e := &Encoder{out: out}
	switch s.Type {
	case renderer.OutputImage:
		still := stillArgs(s.Codec, in.raw())
		if s.Frames != nil && s.Frames.Range {
			e.frames = out + ".frames"
			if err := os.MkdirAll(e.frames, 0o700); err != nil {
				return nil, err
			}
			args = append(append(args, still...), filepath.Join(e.frames, "frame_%06d"+stillExt(s.Codec)))
		} else {
			args = append(append(args, still...), "-frames:v", "1", "-update", "1", out)
		}
	case renderer.OutputVideo, "":
		args = append(append(args, videoArgs(in, s, draft, out)...), out)
	default:
		return nil, fmt.Errorf("output type %q cannot be encoded by ffmpeg", s.Type)
	}
	e.cmd = exec.CommandContext(ctx, t.FFmpeg, args...)
	e.cmd.Stdin, e.cmd.Stdout, e.cmd.Stderr = in.Frames, log, log
	if err := e.cmd.Start(); err != nil {
		return nil, fmt.Errorf("ffmpeg cannot start: %w", err)
	}
	return e, nil
}

// videoArgs are the output options that encode in into a video file out as the settings ask.
func videoArgs(in Input, s renderer.Settings, draft bool, out string) []string {
	filter, args := videoEncoding(s.Codec, draft, in.raw())
	if filter != "" {
		args = append([]string{"-vf", filter}, args...)
	}
	args = append(args, containerArgs(out, in.Rate)...)
	if !in.Rate.IsZero() {
		args = append(args, "-r", in.Rate.String())
	}
	if in.raw() {
		return args
	}
	return append(args, audioArgs(out)...)
}

// JoinSegments writes into out the video segments (as Start makes them, of one encoding, each
// opening on a key frame, at rate, holding frames[i] frames each) one after the other, their
// frames copied as they are: for codecs that code each frame alone (ProRes), the very file one
// encoding of all the frames makes. list is where their list is written.
func JoinSegments(ctx context.Context, t Tools, segments []string, frames []int, list string, rate renderer.Rate, out string, log io.Writer) error {
	if len(frames) != len(segments) || rate.IsZero() {
		return fmt.Errorf("joining %d segments needs each one's frame count (got %d) and the rate (%s)", len(segments), len(frames), rate)
	}
	if err := writeConcatList(list, segments, segmentDurations(frames, rate)); err != nil {
		return err
	}
	args := append([]string{"-hide_banner", "-nostats", "-loglevel", "error", "-y",
		"-f", "concat", "-safe", "0", "-protocol_whitelist", "file", "-i", list, "-map", "0:v", "-c", "copy"}, containerArgs(out, rate)...)
	cmd := exec.CommandContext(ctx, t.FFmpeg, append(args, out)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("joining the chunks failed: %w", err)
	}
	return nil
}

// EncodeChunks encodes the lossless chunks (CodecLossless) of a split job (width x height frames
// at rate, frames in all), in order, into the video out as the settings ask: one encoding of all
// their frames, which reach the encoder raw, as a render's do. list is where their list is
// written.
func EncodeChunks(ctx context.Context, t Tools, chunks []string, list string, width, height int, rate renderer.Rate, frames int,
	s renderer.Settings, draft bool, out string, log io.Writer, report func(float64)) error {
	if err := writeConcatList(list, chunks, nil); err != nil {
		return err
	}
	log = &lockedWriter{w: log} // both ffmpegs write to it at once
	decoder := exec.CommandContext(ctx, t.FFmpeg, "-hide_banner", "-nostats", "-loglevel", "error",
		"-f", "concat", "-safe", "0", "-protocol_whitelist", "file", "-i", list, "-f", "rawvideo", "-pix_fmt", "rgba", "pipe:1")
	decoder.Stderr = log
	pipe, err := decoder.StdoutPipe()
	if err != nil {
		return err
	}
	if err := decoder.Start(); err != nil {
		return fmt.Errorf("ffmpeg cannot start: %w", err)
	}
	counted := &frameCounter{r: pipe, frameBytes: int64(width) * int64(height) * 4, frames: frames, report: report}
	encoder, err := Start(ctx, t, Input{Width: width, Height: height, Rate: rate, Frames: counted}, s, draft, out, log)
	if err != nil {
		decoder.Process.Kill()
		decoder.Wait()
		return err
	}
	encodeErr := encoder.Wait()
	if encodeErr != nil {
		decoder.Process.Kill()
	}
	if err := decoder.Wait(); err != nil && encodeErr == nil {
		return fmt.Errorf("decoding the chunks failed: %w", err)
	}
	if encodeErr != nil {
		return encodeErr
	}
	if got := counted.n / counted.frameBytes; got != int64(frames) {
		return fmt.Errorf("the chunks hold %d frames of %dx%d, not %d", got, width, height, frames)
	}
	return nil
}

// frameCounter reports how many of frames frames passed through it.
type frameCounter struct {
	r          io.Reader
	n          int64
	frameBytes int64
	frames     int
	report     func(float64)
}

func (c *frameCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	before := c.n / c.frameBytes
	c.n += int64(n)
	if after := c.n / c.frameBytes; after != before && c.frames > 0 {
		c.report(min(100, float64(after)/float64(c.frames)*100))
	}
	return n, err
}

// lockedWriter lets several processes write to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// writeConcatList writes the concat demuxer's list of files, with each one's duration when
// durations is given.
func writeConcatList(list string, files, durations []string) error {
	var b strings.Builder
	for i, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "file '%s'\n", strings.ReplaceAll(abs, "'", `'\''`))
		if durations != nil {
			fmt.Fprintf(&b, "duration %s\n", durations[i])
		}
	}
	return os.WriteFile(list, []byte(b.String()), 0o600)
}

// segmentDurations are the durations the concat demuxer is told of segments of frames[i]
// frames at rate. Left to itself it takes a segment's length from its container, which for
// MPEG-TS and QuickTime misses or adds a frame's time at each seam. It reads a duration in
// microseconds; each one is the difference of the whole microseconds at which the segment
// starts and ends, so the rounding never adds up over thousands of segments and each starts
// within half a microsecond of its exact time.
func segmentDurations(frames []int, rate renderer.Rate) []string {
	at := func(frame int64) int64 { // the microsecond nearest frame's start
		return (frame*int64(rate.Den)*1_000_000*2 + int64(rate.Num)) / (2 * int64(rate.Num))
	}
	out := make([]string, len(frames))
	var start int64
	for i, n := range frames {
		d := at(start+int64(n)) - at(start)
		out[i] = fmt.Sprintf("%d.%06d", d/1_000_000, d%1_000_000)
		start += int64(n)
	}
	return out
}

// containerArgs are the muxer options of an output file at rate (zero: as its input has it): an
// MP4 starts with its index, so it plays while it downloads; an MP4's or a QuickTime's video
// counts time in a unit each frame lasts a whole number of, so a file joined from segments
// declares the rate one render of all its frames declares.
func containerArgs(out string, rate renderer.Rate) []string {
	var args []string
	ext := strings.ToLower(filepath.Ext(out))
	if (ext == ".mp4" || ext == ".mov") && !rate.IsZero() {
		args = append(args, "-video_track_timescale", strconv.Itoa(rate.Timescale()))
	}
	if ext == ".mp4" {
		args = append(args, "-movflags", "+faststart")
	}
	return args
}

// Transcode encodes a media file into out as the settings ask, every frame of it at the exact
// rate its own is near (RateOf), and waits for it.
func Transcode(ctx context.Context, t Tools, file string, s renderer.Settings, draft bool, out string, log io.Writer) error {
	m, err := Probe(ctx, t, file)
	if err != nil {
		return err
	}
	e, err := Start(ctx, t, Input{Path: file, Rate: m.Rate}, s, draft, out, log)
	if err != nil {
		return err
	}
	return e.Wait()
}

// audioArgs encode sound for a container: AAC in MP4, PCM in QuickTime.
func audioArgs(out string) []string {
	if strings.HasSuffix(strings.ToLower(out), ".mov") {
		return []string{"-c:a", "pcm_s16le"}
	}
	return []string{"-c:a", "aac", "-b:a", "192k"}
}

// Wait waits for ffmpeg and finishes the output (zipping a frame range).
func (e *Encoder) Wait() error {
	if err := e.cmd.Wait(); err != nil {
		return fmt.Errorf("ffmpeg failed: %w", err)
	}
	if e.frames == "" {
		return nil
	}
	defer os.RemoveAll(e.frames)
	return workfiles.Zip(e.frames, e.out, zip.Store)
}

// JoinFrameZips writes into out the frames of zips of frame ranges (as Start makes them), in
// order and numbered on from one zip to the next, as one render of all their frames would have
// numbered them. Frames are copied as they are, never encoded again.
func JoinFrameZips(zips []string, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	frame := 0
	for i, p := range zips {
		if err := copyFrames(zw, p, &frame); err != nil {
			return fmt.Errorf("chunk %d: %w", i+1, err)
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func copyFrames(zw *zip.Writer, zipPath string, frame *int) error {
	zr, err := zip.OpenReader(zipPath)
	if err != nil {
		return err
	}
	defer zr.Close()
	files := slices.Clone(zr.File)
	slices.SortFunc(files, func(a, b *zip.File) int { return strings.Compare(a.Name, b.Name) })
	for _, file := range files {
		ext := path.Ext(file.Name)
		if !strings.HasPrefix(file.Name, "frame_") || (ext != ".png" && ext != ".jpg") {
			return fmt.Errorf("%q is not a frame", file.Name)
		}
		*frame++
		header := file.FileHeader
		header.Name = fmt.Sprintf("frame_%06d%s", *frame, ext)
		raw, err := file.OpenRaw()
		if err != nil {
			return err
		}
		w, err := zw.CreateRaw(&header)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, raw); err != nil {
			return err
		}
	}
	return nil
}

// Kill stops ffmpeg at once.
func (e *Encoder) Kill() {
	if e.cmd.Process != nil {
		e.cmd.Process.Kill()
	}
}

// videoEncoding returns the filter a codec needs on its input ("" for none) and the encoder
// arguments of a settings.codec. premultiplied says the input's alpha is premultiplied.
func videoEncoding(codec string, draft, premultiplied bool) (filter string, args []string) {
	preset := "veryfast"
	if draft {
		preset = "ultrafast"
	}
	switch codec {
	case renderer.CodecLossless:
		// Intra-only and lossless, alpha kept as it came: a chunk's frames reach the join as
		// they left the engine.
		return "", []string{"-c:v", "ffv1", "-level", "3", "-g", "1", "-slices", "4", "-pix_fmt", "bgra"}
	case "video_prores_422":
		return "", []string{"-c:v", "prores_ks", "-profile:v", "2", "-pix_fmt", "yuv422p10le", "-vendor", "apl0"}
	case "video_prores_4444":
		// ProRes 4444 stores straight alpha.
		if premultiplied {
			filter = "unpremultiply=inplace=1"
		}
		return filter, []string{"-c:v", "prores_ks", "-profile:v", "4", "-pix_fmt", "yuva444p10le", "-vendor", "apl0"}
	}
	rate := "15"
	cbr := false
	if rest, ok := strings.CutPrefix(codec, "video_h264_"); ok {
		mode, mbps, _ := strings.Cut(rest, "_")
		cbr = mode == "cbr"
		rate = strings.TrimSuffix(mbps, "mbps")
	}
	n, err := strconv.Atoi(rate)
	if err != nil || n <= 0 {
		n = 15
	}
	// yuv420p needs even sizes.
	filter = "pad=ceil(iw/2)*2:ceil(ih/2)*2"
	args = []string{"-c:v", "libx264", "-preset", preset, "-pix_fmt", "yuv420p", "-b:v", fmt.Sprintf("%dM", n)}
	if cbr {
		return filter, append(args, "-minrate", fmt.Sprintf("%dM", n), "-maxrate", fmt.Sprintf("%dM", n), "-bufsize", fmt.Sprintf("%dM", n),
			"-x264-params", "nal-hrd=cbr:force-cfr=1")
	}
	return filter, append(args, "-maxrate", fmt.Sprintf("%dM", n*3/2), "-bufsize", fmt.Sprintf("%dM", n*2))
}

func stillArgs(codec string, premultiplied bool) []string {
	if codec == renderer.CodecJPEG {
		return []string{"-an", "-c:v", "mjpeg", "-q:v", "2", "-pix_fmt", "yuvj444p"}
	}
	if premultiplied {
		return []string{"-an", "-vf", "unpremultiply=inplace=1", "-c:v", "png"}
	}
	return []string{"-an", "-c:v", "png"}
}

func stillExt(codec string) string {
	if codec == renderer.CodecJPEG {
		return ".jpg"
	}
	return ".png"
}

// AudioTrack is the sound of a file placed on the video's timeline.
type AudioTrack struct {
	Path string
	// Start is where the file's time 0 falls, in seconds; before 0 its beginning is cut.
	Start float64
}

// MuxAudio writes video (frames of it at rate) with the tracks mixed in at their start times
// into out, whose sound lasts as long as its frames whatever the length of the tracks.
func MuxAudio(ctx context.Context, t Tools, video string, tracks []AudioTrack, rate renderer.Rate, frames int, out string, log io.Writer) error {
	args := []string{"-hide_banner", "-nostats", "-loglevel", "error", "-y", "-i", video}
	var filter strings.Builder
	for i, tr := range tracks {
		args = append(args, StagedInput(tr.Path)...)
		if tr.Start < 0 {
			fmt.Fprintf(&filter, "[%d:a]atrim=start=%.6f,asetpts=PTS-STARTPTS[a%d];", i+1, -tr.Start, i)
		} else {
			fmt.Fprintf(&filter, "[%d:a]adelay=%d:all=1[a%d];", i+1, int(tr.Start*1000), i)
		}
	}
	for i := range tracks {
		fmt.Fprintf(&filter, "[a%d]", i)
	}
	fmt.Fprintf(&filter, "amix=inputs=%d:duration=longest:normalize=0,apad[mixed]", len(tracks))
	args = append(args, "-filter_complex", filter.String(), "-map", "0:v", "-map", "[mixed]", "-c:v", "copy")
	args = append(append(append(args, audioArgs(out)...), containerArgs(out, rate)...), "-t", strconv.FormatFloat(rate.Seconds(frames), 'f', 6, 64), out)
	cmd := exec.CommandContext(ctx, t.FFmpeg, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("muxing audio failed: %w", err)
	}
	return nil
}
