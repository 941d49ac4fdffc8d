package persistence

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/renderer"
)

// TestARetriedRequestIsTheRequestThatMadeTheJob: a retry asks again for everything the first
// request asked (its pool and limits too, which decide where and under which licences it
// renders), for a job with a nested job and for a split job; only the retry-of tag is new.
// Between them the two requests set every field of JobRequest, so a field added to it and left
// out of the retry fails here.
func TestARetriedRequestIsTheRequestThatMadeTheJob(t *testing.T) {
	team := ulid.Make()
	frames := renderer.Frames{Start: 1, End: 48, Range: true}
	base := func() *JobRequest {
		return &JobRequest{
			Kind: KindRender, TemplateID: ulid.Make(), Engine: "lottie",
			Spec: JobSpec{Composition: "main", Settings: renderer.Settings{Type: "video", Frames: &frames},
				Assets: []renderer.Asset{{Type: "data", LayerName: "Title", Property: "Source Text", Value: json.RawMessage(`"Hi"`)}}},
			Priority: 7, Tags: []string{"promo"}, MissingFonts: []string{"Inter.ttf"}, Unsplit: "one frame a chunk at most",
			Name: "spot 30s", Pool: "gpu", Limits: []string{"ae-licence"}, Frames: 48,
		}
	}
	nested := base()
	child := base()
	child.Name, child.Tags = "", nil
	nested.Spec.Assets = append(nested.Spec.Assets, renderer.Asset{Type: "video", LayerName: "Clip"})
	nested.Children, nested.ChildAsset = []*JobRequest{child}, []int{1}
	split := base()
	split.Chunks = []renderer.Frames{{Start: 1, End: 24, Range: true}, {Start: 25, End: 48, Range: true}}
	split.ChunkFrames = 24

	set := reflect.New(reflect.TypeFor[JobRequest]()).Elem()
	for _, q := range []*JobRequest{nested, split} {
		v := reflect.ValueOf(q).Elem()
		for i := range v.NumField() {
			if !v.Field(i).IsZero() {
				set.Field(i).Set(v.Field(i))
			}
		}
	}
	for i := range set.NumField() {
		if set.Field(i).IsZero() {
			t.Fatalf("no request of this test sets JobRequest.%s: set it, so that the retry is checked to keep it", set.Type().Field(i).Name)
		}
	}

	s := openTestStore(t, "")
	for name, q := range map[string]*JobRequest{"nested": nested, "split": split} {
		t.Run(name, func(t *testing.T) {
			records := q.Records(team, ulid.ULID{}, 0, ulid.Make)
			storeJobs(t, s, records)
			again, err := s.RetryRequest(team, records[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			want := *q
			want.Tags = append(append([]string(nil), q.Tags...), RetryTagPrefix+records[0].ID.String())
			if !reflect.DeepEqual(again, &want) {
				t.Fatalf("the retry asks\n%+v\nthe first request asked\n%+v", again, &want)
			}
		})
	}
}
