package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// userBuckets numbers the teams' own buckets the tests make.
var userBuckets atomic.Int64

// teamBucket makes a bucket on the tests' S3 server standing for a team's own bucket, named in
// its jobs' upload params, and returns its name and a way to read an object of it.
func teamBucket(t *testing.T) (endpoint, accessKey, secretKey, name string, read func(key string) (*s3.GetObjectOutput, []byte)) {
	t.Helper()
	srv := testBucket(t)
	name = fmt.Sprintf("team-bucket-%d", userBuckets.Add(1))
	if err := srv.NewBucket(name); err != nil {
		t.Fatal(err)
	}
	read = func(key string) (*s3.GetObjectOutput, []byte) {
		t.Helper()
		obj, err := srv.Client().GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(name), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("%s is not in the bucket: %v", key, err)
		}
		defer obj.Body.Close()
		data, err := io.ReadAll(obj.Body)
		if err != nil {
			t.Fatal(err)
		}
		return obj, data
	}
	return srv.Endpoint, srv.AccessKey, srv.SecretKey, name, read
}

// TestOutputGoesToTheJobsOwnBucket: with upload params, the node uploads the output to the
// client's S3-compatible bucket, with the secret key taken from the team's secrets at dispatch
// time.
func TestOutputGoesToTheJobsOwnBucket(t *testing.T) {
	endpoint, accessKey, secretKey, name, read := teamBucket(t)
	c := startCoordinator(t, options{slots: 1})
	c.control.answerAll(finishAll)
	acme := c.team("acme")
	tplID := acme.uploadTemplate(inspection())
	acme.must(http.MethodPut, "/api/v2/secrets", map[string]string{"name": "S3_SECRET", "value": secretKey}, http.StatusCreated, nil)
	b := renderJob(tplID)
	b["upload"] = map[string]any{"prefix": "campaign/2026", "provider": "s3", "params": map[string]any{
		"endpoint": endpoint, "region": "us-east-1", "bucket": name, "acl": "public-read",
		"accessKeyId": accessKey, "accessKeySecret": "${secret.S3_SECRET}"}}
	var cr created
	acme.must(http.MethodPost, "/api/v2/jobs", b, http.StatusCreated, &cr)
	key := "campaign/2026/" + cr.ID + ".mp4"
	if cr.OutputURL != endpoint+"/"+name+"/"+key {
		t.Fatalf("outputUrl %s, want the bucket's URL of %s", cr.OutputURL, key)
	}
	c.waitJob(cr.ID, "finished")
	obj, data := read(key)
	if !strings.Contains(string(data), cr.ID) || aws.ToString(obj.ContentType) != "video/mp4" {
		t.Fatalf("object %q (%s)", data, aws.ToString(obj.ContentType))
	}
	if j := acme.job(cr.ID); j.OutputURL != cr.OutputURL {
		t.Fatalf("job outputUrl %s", j.OutputURL)
	}
	if strings.Contains(c.stderr.String(), secretKey) {
		t.Fatal("the secret reached the log")
	}
}
