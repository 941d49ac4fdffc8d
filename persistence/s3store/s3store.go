// Package s3store keeps the farm's files in an S3-compatible bucket (AWS S3, SeaweedFS, MinIO,
// Ceph RGW, Garage). The coordinator writes, reads back and deletes with its own credentials, and
// hands render nodes and clients presigned URLs of the objects, so no render output passes
// through it: nodes fetch templates and fonts from the bucket and upload outputs to it, in parts
// above a size.
package s3store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

// Config says which bucket holds the farm's files and how to reach it.
type Config struct {
	// Endpoint is the store's URL; empty: AWS S3 in Region.
	Endpoint string
	Bucket   string
	Region   string
	// Prefix is put before every key inside the bucket.
	Prefix string
	// PathStyle addresses the bucket in the URL's path (most self-hosted stores want it).
	PathStyle bool
	// AccessKeyID and SecretAccessKey, when empty, come from AWS's usual environment and
	// credentials files.
	AccessKeyID, SecretAccessKey string
	// TempDir holds what streams in on its way to the bucket and what is read back from it.
	TempDir string
	// PartSize is the size of each part of an upload above it [64 MiB].
	PartSize int64
	// HTTPClient reaches the store.
	HTTPClient *http.Client
	// Observe, when set, is told of every request to the store: its operation, how long it
	// took and how it ended.
	Observe func(op string, took time.Duration, err error)
}

// Store is a bucket as the farm's object store.
type Store struct {
	cfg     Config
	client  *s3.Client
	presign *s3.PresignClient
}

// minPartSize is the smallest part S3 takes, but for the last.
const minPartSize = 5 << 20

// Open makes a store of cfg's bucket; nothing is asked of the bucket yet (Check does).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("objects.s3.bucket is empty")
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = 64 << 20
	}
	if cfg.PartSize < minPartSize {
		return nil, fmt.Errorf("the part size %d is below the %d bytes S3 takes", cfg.PartSize, minPartSize)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	loads := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(cfg.Region)}
	if cfg.AccessKeyID != "" || cfg.SecretAccessKey != "" {
		loads = append(loads, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("the object store's credentials: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.HTTPClient = cfg.HTTPClient
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(strings.TrimRight(cfg.Endpoint, "/"))
		}
		o.UsePathStyle = cfg.PathStyle
		// Checksums only where an operation requires one: not every S3-compatible store takes
		// the newer trailing checksums.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Store{cfg: cfg, client: client, presign: s3.NewPresignClient(client)}, nil
}

// key is where a farm key lives in the bucket.
func (s *Store) key(key string) *string { return aws.String(s.cfg.Prefix + key) }

// observe reports a request to the store once it has ended with *err; an object found missing
// is an answer, not a failure.
func (s *Store) observe(op string, started time.Time, err *error) {
	if s.cfg.Observe != nil {
		failed := *err
		if errors.Is(failed, persistence.ErrNotFound) {
			failed = nil
		}
		s.cfg.Observe(op, time.Since(started), failed)
	}
}

// Check makes sure the bucket is there and the farm may write, read and delete in it, saying in
// one line what failed: no such bucket, credentials refused, the store out of reach.
func (s *Store) Check(ctx context.Context) error {
	where := s.Describe()
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.cfg.Bucket)}); err != nil {
		return fmt.Errorf("the object store %s: %s", where, explain(err))
	}
	probe := ".framefarm-check/" + fmt.Sprint(time.Now().UnixNano())
	body := []byte("framefarm checks it can write, read and delete here")
	if _, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(probe),
		Body: strings.NewReader(string(body)), ContentLength: aws.Int64(int64(len(body)))}); err != nil {
		return fmt.Errorf("the object store %s refuses a write: %s", where, explain(err))
	}
	got, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(probe)})
	if err == nil {
		var read []byte
		read, err = io.ReadAll(got.Body)
		got.Body.Close()
		if err == nil && string(read) != string(body) {
			err = errors.New("what was read is not what was written")
		}
	}
	if err != nil {
		return fmt.Errorf("the object store %s refuses a read: %s", where, explain(err))
	}
	if err := s.Delete(probe); err != nil {
		return fmt.Errorf("the object store %s refuses a delete: %s", where, explain(err))
	}
	return nil
}

