package actors_test

import (
	"archive/zip"
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/framefarm/framefarm/actors"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

// heldInspector reads nothing until the test lets it: started tells that an inspection began.
type heldInspector struct {
	started chan struct{}
	release chan struct{}
}

func (h heldInspector) Inspect(ctx context.Context, _, _ string) (*renderer.Inspection, error) {
	h.started <- struct{}{}
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &renderer.Inspection{Engines: []string{renderer.EngineLottie}, Compositions: []renderer.Composition{{Name: "main"}}}, nil
}

// TestASmallUploadIsAnsweredOnceInspected: an upload up to InspectBeforeAnswerBytes is answered
// when its inspection ended (the client that polls next sees the end), or, past
// InspectBeforeAnswerWait, with the template still processing; a larger one at once.
func TestASmallUploadIsAnsweredOnceInspected(t *testing.T) {
	inspector := heldInspector{started: make(chan struct{}, 4), release: make(chan struct{})}
	var zipFile bytes.Buffer
	zw := zip.NewWriter(&zipFile)
	w, _ := zw.Create("data.json")
	w.Write([]byte(`{}`))
	zw.Close()
	f := newFixtureWith(t, actors.Config{InspectBeforeAnswerBytes: int64(zipFile.Len()), InspectBeforeAnswerWait: 5 * time.Second},
		func(d *actors.Deps) { d.Inspector = inspector })

	upload := func(content []byte) chan persistence.TemplateStatus {
		t.Helper()
		now := f.clock.Now()
		tpl := &persistence.Template{ID: f.ids.New(now), TeamID: f.team, Type: renderer.TemplateZip, DisplayName: "t",
			Status: persistence.TemplateAwaitingUpload, UploadWindow: 1, CreatedAt: now, UpdatedAt: now}
		if err := f.coord.CreateTemplate(tpl); err != nil {
			t.Fatal(err)
		}
		file, err := f.deps.Objects.Put(persistence.TemplateFileKey(tpl.ID, f.ids.New(now)), bytes.NewReader(content), int64(len(content)))
		if err != nil {
			t.Fatal(err)
		}
		answered := make(chan persistence.TemplateStatus, 1)
		go func() {
			got, err := f.coord.TemplateFileArrived(f.team, tpl.ID, 1, file)
			if err != nil {
				t.Error(err)
				answered <- ""
				return
			}
			answered <- got.Status
		}()
		<-inspector.started
		return answered
	}

	// Small: no answer while the inspection runs, the end with the answer.
	answered := upload(zipFile.Bytes())
	// Its wait's timer is taken off the clock's record here, so the next upload's is the one
	// the clock is moved past below (on a loaded machine it may be set after the upload began).
	f.waitArmed(5 * time.Second)
	select {
	case got := <-answered:
		t.Fatalf("answered %s while the inspection ran", got)
	default:
	}
	inspector.release <- struct{}{}
	if got := <-answered; got != persistence.TemplateUploaded {
		t.Fatalf("answered %s, want uploaded", got)
	}

	// Small, but the inspection takes longer than the wait: answered processing then.
	answered = upload(zipFile.Bytes())
	f.advanceWhenArmed(5 * time.Second)
	if got := <-answered; got != persistence.TemplateProcessing {
		t.Fatalf("past the wait: answered %s, want processing", got)
	}
	inspector.release <- struct{}{}

	// Larger than InspectBeforeAnswerBytes: answered at once.
	answered = upload(append(zipFile.Bytes(), 0))
	if got := <-answered; got != persistence.TemplateProcessing {
		t.Fatalf("a larger upload: answered %s, want processing", got)
	}
	inspector.release <- struct{}{}
}
