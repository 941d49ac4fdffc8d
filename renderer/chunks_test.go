package renderer

import (
	"errors"
	"fmt"
	"testing"
)

// TestPlanChunks: chunks by size or by count, the last taking what is left over; too few frames
// stay whole; past MaxChunks a size asked is refused, the farm's default grows.
func TestPlanChunks(t *testing.T) {
	for _, c := range []struct {
		from, to, size, count int
		strict                bool
		want                  string
	}{
		{0, 149, 50, 0, true, "50: [0 49] [50 99] [100 149]"},
		{0, 148, 50, 0, true, "50: [0 49] [50 148]"},
		{10, 159, 50, 0, true, "50: [10 59] [60 109] [110 159]"},
		{0, 149, 0, 4, true, "37: [0 36] [37 73] [74 110] [111 149]"},
		{0, 149, 0, 2, true, "75: [0 74] [75 149]"},
		{0, 99, 60, 0, true, "unsplit: its 100 frames make a single chunk"},
		{0, 99, 0, 50, true, "unsplit: its 100 frames make a single chunk"},
		{0, 99, 0, 33, true, "3: 33 chunks"},
		{0, 4, 2, 0, true, "unsplit: its 5 frames make a single chunk"},
		{0, 5, 3, 0, true, "3: [0 2] [3 5]"},
		{0, 15002, 3, 0, true, "error"},
		{0, 15002, 3, 0, false, "4: 3750 chunks"},
	} {
		plan, err := PlanChunks(c.from, c.to, c.size, c.count, c.strict)
		got := ""
		switch {
		case err != nil:
			if tooMany := (*TooManyChunksError)(nil); !errors.As(err, &tooMany) || tooMany.Chunks != 5001 {
				t.Fatalf("%+v: %v", c, err)
			}
			got = "error"
		case plan.Unsplit != "":
			got = "unsplit: " + plan.Unsplit
		case len(plan.Chunks) > 10:
			got = fmt.Sprintf("%d: %d chunks", plan.Size, len(plan.Chunks))
		default:
			got = fmt.Sprint(plan.Size, ":")
			for _, f := range plan.Chunks {
				got += fmt.Sprintf(" [%d %d]", f.Start, f.End)
			}
		}
		if got != c.want {
			t.Errorf("frames %d to %d, size %d, count %d: %s, want %s", c.from, c.to, c.size, c.count, got, c.want)
		}
		// Whatever the plan, its chunks cover the frames once, in order.
		if len(plan.Chunks) > 0 && (plan.Chunks[0].Start != c.from || plan.Chunks[len(plan.Chunks)-1].End != c.to) {
			t.Errorf("%+v: the chunks do not cover the frames", c)
		}
		for i := 1; i < len(plan.Chunks); i++ {
			if plan.Chunks[i].Start != plan.Chunks[i-1].End+1 || plan.Chunks[i].End-plan.Chunks[i].Start+1 < MinChunkFrames {
				t.Errorf("%+v: chunk %d is %+v after %+v", c, i, plan.Chunks[i], plan.Chunks[i-1])
			}
		}
	}
}