// Describe names the bucket for people: endpoint and bucket.
func (s *Store) Describe() string {
	endpoint := s.cfg.Endpoint
	if endpoint == "" {
		endpoint = "AWS S3 (" + s.cfg.Region + ")"
	}
	return fmt.Sprintf("bucket %q at %s", s.cfg.Bucket, endpoint)
}

// explain turns a store's error into the reason people can act on.
func explain(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchBucket", "NotFound":
			return "no such bucket"
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Forbidden", "InvalidToken", "ExpiredToken":
			return "the credentials are refused (" + apiErr.ErrorCode() + ")"
		}
		return apiErr.ErrorCode() + ": " + apiErr.ErrorMessage()
	}
	var netErr net.Error
	var opErr *net.OpError
	if errors.As(err, &opErr) || errors.As(err, &netErr) {
		return "unreachable: " + opErr.Error()
	}
	return err.Error()
}

// Put streams r into the object at key, failing with persistence.ErrTooLarge past limit bytes.
// The body goes through a temporary file (its size and hash are known before the bucket is
// asked), so the object appears whole or not at all.
func (s *Store) Put(key string, r io.Reader, limit int64) (persistence.StoredFile, error) {
	tmp, err := os.CreateTemp(s.cfg.TempDir, "put-*")
	if err != nil {
		return persistence.StoredFile{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	hash := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, hash), io.LimitReader(r, limit+1))
	if err != nil {
		return persistence.StoredFile{}, err
	}
	if n > limit {
		return persistence.StoredFile{}, persistence.ErrTooLarge
	}
	if err := s.upload(context.Background(), key, tmp, n); err != nil {
		return persistence.StoredFile{}, err
	}
	return persistence.StoredFile{Key: key, Size: n, SHA256: hex.EncodeToString(hash.Sum(nil))}, nil
}

// PutFile uploads the local file at src under key.
func (s *Store) PutFile(key, src string) (persistence.StoredFile, error) {
	f, err := os.Open(src)
	if err != nil {
		return persistence.StoredFile{}, err
	}
	defer f.Close()
	hash := sha256.New()
	size, err := io.Copy(hash, f)
	if err != nil {
		return persistence.StoredFile{}, err
	}
	if err := s.upload(context.Background(), key, f, size); err != nil {
		return persistence.StoredFile{}, err
	}
	return persistence.StoredFile{Key: key, Size: size, SHA256: hex.EncodeToString(hash.Sum(nil))}, nil
}

// upload sends size bytes of f to key: in one request, or in parts above the part size.
func (s *Store) upload(ctx context.Context, key string, f *os.File, size int64) (err error) {
	defer s.observe("put", time.Now(), &err)
	if size <= s.cfg.PartSize {
		_, err = s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key),
			Body: io.NewSectionReader(f, 0, size), ContentLength: aws.Int64(size)})
		return err
	}
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key)})
	if err != nil {
		return err
	}
	var parts []types.CompletedPart
	for offset, number := int64(0), int32(1); offset < size; offset, number = offset+s.cfg.PartSize, number+1 {
		n := min(s.cfg.PartSize, size-offset)
		part, err := s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key), UploadId: created.UploadId,
			PartNumber: aws.Int32(number), Body: io.NewSectionReader(f, offset, n), ContentLength: aws.Int64(n)})
		if err != nil {
			s.abort(ctx, key, *created.UploadId)
			return err
		}
		parts = append(parts, types.CompletedPart{ETag: part.ETag, PartNumber: aws.Int32(number)})
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key),
		UploadId: created.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	return err
}

func (s *Store) abort(ctx context.Context, key, uploadID string) {
	s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key), UploadId: aws.String(uploadID)})
}

