package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// TestOutputGoesToTheJobsOwnBucket: with upload params, the node uploads the output to the
// client's S3-compatible bucket (a real S3 protocol server here), with the secret key taken from
// the team's secrets at dispatch time.
func TestOutputGoesToTheJobsOwnBucket(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("renders"); err != nil {
		t.Fatal(err)
	}
	s3 := httptest.NewServer(gofakes3.New(backend).Server())
	defer s3.Close()

	c := startCoordinator(t, options{slots: 1})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	acme.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "S3_SECRET", "value": "very-secret"}, http.StatusCreated, nil)
	b := renderJob(tplID)
	b["upload"] = map[string]any{"prefix": "campaign/2026", "provider": "s3", "params": map[string]any{
		"endpoint": s3.URL, "region": "us-east-1", "bucket": "renders", "acl": "public-read",
		"accessKeyId": "AKIDEXAMPLE", "accessKeySecret": "${secret.S3_SECRET}"}}
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &cr)
	key := "campaign/2026/" + cr.ID + ".mp4"
	if cr.OutputURL != s3.URL+"/renders/"+key {
		t.Fatalf("outputUrl %s, want the bucket's URL of %s", cr.OutputURL, key)
	}
	c.waitJob(cr.ID, "finished")
	obj, err := backend.GetObject("renders", key, nil)
	if err != nil {
		t.Fatalf("the output is not in the bucket: %v", err)
	}
	defer obj.Contents.Close()
	data, _ := io.ReadAll(obj.Contents)
	if !strings.Contains(string(data), cr.ID) || obj.Metadata["Content-Type"] != "video/mp4" {
		t.Fatalf("object %q (%v)", data, obj.Metadata)
	}
	if j := acme.job(cr.ID); j.OutputURL != cr.OutputURL {
		t.Fatalf("job outputUrl %s", j.OutputURL)
	}
	if strings.Contains(c.stderr.String(), "very-secret") {
		t.Fatal("the secret reached the log")
	}
}
