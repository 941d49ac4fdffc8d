package api

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

// viewFiller fills every exported field of a view, however deep, with values chosen to stress
// an encoder: escapes, invalid UTF-8, raw values with spaces or invalid, floats at the edges of
// their forms, times out of range, nil and empty lists. A field added to a view is filled too,
// so an encoder that leaves it out fails the comparison.
type viewFiller struct {
	rng *rand.Rand
	// depth is how deep fill is in pointers; past a few, it leaves them nil (views nest).
	depth   int
	strings []string
	raws    []json.RawMessage
}

func newViewFiller(seed uint64, extraString string, extraRaw []byte) *viewFiller {
	return &viewFiller{
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		strings: []string{"", "plain", "01M8CHH9BWXP2YQEQWXG8AE4B8", "<a href='x'>&amp;</a>", "quote\" back\\slash /",
			"ctl\x00\x01\x1f\x7f", "tab\tnl\nret\r\b\f", "\u2028line\u2029para", "bad\xff\xfeutf8", "cut\xe2\x80",
			"é漢字🎬", "https://farm.example/files/a b?exp=1&sig=ab", extraString},
		raws: []json.RawMessage{json.RawMessage(`"hi"`), json.RawMessage(`{"a": [1, 2], "b" : "c d"}`),
			json.RawMessage("  true \n"), json.RawMessage(`"<&>\u2028"`), json.RawMessage(`null`),
			json.RawMessage(`-123.5e10`), json.RawMessage(`[]`), json.RawMessage(`{bad`), json.RawMessage(extraRaw)},
	}
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
)

func (f *viewFiller) fill(v reflect.Value) {
	switch {
	case v.Type() == rawMessageType:
		if f.rng.IntN(4) > 0 {
			v.Set(reflect.ValueOf(f.raws[f.rng.IntN(len(f.raws))]))
		}
		return
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(f.time()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.strings[f.rng.IntN(len(f.strings))])
	case reflect.Int, reflect.Int64:
		v.SetInt([]int64{0, 1, -1, 42, math.MaxInt32, math.MinInt64}[f.rng.IntN(6)])
	case reflect.Bool:
		v.SetBool(f.rng.IntN(2) == 0)
	case reflect.Float64:
		v.SetFloat(f.float())
	case reflect.Pointer:
		if f.depth < 4 && f.rng.IntN(4) > 0 {
			p := reflect.New(v.Type().Elem())
			f.depth++
			f.fill(p.Elem())
			f.depth--
			v.Set(p)
		}
	case reflect.Slice:
		switch n := f.rng.IntN(5); n {
		case 0: // nil
		default:
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range n - 1 {
				f.fill(s.Index(i))
			}
			v.Set(s)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			// Embedded structs (the generated storedFields) hold exported fields too.
			if field := v.Type().Field(i); field.IsExported() || field.Anonymous {
				f.fill(v.Field(i))
			}
		}
	default:
		panic("viewFiller cannot fill a " + v.Type().String())
	}
}

func (f *viewFiller) float() float64 {
	edges := []float64{0, math.Copysign(0, -1), 1, 0.5, 100, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, -2.5e-10,
		123456789.123, math.MaxFloat64, math.SmallestNonzeroFloat64, 1.0 / 3}
	switch f.rng.IntN(40) {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1)
	}
	if f.rng.IntN(2) == 0 {
		return edges[f.rng.IntN(len(edges))]
	}
	return (f.rng.Float64() - 0.5) * math.Pow(10, float64(f.rng.IntN(50)-25))
}

func (f *viewFiller) time() time.Time {
	switch f.rng.IntN(30) {
	case 0:
		return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	case 1:
		return time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	case 2:
		return time.Time{}
	}
	return time.Unix(f.rng.Int64N(4e9), f.rng.Int64N(1e9)*int64(f.rng.IntN(2))).UTC()
}

