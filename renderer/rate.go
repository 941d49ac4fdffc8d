package renderer

import (
	"math"
	"strconv"
)

// Rate is a frame rate as a fraction of whole numbers: Num frames every Den seconds.
//
// Templates hold rates as decimals (a Lottie export writes 29.97 fps as 29.9700012207031, an
// After Effects project as a ratio of its own), and a decimal handed to ffmpeg becomes whatever
// fraction ffmpeg finds near it (982057/32768 for that one). A broadcast rate is exactly
// 30000/1001, and a farm whose whole and split renders of one composition must be the same file
// writes that fraction in both: RateOf finds it.
type Rate struct{ Num, Den int }

// rateTolerance is how near a decimal must be to a rate to be read as it: far below the 0.03 fps
// between 30 and 29.97, far above the float32 noise of exporters.
const rateTolerance = 1e-3

// RateOf reads a frame rate given as a decimal: a whole number of frames a second (24, 25, 30,
// 50, 60) or a broadcast rate (N*1000/1001: 23.976, 29.97, 59.94, 47.952, 119.88) when it is
// within a thousandth of one, else the simplest fraction within a millionth of it (12.5 is
// 25/2). A rate that is not positive and finite is the zero Rate.
func RateOf(fps float64) Rate {
	if !(fps > 0) || math.IsInf(fps, 0) || fps > 1e6 {
		return Rate{}
	}
	if n := math.Round(fps); n >= 1 && math.Abs(fps-n) < rateTolerance {
		return Rate{int(n), 1}
	}
	if n := math.Round(fps * 1001 / 1000); n >= 1 && math.Abs(fps-n*1000/1001) < rateTolerance {
		return Rate{int(n) * 1000, 1001}
	}
	for den := 2; den <= 1001; den++ {
		num := math.Round(fps * float64(den))
		if num >= 1 && math.Abs(num/float64(den)-fps) < 1e-6*fps {
			return Rate{int(num), den}
		}
	}
	return Rate{int(math.Round(fps * 1e6)), 1e6}.reduced()
}

// reduced is r in lowest terms.
func (r Rate) reduced() Rate {
	a, b := r.Num, r.Den
	for b != 0 {
		a, b = b, a%b
	}
	if a == 0 {
		return r
	}
	return Rate{r.Num / a, r.Den / a}
}

// IsZero reports whether r is no rate.
func (r Rate) IsZero() bool { return r.Num <= 0 || r.Den <= 0 }

// FPS is r as a decimal.
func (r Rate) FPS() float64 {
	if r.IsZero() {
		return 0
	}
	return float64(r.Num) / float64(r.Den)
}

// String is r as ffmpeg and ffprobe write it: "30000/1001", or "25" for a whole rate.
func (r Rate) String() string {
	if r.Den == 1 {
		return strconv.Itoa(r.Num)
	}
	return strconv.Itoa(r.Num) + "/" + strconv.Itoa(r.Den)
}

// Seconds is how long frames last at r.
func (r Rate) Seconds(frames int) float64 {
	if r.IsZero() {
		return 0
	}
	return float64(frames) * float64(r.Den) / float64(r.Num)
}

// Timescale is the unit a video file's timestamps count at r (ticks a second): a multiple of
// Num of at least 10000, so each frame lasts a whole number of ticks (1001 at 30000/1001, 1000
// at 25) and every frame of a file is the same length, whoever wrote its parts.
func (r Rate) Timescale() int {
	scale := r.Num
	for scale > 0 && scale < 10000 {
		scale *= 10
	}
	return scale
}
