// Package framediff compares rendered frames: the tests that check an injection changed what was
// drawn, and only there, measure it with this.
package framediff

import (
	"image"
	_ "image/jpeg" // Load reads JPEG stills
	_ "image/png"  // and PNG ones
	"math"
	"os"
)

// Mean is the mean absolute difference of the color channels of a and b inside rect, 0..255.
func Mean(a, b image.Image, rect image.Rectangle) float64 {
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
