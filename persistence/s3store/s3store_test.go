package s3store_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/persistence/porttest"
	"github.com/framefarm/framefarm/persistence/s3store"
	"github.com/framefarm/framefarm/persistence/s3store/s3test"
)

func open(t *testing.T, srv *s3test.Server, change func(*s3store.Config)) *s3store.Store {
	t.Helper()
	cfg := s3store.Config{Endpoint: srv.Endpoint, Bucket: srv.Bucket, PathStyle: true, AccessKeyID: srv.AccessKey,
		SecretAccessKey: srv.SecretKey, TempDir: t.TempDir(), PartSize: 5 << 20, Prefix: "farm/"}
	if change != nil {
		change(&cfg)
	}
	s, err := s3store.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCheckSaysWhatIsWrong: a start's check passes on a bucket the farm may use, and otherwise
// names the cause: no such bucket, credentials refused, the store out of reach.
func TestCheckSaysWhatIsWrong(t *testing.T) {
	srv := s3test.Start(t)
	ctx := context.Background()
	if err := open(t, srv, nil).Check(ctx); err != nil {
		t.Fatalf("a good bucket: %v", err)
	}
	for _, tc := range []struct {
		name, want string
		change     func(*s3store.Config)
	}{
		{"no such bucket", "no such bucket", func(c *s3store.Config) { c.Bucket = "not-there" }},
		{"wrong secret", "credentials are refused", func(c *s3store.Config) { c.SecretAccessKey = "wrong-secret-0123456789" }},
		{"unreachable", "unreachable", func(c *s3store.Config) { c.Endpoint = "http://" + porttest.FreeAddr(t) }},
	} {
		err := open(t, srv, tc.change).Check(ctx)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s: %v, want one line saying %q", tc.name, err, tc.want)
		}
	}
}

// TestObjectsGoInAndOut: what is put is there (size, hash), reads back as a local file, in one
// request or in parts; deletes by key and by folder; a too large body is refused and leaves
// nothing.
func TestObjectsGoInAndOut(t *testing.T) {
	srv := s3test.Start(t)
	s := open(t, srv, nil)
	big := bytes.Repeat([]byte("0123456789abcdef"), 12<<16) // 12 MiB: three parts
	for key, body := range map[string][]byte{"templates/t1/f1": []byte("small"), "outputs/j1/1/out.mp4": big} {
		file, err := s.Put(key, bytes.NewReader(body), 1<<30)
		if err != nil || file.Size != int64(len(body)) || file.Key != key {
			t.Fatalf("put %s: %+v %v", key, file, err)
		}
		if size, err := s.Head(key); err != nil || size != int64(len(body)) {
			t.Fatalf("head %s: %d %v", key, size, err)
		}
		path, release, err := s.Local(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, body) {
			t.Fatalf("%s read back %d bytes", key, len(got))
		}
		release()
	}
	if _, err := s.Put("fonts/x", strings.NewReader("too long"), 3); !errors.Is(err, persistence.ErrTooLarge) {
		t.Fatalf("a body past its limit: %v", err)
	}
	if _, err := s.Head("fonts/x"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("a refused body left an object: %v", err)
	}
	if err := s.DeletePrefix("outputs/j1/"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("templates/t1/f1"); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"templates/t1/f1", "outputs/j1/1/out.mp4"} {
		if _, err := s.Head(key); !errors.Is(err, persistence.ErrNotFound) {
			t.Fatalf("%s after its delete: %v", key, err)
		}
	}
	// Deleting what is not there is no error (a delete retried after it went through).
	if err := s.Delete("templates/t1/f1"); err != nil {
		t.Fatal(err)
	}
}

