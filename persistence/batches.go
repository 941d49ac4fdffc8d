package persistence

import (
	"time"

	"github.com/oklog/ulid/v2"
)

// BatchSummary is a batch as a listing shows it: when it was made, and its top-level jobs
// counted by state.
type BatchSummary struct {
	ID        ulid.ULID
	Name      string
	CreatedAt time.Time
	Jobs      int
	States    map[JobState]int
}

// TeamBatches reads a page of a team's batches, newest first: limit of them after skipping
// offset. Each is counted from the batch index (no job record is read).
func (s *Store) TeamBatches(teamID ulid.ULID, offset, limit int) (page []BatchSummary, err error) {
	err = s.view(func(t *txn) error {
		team := id(teamID)
		c := t.bucket(bucketBatchesByTeam).Cursor()
		var name []byte
		k, _ := c.Seek(prefixEnd(team))
		if k == nil {
			k, name = c.Last()
		} else {
			k, name = c.Prev()
		}
		for ; k != nil && hasPrefix(k, team) && len(page) < limit; k, name = c.Prev() {
			if offset > 0 {
				offset--
				continue
			}
			batchID := ulidAt(k[16:])
			b := BatchSummary{ID: batchID, CreatedAt: time.UnixMilli(int64(batchID.Time())).UTC(), States: map[JobState]int{}}
			b.Name = string(name)
			for _, j := range t.BatchJobs(batchID) {
				b.Jobs++
				b.States[j.State]++
			}
			page = append(page, b)
		}
		return nil
	})
	return page, err
}
