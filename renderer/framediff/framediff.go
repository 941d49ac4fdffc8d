// Package framediff compares rendered frames: the tests that check an injection changed what was
// drawn, and only there, measure it with this.
package framediff

import (
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // Load reads JPEG stills
	_ "image/png"  // and PNG ones
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
)

// Mean is the mean absolute difference of the color channels of a and b inside rect, 0..255.
func Mean(a, b image.Image, rect image.Rectangle) float64 {
	if ra, ok := a.(*image.RGBA); ok {
		if rb, ok := b.(*image.RGBA); ok {
			return meanRGBA(ra, rb, rect)
		}
	}
	var sum, n float64
	for y := rect.Min.Y; y < rect.Max.Y; y++ {
		for x := rect.Min.X; x < rect.Max.X; x++ {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			r2, g2, b2, _ := b.At(x, y).RGBA()
			sum += math.Abs(float64(r1)-float64(r2)) + math.Abs(float64(g1)-float64(g2)) + math.Abs(float64(b1)-float64(b2))
			n += 3
		}
	}
	if n == 0 {
		return 0
	}
	return sum / n / 257
}

// meanRGBA is Mean of two RGBA images, read straight from their pixels (a video's frames are
// compared by the hundred).
func meanRGBA(a, b *image.RGBA, rect image.Rectangle) float64 {
	rect = rect.Intersect(a.Rect).Intersect(b.Rect)
	var sum, n int64
	for y := rect.Min.Y; y < rect.Max.Y; y++ {
		pa := a.Pix[a.PixOffset(rect.Min.X, y):a.PixOffset(rect.Max.X, y)]
		pb := b.Pix[b.PixOffset(rect.Min.X, y):b.PixOffset(rect.Max.X, y)]
		for i := 0; i < len(pa); i += 4 {
			for c := range 3 {
				d := int64(pa[i+c]) - int64(pb[i+c])
				if d < 0 {
					d = -d
				}
				sum += d
			}
			n += 3
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

// Load decodes a PNG or JPEG frame file.
func Load(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	return img, err
}

// Videos decodes two videos frame by frame with ffmpeg and compares them: how many frames each
// has, and the largest Mean difference of a frame from its counterpart (over the frames both
// have). Frames are streamed, so long videos take no more memory than one frame each.
func Videos(ffmpeg, ffprobe, a, b string) (framesA, framesB int, worst float64, err error) {
	da, err := startDecoding(ffmpeg, ffprobe, a)
	if err != nil {
		return 0, 0, 0, err
	}
	defer da.close()
	db, err := startDecoding(ffmpeg, ffprobe, b)
	if err != nil {
		return 0, 0, 0, err
	}
	defer db.close()
	if da.width != db.width || da.height != db.height {
		return 0, 0, 0, fmt.Errorf("the videos are %dx%d and %dx%d", da.width, da.height, db.width, db.height)
	}
	rect := image.Rect(0, 0, da.width, da.height)
	for {
		fa, okA := da.next()
		fb, okB := db.next()
		if okA {
			framesA++
		}
		if okB {
			framesB++
		}
		if !okA || !okB {
			for okA {
				_, okA = da.next()
				framesA += btoi(okA)
			}
			for okB {
				_, okB = db.next()
				framesB += btoi(okB)
			}
			return framesA, framesB, worst, errors.Join(da.err(), db.err())
		}
		worst = max(worst, Mean(fa, fb, rect))
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// decoder streams a video's frames as RGBA images.
type decoder struct {
	cmd           *exec.Cmd
	out           io.ReadCloser
	width, height int
	frame         *image.RGBA
	readErr       error
}

func startDecoding(ffmpeg, ffprobe, file string) (*decoder, error) {
	probe, err := exec.Command(ffprobe, "-v", "error", "-select_streams", "v:0",
		"-show_entries", "stream=width,height", "-of", "csv=p=0:s=x", file).Output()
	if err != nil {
		return nil, fmt.Errorf("ffprobe %s: %w", file, err)
	}
	d := &decoder{}
	if _, err := fmt.Sscanf(strings.TrimSpace(string(probe)), "%dx%d", &d.width, &d.height); err != nil {
		return nil, fmt.Errorf("ffprobe %s said %q", file, probe)
	}
	d.cmd = exec.Command(ffmpeg, "-v", "error", "-i", file, "-f", "rawvideo", "-pix_fmt", "rgba", "-")
	if d.out, err = d.cmd.StdoutPipe(); err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	d.frame = image.NewRGBA(image.Rect(0, 0, d.width, d.height))
	return d, nil
}

// next reads the next frame into a buffer reused by the following call.
func (d *decoder) next() (*image.RGBA, bool) {
	if d.readErr != nil {
		return nil, false
	}
	if _, err := io.ReadFull(d.out, d.frame.Pix); err != nil {
		d.readErr = err
		return nil, false
	}
	return d.frame, true
}

func (d *decoder) err() error {
	if d.readErr != nil && d.readErr != io.EOF {
		return d.readErr
	}
	return nil
}

func (d *decoder) close() {
	d.out.Close()
	d.cmd.Wait()
}