// Delete removes the object at key; a missing object is not an error.
func (s *Store) Delete(key string) (err error) {
	defer s.observe("delete", time.Now(), &err)
	_, err = s.client.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key)})
	return err
}

// DeletePrefix removes every object under a key prefix (a folder).
func (s *Store) DeletePrefix(prefix string) (err error) {
	defer s.observe("delete", time.Now(), &err)
	ctx := context.Background()
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: s.key(strings.TrimSuffix(prefix, "/") + "/")})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		if len(page.Contents) == 0 {
			continue
		}
		objects := make([]types.ObjectIdentifier, len(page.Contents))
		for i, o := range page.Contents {
			objects[i] = types.ObjectIdentifier{Key: o.Key}
		}
		out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(s.cfg.Bucket), Delete: &types.Delete{Objects: objects, Quiet: aws.Bool(true)}})
		if err != nil {
			return err
		}
		if len(out.Errors) > 0 {
			return fmt.Errorf("%d objects under %s were not deleted: %s", len(out.Errors), prefix, aws.ToString(out.Errors[0].Message))
		}
	}
	return nil
}

// Head is the size of the object at key; persistence.ErrNotFound when there is none.
func (s *Store) Head(key string) (size int64, err error) {
	defer s.observe("head", time.Now(), &err)
	out, err := s.client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key)})
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "NotFound" || apiErr.ErrorCode() == "NoSuchKey") {
		return 0, persistence.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	return aws.ToInt64(out.ContentLength), nil
}

// Local copies the object at key into a temporary file, for what must read a file (inspection);
// release removes it.
func (s *Store) Local(ctx context.Context, key string) (path string, release func(), err error) {
	defer s.observe("get", time.Now(), &err)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key)})
	if err != nil {
		return "", nil, err
	}
	defer out.Body.Close()
	tmp, err := os.CreateTemp(s.cfg.TempDir, "get-*")
	if err != nil {
		return "", nil, err
	}
	release = func() { os.Remove(tmp.Name()) }
	if _, err := io.Copy(tmp, out.Body); err != nil {
		tmp.Close()
		release()
		return "", nil, err
	}
	if err := tmp.Close(); err != nil {
		release()
		return "", nil, err
	}
	return tmp.Name(), release, nil
}

// URL presigns method (GET or HEAD) on key until expires, for a render node or a client.
func (s *Store) URL(method, key string, expires time.Time) string {
	opts := s3.WithPresignExpires(max(time.Until(expires), time.Second))
	var r *v4.PresignedHTTPRequest
	var err error
	if method == http.MethodHead {
		r, err = s.presign.PresignHeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key)}, opts)
	} else {
		r, err = s.presign.PresignGetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key)}, opts)
	}
	if err != nil {
		return ""
	}
	return r.URL
}

// DownloadURL presigns method (GET or HEAD) on key until expires for a client: the answer says
// the object is a file to save (Content-Disposition: attachment), of the type its name says.
func (s *Store) DownloadURL(method, key string, expires time.Time) string {
	opts := s3.WithPresignExpires(max(time.Until(expires), time.Second))
	disposition := aws.String(`attachment; filename="` + path.Base(key) + `"`)
	contentType := aws.String(renderer.ContentType(path.Ext(key)))
	var r *v4.PresignedHTTPRequest
	var err error
	if method == http.MethodHead {
		r, err = s.presign.PresignHeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key),
			ResponseContentDisposition: disposition, ResponseContentType: contentType}, opts)
	} else {
		r, err = s.presign.PresignGetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key),
			ResponseContentDisposition: disposition, ResponseContentType: contentType}, opts)
	}
	if err != nil {
		return ""
	}
	return r.URL
}

// PartSize is the size of each part of an upload above it.
func (s *Store) PartSize() int64 { return s.cfg.PartSize }

// UploadPlan is where a render node puts an output: one presigned request per part, in order,
// each sent with its headers; UploadID names the multipart upload ("" when there is one part).
type UploadPlan struct {
	UploadID string
	Parts    []PartTarget
}

