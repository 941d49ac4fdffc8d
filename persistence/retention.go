package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
)

// EndedAt is when the job became terminal (zero while it is not).
func (j *Job) EndedAt() time.Time {
	switch {
	case !j.State.Terminal():
		return time.Time{}
	case j.State == JobFinished && !j.FinishedAt.IsZero():
		return j.FinishedAt
	case !j.ErrorAt.IsZero():
		return j.ErrorAt
	}
	return j.UpdatedAt
}

// endKey is the ended-jobs index key of a terminal top-level job: end millisecond + id.
func endKey(j *Job) []byte {
	return key(binary.BigEndian.AppendUint64(nil, uint64(max(j.EndedAt().UnixMilli(), 0))), id(j.ID))
}

// Removal is what one RemoveExpired command removed.
type Removal struct {
	// Jobs are the removed jobs, descendants included; their outputs in the object store go
	// next (the caller's, after the commit).
	Jobs []*Job
	// Batches counts the batches removed with their last job.
	Batches int
	// Next is where the next step starts; nil when no expired job is left.
	Next []byte
}

// removeExpired removes up to max top-level jobs that ended before cutoff, starting after the
// ended-jobs index key after (nil: from the oldest), each with its descendants, their index
// entries and logs; a batch goes with its last job. A job whose descendants are not all
// terminal stays (a child lives as long as its parent, and the parent as long as its work).
// The first step also forgets the engines' reasons for waiting superseded before cutoff.
func (t *txn) removeExpired(cutoff time.Time, after []byte, max int) (Removal, error) {
	var out Removal
	if after == nil {
		if err := t.pruneWaits(cutoff); err != nil {
			return out, err
		}
		if err := t.pruneUsage(cutoff); err != nil {
			return out, err
		}
	}
	limit := binary.BigEndian.AppendUint64(nil, uint64(cutoff.UnixMilli()))
	var candidates [][]byte
	c := t.bucket(bucketJobsByEnd).Cursor()
	k, _ := firstAfter(c, after)
	for ; k != nil && bytes.Compare(k[:8], limit) < 0 && len(candidates) < max; k, _ = c.Next() {
		candidates = append(candidates, bytes.Clone(k))
	}
	if len(candidates) == max {
		out.Next = candidates[len(candidates)-1]
	}
	for _, k := range candidates {
		tree, err := t.jobTree(ulidAt(k[8:]))
		if err != nil && !errors.Is(err, ErrNotFound) {
			return out, err
		}
		if err == nil && tree == nil {
			continue
		}
		// The entry goes with its job (or alone, if it outlived it).
		if err := t.bucket(bucketJobsByEnd).Delete(k); err != nil {
			return out, err
		}
		for _, j := range tree {
			removedBatch, err := t.removeJob(j)
			if err != nil {
				return out, err
			}
			if err := t.forgetObjects(j.OutputsToForget()); err != nil {
				return out, err
			}
			if removedBatch {
				out.Batches++
			}
		}
		out.Jobs = append(out.Jobs, tree...)
	}
	return out, nil
}

// jobTree is a job with all its descendants, or nil when one of them is not terminal.
func (t *txn) jobTree(root ulid.ULID) ([]*Job, error) {
	var tree []*Job
	next := []ulid.ULID{root}
	for len(next) > 0 {
		jobID := next[0]
		next = next[1:]
		j, err := t.Job(jobID)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", jobID, err)
		}
		if !j.State.Terminal() {
			return nil, nil
		}
		tree = append(tree, j)
		next = append(next, j.Children...)
	}
	return tree, nil
}

// removeJob deletes a job's record, index entries and log, and its batch once it held the
// batch's last top-level job; it reports whether the batch went.
func (t *txn) removeJob(j *Job) (bool, error) {
	if err := t.deleteJobIndexes(j, filedAs(j)); err != nil {
		return false, err
	}
	if err := t.bucket(bucketJobs).Delete(id(j.ID)); err != nil {
		return false, err
	}
	var logKeys [][]byte
	t.scanPrefix(bucketLogs, id(j.ID), func(k, _ []byte) bool {
		logKeys = append(logKeys, bytes.Clone(k))
		return true
	})
	for _, k := range logKeys {
		if err := t.bucket(bucketLogs).Delete(k); err != nil {
			return false, err
		}
	}
	if j.BatchID == (ulid.ULID{}) || j.ParentID != (ulid.ULID{}) || len(t.BatchJobs(j.BatchID)) > 0 {
		return false, nil
	}
	if err := t.bucket(bucketBatchesByTeam).Delete(key(id(j.TeamID), id(j.BatchID))); err != nil {
		return false, err
	}
	return true, t.bucket(bucketBatches).Delete(id(j.BatchID))
}
