package persistence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
)

// AnswerTTL is how long the answer to a creation made with an Idempotency-Key is kept: a retry
// within it gets that answer again instead of creating twice.
const AnswerTTL = 24 * time.Hour

// Answer is what a creation made with an Idempotency-Key answered.
type Answer struct {
	TeamID ulid.ULID `json:"teamId"`
	Key    string    `json:"key"`
	// RequestHash tells the same request from another one sent with the same key.
	RequestHash string    `json:"requestHash"`
	Status      int       `json:"status"`
	Body        []byte    `json:"body"`
	At          time.Time `json:"at"`
}

// AnsweredError is CreateJobs' refusal when its key was answered within AnswerTTL.
type AnsweredError struct{ Answer *Answer }

func (e *AnsweredError) Error() string {
	return fmt.Sprintf("idempotency key %q was answered at %s", e.Answer.Key, e.Answer.At.UTC().Format(time.RFC3339))
}

// answerKey is team + sha256(key): keys are the client's, of any length up to the header's cap.
func answerKey(team ulid.ULID, key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return append(id(team), sum[:]...)
}

// An answer is stored as the Unix nanoseconds it was made at (8 bytes), then its JSON: the sweep
// reads the time alone, however large the answer.

func (t *txn) putAnswer(a *Answer) error {
	raw, err := json.Marshal(a)
	if err != nil {
		return err
	}
	value := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(raw)), uint64(a.At.UnixNano()))
	return t.bucket(bucketAnswers).Put(answerKey(a.TeamID, a.Key), append(value, raw...))
}

func answerTime(value []byte) time.Time {
	if len(value) < 8 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(value)))
}

// answered returns the live answer kept for a key at time at (nil when none).
func (t *txn) answered(team ulid.ULID, key string, at time.Time) (*Answer, error) {
	raw := t.get(bucketAnswers, answerKey(team, key))
	if raw == nil || at.Sub(answerTime(raw)) >= AnswerTTL {
		return nil, nil
	}
	a := new(Answer)
	if err := json.Unmarshal(raw[8:], a); err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	return a, nil
}

// forgetAnswers removes, among up to max answers after the key after, those older than before;
// it returns where the next step starts (nil at the end).
func (t *txn) forgetAnswers(before time.Time, after []byte, max int) ([]byte, int, error) {
	b := t.bucket(bucketAnswers)
	c := b.Cursor()
	k, v := firstAfter(c, after)
	var old [][]byte
	var last []byte
	seen := 0
	for ; k != nil && seen < max; k, v = c.Next() {
		seen++
		last = bytes.Clone(k)
		if answerTime(v).Before(before) {
			old = append(old, last)
		}
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return nil, 0, err
		}
	}
	if seen < max {
		last = nil
	}
	return last, len(old), nil
}