// TestPlannedUploadsTakeOnlyTheBytesHashed: a node's upload through a plan lands part by part
// and is whole once completed; a part whose bytes are not those hashed is refused, and sending
// it again with the right bytes goes on from there; an unfinished upload is aborted later.
func TestPlannedUploadsTakeOnlyTheBytesHashed(t *testing.T) {
	srv := s3test.Start(t)
	s := open(t, srv, nil)
	ctx := context.Background()
	body := bytes.Repeat([]byte("frame"), 3<<20) // 15 MiB: parts of 5 MiB
	var md5s []string
	for off := 0; off < len(body); off += 5 << 20 {
		sum := md5.Sum(body[off:min(off+5<<20, len(body))])
		md5s = append(md5s, base64.StdEncoding.EncodeToString(sum[:]))
	}
	key := "outputs/j2/1/out.mp4"
	plan, err := s.PlanUpload(ctx, key, md5s, time.Now().Add(time.Hour))
	if err != nil || plan.UploadID == "" || len(plan.Parts) != 3 {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	put := func(i int, part []byte) (string, int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPut, plan.Parts[i].URL, bytes.NewReader(part))
		for k, v := range plan.Parts[i].Header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header.Get("ETag"), resp.StatusCode
	}
	part := func(i int) []byte { return body[i*5<<20 : min((i+1)*5<<20, len(body))] }
	var etags []string
	for i := range 3 {
		if i == 1 {
			damaged := bytes.Clone(part(i))
			damaged[0] ^= 1
			if _, status := put(i, damaged); status/100 == 2 {
				t.Fatalf("a part whose bytes differ from their MD5 was taken (%d)", status)
			}
		}
		etag, status := put(i, part(i))
		if status != http.StatusOK {
			t.Fatalf("part %d: %d", i, status)
		}
		etags = append(etags, etag)
	}
	if _, err := s.Head(key); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("an upload not completed is already an object: %v", err)
	}
	if err := s.CompleteUpload(ctx, key, plan.UploadID, etags); err != nil {
		t.Fatal(err)
	}
	if size, err := s.Head(key); err != nil || size != int64(len(body)) {
		t.Fatalf("completed: %d %v", size, err)
	}

	// One part: a single presigned PUT.
	one, err := s.PlanUpload(ctx, "outputs/j3/1/still.png", md5s[:1], time.Now().Add(time.Hour))
	if err != nil || one.UploadID != "" || len(one.Parts) != 1 {
		t.Fatalf("one part: %+v %v", one, err)
	}
	// Left unfinished, a multipart upload is aborted by the janitor's sweep.
	if _, err := s.PlanUpload(ctx, "outputs/j4/1/out.mp4", md5s, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.AbortUploads(ctx, "outputs/", time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("aborted %d unfinished uploads, %v; want 1", n, err)
	}
}

// TestRequestsAreObservedWithHowTheyEnded: the metrics hear of a failed request as failed, and
// of an object found missing as an answer.
func TestRequestsAreObservedWithHowTheyEnded(t *testing.T) {
	type seen struct {
		op     string
		failed bool
	}
	var got []seen
	observe := func(op string, _ time.Duration, err error) { got = append(got, seen{op, err != nil}) }
	down, err := s3store.Open(context.Background(), s3store.Config{Endpoint: "http://" + porttest.FreeAddr(t),
		Bucket: "b", PathStyle: true, AccessKeyID: "k", SecretAccessKey: "s", TempDir: t.TempDir(),
		HTTPClient: &http.Client{Timeout: 5 * time.Second}, Observe: observe})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := down.Head("fonts/x"); err == nil {
		t.Fatal("a head at a closed port succeeded")
	}
	if want := []seen{{"head", true}}; len(got) != 1 || got[0] != want[0] {
		t.Fatalf("observed %v, want %v", got, want)
	}
	srv := s3test.Start(t)
	got = nil
	up := open(t, srv, func(c *s3store.Config) { c.Observe = observe })
	if _, err := up.Head("fonts/missing"); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatal(err)
	}
	if want := []seen{{"head", false}}; len(got) != 1 || got[0] != want[0] {
		t.Fatalf("observed %v, want %v", got, want)
	}
}
