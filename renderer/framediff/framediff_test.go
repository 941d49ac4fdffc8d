package framediff

import (
	"image"
	"image/color"
	"testing"
)

func TestMean(t *testing.T) {
	a := image.NewRGBA(image.Rect(0, 0, 4, 4))
	b := image.NewRGBA(image.Rect(0, 0, 4, 4))
	b.Set(0, 0, color.RGBA{R: 255, G: 255, B: 255, A: 255})
	if d := Mean(a, b, image.Rect(0, 0, 1, 1)); d != 255 {
		t.Fatalf("one white pixel against black: %v", d)
	}
	if d := Mean(a, b, image.Rect(0, 0, 4, 4)); d != 255.0/16 {
		t.Fatalf("over 16 pixels: %v", d)
	}
	if d := Mean(a, b, image.Rect(1, 1, 4, 4)); d != 0 {
		t.Fatalf("outside the pixel: %v", d)
	}
}

// TestMeanReadsRGBAPixelsAsAtDoes: the fast path over RGBA pixels measures what the general
// one does through At.
func TestMeanReadsRGBAPixelsAsAtDoes(t *testing.T) {
	a := image.NewRGBA(image.Rect(0, 0, 7, 5))
	b := image.NewRGBA(image.Rect(0, 0, 7, 5))
	for i := range a.Pix {
		a.Pix[i], b.Pix[i] = byte(i*37), byte(i*91+5)
	}
	type general struct{ image.Image }
	for _, r := range []image.Rectangle{a.Rect, image.Rect(1, 2, 6, 4)} {
		if fast, slow := Mean(a, b, r), Mean(general{a}, general{b}, r); fast != slow {
			t.Fatalf("%v: %v over the pixels, %v through At", r, fast, slow)
		}
	}
}
