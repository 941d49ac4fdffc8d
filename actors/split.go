package actors

import (
	"fmt"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/persistence"
)

// A split job renders as chunks (persistence.KindChunk), each a job of its own in the queue,
// which the job joins once all are rendered. While they render the job is pending; to its client
// it renders (persistence.Job.Status), and its progress is the chunks' progress weighted by their
// frames, up to chunksShare; the join takes it from there to 100.
const chunksShare = 95.0

// chunkTally is what a split job knows of its chunks while it waits on them: each one's frames
// and progress.
type chunkTally struct {
	index   map[ulid.ULID]int
	first   []int
	last    []int
	percent []float64
	frames  int
}

func newChunkTally(chunks []*persistence.Job) *chunkTally {
	t := &chunkTally{index: make(map[ulid.ULID]int, len(chunks))}
	for i, c := range chunks {
		f := c.Spec.Settings.Frames
		t.index[c.ID] = i
		t.first, t.last = append(t.first, f.Start), append(t.last, f.End)
		t.frames += f.End - f.Start + 1
		pct := c.Progress
		if c.State == persistence.JobFinished {
			pct = 100
		}
		t.percent = append(t.percent, pct)
	}
	return t
}

// set records a chunk's progress; false for a job that is not one of the chunks.
func (t *chunkTally) set(chunk ulid.ULID, percent float64) bool {
	i, ok := t.index[chunk]
	if ok {
		t.percent[i] = min(max(percent, 0), 100)
	}
	return ok
}

// progress is the split job's progress: its chunks', weighted by their frames.
func (t *chunkTally) progress() float64 {
	if t.frames == 0 {
		return 0
	}
	sum := 0.0
	for i, pct := range t.percent {
		sum += pct * float64(t.last[i]-t.first[i]+1)
	}
	return sum / float64(t.frames) * chunksShare / 100
}

// describe names a chunk in the job's log and errors: "chunk 2 of 5 (frames 60 to 119)".
func (t *chunkTally) describe(chunk ulid.ULID) string {
	i, ok := t.index[chunk]
	if !ok {
		return "chunk " + chunk.String()
	}
	return fmt.Sprintf("chunk %d of %d (frames %d to %d)", i+1, len(t.first), t.first[i], t.last[i])
}
