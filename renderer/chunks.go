package renderer

import "fmt"

// MinChunkFrames is the fewest frames a chunk of a split job holds. x264 starts a segment of
// three frames or more with the decoding delay its B-frames need, and one of one or two frames
// without: a join mixing both would leave a gap at their seam.
const MinChunkFrames = 3

// MaxChunks caps the chunks of one job: its join's task names every chunk.
const MaxChunks = 5000

// TooManyChunksError: the chunk size asked makes more than MaxChunks chunks.
type TooManyChunksError struct{ Chunks int }

func (e *TooManyChunksError) Error() string {
	return fmt.Sprintf("would make %d chunks; a job has at most %d (ask for larger chunks)", e.Chunks, MaxChunks)
}

// ChunkPlan is how a render of a range of frames splits into chunks rendered apart.
type ChunkPlan struct {
	// Size is the frames of each chunk; the last one takes what is left over.
	Size   int
	Chunks []Frames
	// Unsplit says why the frames stay one render (no Chunks).
	Unsplit string
}

// PlanChunks splits frames from to to (both included) into chunks of size frames, or into
// count chunks when count is set. Past MaxChunks chunks, a size the client asked for (strict) is
// a *TooManyChunksError; the farm's own default grows to make MaxChunks of them.
func PlanChunks(from, to, size, count int, strict bool) (ChunkPlan, error) {
	frames := to - from + 1
	if count > 0 {
		size = frames / count
	}
	switch n := frames / max(size, 1); {
	case size < MinChunkFrames || n < 2:
		return ChunkPlan{Unsplit: fmt.Sprintf("its %d frames make a single chunk", frames)}, nil
	case n > MaxChunks && strict:
		return ChunkPlan{}, &TooManyChunksError{Chunks: n}
	case n > MaxChunks:
		size = (frames + MaxChunks - 1) / MaxChunks
	}
	plan := ChunkPlan{Size: size}
	for start := from; start+size-1 <= to; start += size {
		end := start + size - 1
		if end+size > to {
			end = to // the last chunk takes the frames left over
		}
		plan.Chunks = append(plan.Chunks, Frames{Start: start, End: end, Range: true})
	}
	return plan, nil
}
