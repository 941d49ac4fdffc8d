package validate

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/framefarm/framefarm/renderer"
)

// MaxBatchChunks caps the chunks of one batch, which are written with it in one transaction.
const MaxBatchChunks = 20000

// TooManyChunks refuses a batch's job whose chunks would take the batch's past MaxBatchChunks.
func TooManyChunks(n int) *Error {
	var p problems
	p.add(CodeValidation, "chunks", "this job's %d chunks would take the batch's past %d; send it in another batch, or ask for larger chunks", n, MaxBatchChunks)
	return p.err()
}

// rawChunks is the extension field "chunks": frames per chunk, or how many chunks.
type rawChunks struct {
	Frames *float64 `json:"frames"`
	Count  *float64 `json:"count"`
}

// chunks reads how a job splits into chunks rendered on several nodes: as its "chunks" field
// asks, or by the farm's default (renderer.PlanChunks plans them). A job that asked but cannot
// be split renders whole, and its log says why.
func (c *checker) chunks(raw json.RawMessage, job *Job, comp *renderer.Composition, path string) {
	asked := len(raw) > 0 && string(raw) != "null"
	size, count := c.lim.ChunkFrames, 0
	if asked {
		var rc rawChunks
		if err := decodeStrict(raw, &rc, path); err != nil {
			c.merge(err)
			return
		}
		switch {
		case (rc.Frames == nil) == (rc.Count == nil):
			c.add(CodeValidation, path, "needs either frames (frames per chunk) or count (how many chunks)")
			return
		case rc.Frames != nil:
			if !integerIn(*rc.Frames, renderer.MinChunkFrames, math.MaxInt32) {
				c.add(CodeValidation, at(path, "frames"), "must be an integer of at least %d", renderer.MinChunkFrames)
				return
			}
			size = int(*rc.Frames)
		default:
			if !integerIn(*rc.Count, 1, renderer.MaxChunks) {
				c.add(CodeValidation, at(path, "count"), "must be an integer from 1 to %d", renderer.MaxChunks)
				return
			}
			count = int(*rc.Count)
		}
	}
	if size <= 0 && count == 0 || count == 1 {
		return // not asked, no farm default; or one chunk, which is the whole
	}
	from, to, why := splittable(job, comp)
	if why == "" && !asked && to-from+1 < c.lim.ChunkAbove {
		return
	}
	if why == "" {
		plan, err := renderer.PlanChunks(from, to, size, count, asked)
		if err != nil {
			c.add(CodeValidation, path, "%s", err)
			return
		}
		why, job.ChunkFrames, job.Chunks = plan.Unsplit, plan.Size, plan.Chunks
	}
	if why != "" && asked {
		job.Unsplit = why
	}
}

// splittable returns the frames a job renders, or why it cannot be split into chunks.
func splittable(job *Job, comp *renderer.Composition) (from, to int, why string) {
	s := job.Spec.Settings
	switch {
	case !renderer.SplitsFrames(job.Engine):
		return 0, 0, fmt.Sprintf("the %s engine does not render frame ranges as chunks", job.Engine)
	case s.Type == renderer.OutputAEP:
		return 0, 0, "an aep output is a project, not frames"
	case s.Type == renderer.OutputImage && (s.Frames == nil || !s.Frames.Range):
		return 0, 0, "a single frame"
	case job.Spec.TemplateSrc != "":
		return 0, 0, "its template comes from template.src, whose frames are known only when it renders"
	case len(job.Children) > 0:
		return 0, 0, "it has nested jobs, whose outputs it places whole"
	case comp == nil:
		return 0, 0, "its composition's frames are not known"
	}
	total := int(math.Round(comp.Duration * comp.FPS))
	from, to = 0, total-1
	if s.Frames != nil {
		from, to = s.Frames.Start, s.Frames.End
	}
	if to >= total {
		return 0, 0, fmt.Sprintf("frames %d to %d are not all in the composition's %d frames", from, to, total)
	}
	return from, to, ""
}

func integerIn(v float64, lo, hi int) bool {
	return v == math.Trunc(v) && v >= float64(lo) && v <= float64(hi)
}
