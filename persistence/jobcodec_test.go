package persistence

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/renderer"
)

// fill sets every stored field of v (a pointer) to a value other than its zero, so that a field
// the codec forgets comes back different.
func fill(t *testing.T, rng *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, rng, v.Elem())
	case reflect.Struct:
		switch v.Interface().(type) {
		case time.Time:
			v.Set(reflect.ValueOf(time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC()))
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || strings.HasPrefix(f.Tag.Get("json"), "-") {
				continue
			}
			fill(t, rng, v.Field(i))
		}
	case reflect.Array: // ULIDs
		for i := range v.Len() {
			v.Index(i).SetUint(uint64(rng.IntN(256)))
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeOf(json.RawMessage{}) {
			v.SetBytes([]byte(`{"n":` + string(rune('1'+rng.IntN(9))) + `}`))
			return
		}
		n := 1 + rng.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range s.Len() {
			fill(t, rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 1 + rng.IntN(3) {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, rng, k)
			fill(t, rng, e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.String:
		v.SetString(strings.Repeat("é", 1+rng.IntN(4)) + string(rune('a'+rng.IntN(26))))
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(rng.Int64N(1<<40) - 1<<39)
	case reflect.Uint8:
		v.SetUint(uint64(1 + rng.IntN(200)))
	case reflect.Float64:
		v.SetFloat(rng.Float64() * 100)
	case reflect.Bool:
		v.SetBool(true)
	default:
		t.Fatalf("the filler does not know %s: teach it, and the codec", v.Type())
	}
}

// TestJobCodecKeepsEveryField: a job with every field set, and jobs with empty and missing lists,
// come back equal from the binary form.
func TestJobCodecKeepsEveryField(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 200 {
		j := new(Job)
		fill(t, rng, reflect.ValueOf(j).Elem())
		got, err := decodeJob(encodeJob(j))
		if err != nil || !reflect.DeepEqual(got, j) {
			t.Fatalf("round trip:\n got %+v, %v\nwant %+v", got, err, j)
		}
	}
	for _, j := range []*Job{{}, {Tags: []string{}, Children: []ulid.ULID{}, Spec: JobSpec{Assets: nil, Webhook: &Webhook{Headers: map[string]string{}}}}} {
		if got, err := decodeJob(encodeJob(j)); err != nil || !reflect.DeepEqual(got, j) {
			t.Fatalf("round trip of %+v: %+v, %v", j, got, err)
		}
	}
}

// TestJobCodecReadsJSONRecords: records stored as JSON by earlier releases still read.
func TestJobCodecReadsJSONRecords(t *testing.T) {
	j := new(Job)
	fill(t, rand.New(rand.NewPCG(1, 1)), reflect.ValueOf(j).Elem())
	j.State = JobFinished
	j.Spec.Settings.Frames = &renderer.Frames{Start: 1, End: 5, Range: true} // as validation takes them
	raw, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeJob(raw)
	if err != nil || !reflect.DeepEqual(got, j) {
		t.Fatalf("JSON record:\n got %+v, %v\nwant %+v", got, err, j)
	}
}

// FuzzDecodeJob: no stored bytes make decoding panic or allocate beyond the record; whatever
// decodes encodes to a record that decodes to the same job.
func FuzzDecodeJob(f *testing.F) {
	j := new(Job)
	fill(&testing.T{}, rand.New(rand.NewPCG(3, 4)), reflect.ValueOf(j).Elem())
	f.Add(encodeJob(j))
	f.Add(encodeJob(&Job{}))
	f.Add([]byte{jobCodecVersion})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 0 && raw[0] == '{' {
			return // JSON records are encoding/json's to parse
		}
		j, err := decodeJob(raw)
		if err != nil {
			return
		}
		again, err := decodeJob(encodeJob(j))
		if err != nil || !reflect.DeepEqual(again, j) {
			t.Fatalf("re-encoded record decodes to %+v, %v; want %+v", again, err, j)
		}
	})
}

func BenchmarkDecodeJob(b *testing.B) {
	j := new(Job)
	fill(&testing.T{}, rand.New(rand.NewPCG(5, 6)), reflect.ValueOf(j).Elem())
	raw := encodeJob(j)
	asJSON, _ := json.Marshal(j)
	b.Run("binary", func(b *testing.B) {
		for b.Loop() {
			decodeJob(raw)
		}
	})
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			decodeJob(asJSON)
		}
	})
}
