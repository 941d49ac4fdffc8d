package persistence

import (
	"slices"
	"strings"

	"github.com/oklog/ulid/v2"
)

// RetryTagPrefix starts the tag a retried job's new job carries: retry-of-ID, ID the retried job.
const RetryTagPrefix = "retry-of-"

// RetryRequest reads one of a team's jobs, with its nested jobs, as the request that creates
// them again: the same payload, the nested jobs as nested requests, the job tagged
// retry-of-ID in place of any retry-of tag it carried.
func (s *Store) RetryRequest(teamID, jobID ulid.ULID) (q *JobRequest, err error) {
	err = s.view(func(t *txn) error {
		j, err := t.ClientJob(teamID, jobID)
		if err != nil {
			return err
		}
		if q, err = t.requestOf(j); err != nil {
			return err
		}
		q.Tags = append(slices.DeleteFunc(slices.Clone(q.Tags), func(tag string) bool { return strings.HasPrefix(tag, RetryTagPrefix) }),
			RetryTagPrefix+jobID.String())
		return nil
	})
	return q, err
}

// requestOf is the request that made j, its nested jobs and chunks read from the store.
func (t *txn) requestOf(j *Job) (*JobRequest, error) {
	q := &JobRequest{Kind: j.Kind, TemplateID: j.TemplateID, Engine: j.Engine, Spec: j.Spec,
		MissingFonts: j.MissingFonts, ChunkFrames: j.ChunkFrames, Unsplit: j.Unsplit, Frames: j.Frames}
	q.takeRequested(j)
	if j.Split() {
		for _, chunkID := range j.Children {
			chunk, err := t.Job(chunkID)
			if err != nil {
				return nil, err
			}
			q.Chunks = append(q.Chunks, *chunk.Spec.Settings.Frames)
		}
	}
	q.Spec.Assets = slices.Clone(j.Spec.Assets)
	for i, a := range q.Spec.Assets {
		if a.JobID == "" {
			continue
		}
		childID, err := ulid.ParseStrict(a.JobID)
		if err != nil {
			return nil, err
		}
		child, err := t.Job(childID)
		if err != nil {
			return nil, err
		}
		nested, err := t.requestOf(child)
		if err != nil {
			return nil, err
		}
		q.Spec.Assets[i].JobID = ""
		q.Children = append(q.Children, nested)
		q.ChildAsset = append(q.ChildAsset, i)
	}
	return q, nil
}
