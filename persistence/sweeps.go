package persistence

import "github.com/oklog/ulid/v2"

// A split job that ends while its chunks wait (cancelled, stopped, or failed by one of them)
// leaves the chunks to a sweep that ends them in the background, a step at a time: the job's
// answer does not wait for thousands of them. The sweep is recorded in the same write as the
// job's end and removed when it is over (SetMeta of SweepKey to ""), so a restart, or a replica
// taking the lead, resumes a sweep that was cut short.
const SweepPrefix = "sweep/"

// SweepKey is the meta name recording the sweep of a split job's chunks.
func SweepKey(jobID ulid.ULID) string { return SweepPrefix + jobID.String() }

// SweepLeft reports whether a change of a job leaves its chunks to sweep: a split job ending
// from pending, which is where it waits on them.
func SweepLeft(prev JobState, next *Job) bool {
	return prev == JobPending && next.Split() && (next.State == JobCancelled || next.State == JobFailed)
}

// recordSweep records the sweep a job's change leaves, if any.
func (t *txn) recordSweep(prev JobState, next *Job) error {
	if !SweepLeft(prev, next) {
		return nil
	}
	return t.bucket(bucketMeta).Put([]byte(SweepKey(next.ID)), []byte("1"))
}