// PartTarget is the presigned PUT of one part.
type PartTarget struct {
	URL    string
	Header map[string]string
}

// PlanUpload presigns the upload to key of an object whose parts of PartSize bytes have the
// MD5s md5s (base64; one: a single PUT), valid until expires. The store refuses a part whose
// bytes do not match its MD5, so what arrives is what the node hashed.
func (s *Store) PlanUpload(ctx context.Context, key string, md5s []string, expires time.Time) (plan UploadPlan, err error) {
	defer s.observe("plan_upload", time.Now(), &err)
	if len(md5s) == 0 || len(md5s) > 10000 {
		return plan, fmt.Errorf("an upload has 1 to 10,000 parts, not %d", len(md5s))
	}
	opts := s3.WithPresignExpires(max(time.Until(expires), time.Second))
	sign := func(r *v4.PresignedHTTPRequest, err error) error {
		if err != nil {
			return err
		}
		header := map[string]string{}
		for name, values := range r.SignedHeader {
			if !strings.EqualFold(name, "host") && len(values) > 0 {
				header[name] = values[0]
			}
		}
		plan.Parts = append(plan.Parts, PartTarget{URL: r.URL, Header: header})
		return nil
	}
	if len(md5s) == 1 {
		return plan, sign(s.presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key), ContentMD5: aws.String(md5s[0])}, opts))
	}
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key)})
	if err != nil {
		return plan, err
	}
	plan.UploadID = aws.ToString(created.UploadId)
	for i, sum := range md5s {
		err := sign(s.presign.PresignUploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key), UploadId: created.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), ContentMD5: aws.String(sum)}, opts))
		if err != nil {
			s.abort(ctx, key, plan.UploadID)
			return UploadPlan{}, err
		}
	}
	return plan, nil
}

// CompleteUpload joins the parts of a multipart upload, given each part's ETag in order.
func (s *Store) CompleteUpload(ctx context.Context, key, uploadID string, etags []string) (err error) {
	defer s.observe("complete_upload", time.Now(), &err)
	parts := make([]types.CompletedPart, len(etags))
	for i, etag := range etags {
		parts[i] = types.CompletedPart{ETag: aws.String(etag), PartNumber: aws.Int32(int32(i + 1))}
	}
	_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: s.key(key),
		UploadId: aws.String(uploadID), MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	return err
}

// AbortUploads gives up the multipart uploads under prefix that began before before (a node
// that died mid-upload leaves its parts behind) and reports how many.
func (s *Store) AbortUploads(ctx context.Context, prefix string, before time.Time) (aborted int, err error) {
	defer s.observe("abort_uploads", time.Now(), &err)
	input := &s3.ListMultipartUploadsInput{Bucket: aws.String(s.cfg.Bucket), Prefix: s.key(prefix)}
	for {
		page, err := s.client.ListMultipartUploads(ctx, input)
		if err != nil {
			return aborted, err
		}
		for _, u := range page.Uploads {
			if u.Initiated != nil && u.Initiated.Before(before) {
				s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.cfg.Bucket), Key: u.Key, UploadId: u.UploadId})
				aborted++
			}
		}
		if !aws.ToBool(page.IsTruncated) {
			return aborted, nil
		}
		input.KeyMarker, input.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

// Usage counts the objects under prefix and the bytes they hold.
func (s *Store) Usage(ctx context.Context, prefix string) (objects, bytes int64, err error) {
	defer s.observe("list", time.Now(), &err)
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: s.key(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return objects, bytes, err
		}
		for _, o := range page.Contents {
			objects++
			bytes += aws.ToInt64(o.Size)
		}
	}
	return objects, bytes, nil
}

// Base is what every URL of the store's objects starts with: render nodes fetch the farm's own
// files from there without the guard that keeps users' URLs off private addresses.
func (s *Store) Base() string {
	u, err := url.Parse(s.URL(http.MethodGet, "x", time.Now().Add(time.Minute)))
	if err != nil {
		return ""
	}
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(u.Path, path.Base(u.Path))
	u.RawPath = ""
	return u.String()
}
