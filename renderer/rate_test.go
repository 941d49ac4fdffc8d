package renderer

import (
	"math"
	"testing"
)

func TestRateOfReadsBroadcastAndWholeRates(t *testing.T) {
	for fps, want := range map[float64]string{
		// As exporters write them: Lottie's float32 rates, After Effects' three decimals.
		29.9700012207031: "30000/1001", 29.97: "30000/1001", 29.97002997: "30000/1001",
		23.9759998321533: "24000/1001", 23.976: "24000/1001", 59.9399986267090: "60000/1001", 59.94: "60000/1001",
		47.952: "48000/1001", 119.88: "120000/1001",
		24: "24", 25: "25", 30: "30", 50: "50", 60: "60", 29.9999999: "30", 24.00000190734863: "24",
		12.5: "25/2", 7.5: "15/2", 15: "15", 1: "1", 0.5: "1/2",
		0: "0/0", -30: "0/0", math.Inf(1): "0/0", math.NaN(): "0/0",
	} {
		got := RateOf(fps)
		if s := got.String(); s != want && !(want == "0/0" && got.IsZero()) {
			t.Errorf("RateOf(%v) = %s, want %s", fps, s, want)
		}
	}
	if r := RateOf(29.97); r.Seconds(30000) != 1001 || r.Timescale() != 30000 {
		t.Errorf("30000/1001: %v s for 30000 frames, timescale %d", r.Seconds(30000), r.Timescale())
	}
	if r := RateOf(25); r.Timescale() != 25000 || r.FPS() != 25 {
		t.Errorf("25: timescale %d, fps %v", r.Timescale(), r.FPS())
	}
	// A rate no fraction of a small denominator matches comes out in lowest terms.
	if r := RateOf(33.333333); r.Den > 1e6 || math.Abs(r.FPS()-33.333333) > 1e-5 {
		t.Errorf("33.333333: %s", r)
	}
}
