package persistence

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/oklog/ulid/v2"
)

// Usage is what a team's work used of the farm: render slot time (every attempt's, from its
// dispatch to its end, failed and lost ones included), the frames its finished renders made, its
// jobs finished and failed (chunks apart), and the bytes of its outputs. The store keeps it per
// hour, team and engine, added up in the same write as each job's change (ChangeJob): a job's
// render ending adds to the hour it ended in. Replicas apply the same commands, so they hold the
// same usage; retention removes the hours before its cutoff.
type Usage struct {
	RenderSeconds float64 `json:"renderSeconds"`
	Frames        int64   `json:"frames"`
	JobsFinished  int64   `json:"jobsFinished"`
	JobsFailed    int64   `json:"jobsFailed"`
	OutputBytes   int64   `json:"outputBytes"`
}

// Add adds u to v.
func (v *Usage) Add(u Usage) {
	v.RenderSeconds += u.RenderSeconds
	v.Frames += u.Frames
	v.JobsFinished += u.JobsFinished
	v.JobsFailed += u.JobsFailed
	v.OutputBytes += u.OutputBytes
}

// usageOf is what a job's change used: its attempt's slot time when its render ended, its
// frames and output when it finished, and its end as a job (chunks are the farm's, not jobs).
func usageOf(prev JobState, j *Job, at time.Time) (u Usage) {
	if prev == JobRendering && j.State != JobRendering && !j.AttemptStartedAt.IsZero() {
		u.RenderSeconds = max(at.Sub(j.AttemptStartedAt), 0).Seconds()
	}
	if j.State != prev {
		switch {
		case j.State == JobFinished && j.Kind == KindChunk:
			u.Frames = int64(j.Frames)
		case j.State == JobFinished:
			u.JobsFinished = 1
			u.OutputBytes = j.OutputBytes
			if !j.Split() { // a split job's frames are its chunks'
				u.Frames = int64(j.Frames)
			}
		case j.State == JobFailed && j.Kind != KindChunk:
			u.JobsFailed = 1
		}
	}
	return u
}

// usageHour is the hour a time falls in, as hours since the Unix epoch.
func usageHour(at time.Time) uint32 { return uint32(max(at.Unix(), 0) / 3600) }

// usageKey is hour + team + engine.
func usageKey(hour uint32, team ulid.ULID, engine string) []byte {
	return append(binary.BigEndian.AppendUint32(nil, hour), append(team[:], engine...)...)
}

// addUsage adds a job change's usage to its hour, team and engine when the transaction commits.
func (t *txn) addUsage(prev JobState, j *Job, at time.Time) {
	u := usageOf(prev, j, at)
	if u == (Usage{}) {
		return
	}
	if t.usage == nil {
		t.usage = make(map[string]Usage)
	}
	k := string(usageKey(usageHour(at), j.TeamID, j.Engine))
	v := t.usage[k]
	v.Add(u)
	t.usage[k] = v
}

// flushUsage writes the usage added in this transaction.
func (t *txn) flushUsage() error {
	b := t.bucket(bucketUsage)
	for k, u := range t.usage {
		stored := decodeUsage(t.get(bucketUsage, []byte(k)))
		stored.Add(u)
		if err := b.Put([]byte(k), encodeUsage(stored)); err != nil {
			return err
		}
	}
	clear(t.usage)
	return nil
}

// encodeUsage writes render milliseconds, frames, jobs finished, jobs failed and output bytes.
func encodeUsage(u Usage) []byte {
	b := make([]byte, 0, 40)
	for _, v := range []int64{int64(u.RenderSeconds * 1000), u.Frames, u.JobsFinished, u.JobsFailed, u.OutputBytes} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func decodeUsage(raw []byte) Usage {
	if len(raw) < 40 {
		return Usage{}
	}
	at := func(i int) int64 { return int64(binary.BigEndian.Uint64(raw[8*i:])) }
	return Usage{RenderSeconds: float64(at(0)) / 1000, Frames: at(1), JobsFinished: at(2), JobsFailed: at(3), OutputBytes: at(4)}
}

// UsageRecord is one hour of one team's usage of one engine.
type UsageRecord struct {
	Hour   time.Time
	Team   ulid.ULID
	Engine string
	Usage
}

// Usage reads the usage of the hours from from (its hour included) to before to, of one team
// (every team's when team is zero), in hour order.
func (s *Store) Usage(from, to time.Time, team ulid.ULID) (out []UsageRecord, err error) {
	err = s.view(func(t *txn) error {
		c := t.bucket(bucketUsage).Cursor()
		end := binary.BigEndian.AppendUint32(nil, usageHour(to.Add(time.Hour-1)))
		for k, v := c.Seek(binary.BigEndian.AppendUint32(nil, usageHour(from))); k != nil && bytes.Compare(k[:4], end) < 0; k, v = c.Next() {
			if len(k) < 20 {
				continue
			}
			r := UsageRecord{Hour: time.Unix(int64(binary.BigEndian.Uint32(k))*3600, 0).UTC(), Team: ulidAt(k[4:]), Engine: string(k[20:]),
				Usage: decodeUsage(v)}
			if team == (ulid.ULID{}) || r.Team == team {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, err
}

// maxUsagePrune bounds the hours one retention step removes.
const maxUsagePrune = 10_000

// pruneUsage removes the usage of the hours before the cutoff's, up to maxUsagePrune of them
// (the rest go at the next sweeps).
func (t *txn) pruneUsage(cutoff time.Time) error {
	limit := binary.BigEndian.AppendUint32(nil, usageHour(cutoff))
	c := t.bucket(bucketUsage).Cursor()
	var old [][]byte
	for k, _ := c.First(); k != nil && bytes.Compare(k[:min(4, len(k))], limit) < 0 && len(old) < maxUsagePrune; k, _ = c.Next() {
		old = append(old, bytes.Clone(k))
	}
	for _, k := range old {
		if err := t.bucket(bucketUsage).Delete(k); err != nil {
			return err
		}
	}
	return nil
}