// checkViewsEncodeLikeEncodingJSON fills a job view, a page of them and a minimal page, and
// requires the answers' bytes (or their failing) to be encoding/json's.
func checkViewsEncodeLikeEncodingJSON(t *testing.T, seed uint64, extraString string, extraRaw []byte) {
	f := newViewFiller(seed, extraString, extraRaw)
	var single jobView
	var page jobPage
	var minimal minimalJobPage
	var created createdJob
	for _, v := range []any{&single, &page, &minimal, &created} {
		f.fill(reflect.ValueOf(v).Elem())
		// encoding/json sees none of the views' own encoders: they are not json.Marshalers.
		want, wantErr := persistence.MarshalExact(v)
		for name, encode := range map[string]func(any) ([]byte, error){
			"answer":  func(v any) ([]byte, error) { return encodeAnswer(new(bytes.Buffer), v) },
			"marshal": marshal,
		} {
			got, gotErr := encode(v)
			if (gotErr != nil) != (wantErr != nil) {
				t.Fatalf("seed %d, %T, %s: error %v, encoding/json's %v", seed, v, name, gotErr, wantErr)
			}
			if wantErr == nil && !bytes.Equal(got, want) {
				t.Fatalf("seed %d, %T, %s:\n got %s\nwant %s", seed, v, name, got, want)
			}
		}
	}
}

// TestJobViewsEncodeLikeEncodingJSON: the JSON job views write is byte for byte encoding/json's,
// for every field filled in every way the filler knows.
func TestJobViewsEncodeLikeEncodingJSON(t *testing.T) {
	for seed := range uint64(5000) {
		checkViewsEncodeLikeEncodingJSON(t, seed, "", nil)
	}
}

// FuzzJobViewJSON: the same with strings and raw values the fuzzer makes up.
func FuzzJobViewJSON(f *testing.F) {
	f.Add(uint64(1), "a\u2028b\x00", []byte(`{"k": "v"}`))
	f.Add(uint64(2), "\xed\xa0\x80", []byte(`1e400`))
	f.Fuzz(checkViewsEncodeLikeEncodingJSON)
}

// BenchmarkJobPageJSON: a page of 100 full job views, encoded by the views and by encoding/json.
func BenchmarkJobPageJSON(b *testing.B) {
	page := make(jobPage, 100)
	created := time.Date(2026, 11, 26, 18, 22, 55, 356_000_000, time.UTC)
	for i := range page {
		template := "01M8CHGPBFGX7GHAH0PEER63SD"
		page[i] = &jobView{ID: "01M8CHH9BWXP2YQEQWXG8AE4B8", TemplateID: &template, Status: "queued",
			Stats:        &jobStats{CreatedAt: created, UpdatedAt: created.Add(time.Second), TotalAssets: 1, WaitingFor: "being assigned to a render node"},
			OutputURL:    "https://farm.example/files/jobs/01M8CHH9BWXP2YQEQWXG8AE4B8/result.mp4?exp=1795000000&sig=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			storedFields: storedFields{Kind: "render", Tags: []string{"bench", "hot"}, Priority: 5}}
		page[i].Assets = []renderer.Asset{{Type: "text", LayerName: "Title", Value: json.RawMessage(`"Hello"`)}}
	}
	for _, enc := range []struct {
		name   string
		encode func(*bytes.Buffer, any) ([]byte, error)
	}{
		{"views", func(buf *bytes.Buffer, v any) ([]byte, error) { return encodeAnswer(buf, v) }},
		{"encoding-json", func(*bytes.Buffer, any) ([]byte, error) { return persistence.MarshalExact([]*jobView(page)) }},
	} {
		b.Run(enc.name, func(b *testing.B) {
			var buf bytes.Buffer // reused, as request.json's pool does
			for b.Loop() {
				buf.Reset()
				if _, err := enc.encode(&buf, page); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAJobWaitingForTheStorageSaysSo: a queued job whose last attempt the farm's storage failed
// says it waits for the storage, and until when, not for a node; once that time passes it waits
// as any queued job.
func TestAJobWaitingForTheStorageSaysSo(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	views := &JobViews{Clock: clk, Capacities: func() map[string]actors.Capacity {
		return map[string]actors.Capacity{"lottie": {Nodes: 1, Slots: 2, Free: 2}}
	}}
	j := &persistence.Job{State: persistence.JobQueued, Engine: "lottie", Attempts: 3, StorageRetryAt: clk.Now().Add(30 * time.Second)}
	if got := views.waitingFor(j); !strings.Contains(got, "the farm's storage failed attempt 3") || !strings.Contains(got, "12:00:30Z (in 30s)") {
		t.Fatalf("waiting for the storage: %q", got)
	}
	clk.Advance(31 * time.Second)
	if got := views.waitingFor(j); got != "being assigned to a render node" {
		t.Fatalf("once the wait is over: %q", got)
	}
}
