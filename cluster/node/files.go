package node

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/renderer"
)

// Transfers are the HTTP clients a node moves files with.
type Transfers struct {
	// Internal reaches the coordinator's signed URLs.
	Internal *http.Client
	// External reaches URLs users gave (asset src, template src, their S3 endpoints).
	External *http.Client
}

type fileMover struct {
	Transfers
	cacheDir string
	maxBytes int64
	timeout  time.Duration
	clock    clock.Clock
	// log tells the node's operator of what the farm's storage refused.
	log *slog.Logger
}

// fetchedTypes are the asset types whose src is a file to download.
var fetchedTypes = map[string]bool{
	renderer.AssetImage: true, renderer.AssetVideo: true, renderer.AssetAudio: true,
	renderer.AssetStatic: true, renderer.AssetScript: true,
}

// stage downloads everything a render needs into work and returns the renderer's task.
func (f *fileMover) stage(ctx context.Context, m *protocol.Assign, work string, log *logCapture) (*renderer.Task, error) {
	task := &renderer.Task{
		JobID: m.JobID, Attempt: m.Attempt, WorkDir: work,
		TemplateType: m.Task.TemplateType, Composition: m.Task.Composition,
		Settings: m.Task.Settings, Preview: m.Task.Preview,
		OutputPath: filepath.Join(work, "output", safeName(m.Task.Output.Name)),
		Log:        log, Chunk: m.Task.Chunk,
	}
	if (m.Task.Chunk || len(m.Task.Chunks) > 0) && !renderer.SplitsFrames(m.Task.Engine) {
		return nil, fmt.Errorf("the %s engine does not render or join frame chunks", m.Task.Engine)
	}
	for _, dir := range []string{"output", "fonts", "assets", "chunks"} {
		if err := os.MkdirAll(filepath.Join(work, dir), 0o700); err != nil {
			return nil, fmt.Errorf("%w: %w", renderer.ErrNodeFault, err)
		}
	}
	if src := m.Task.Template; src != nil {
		p, err := f.template(ctx, *src, work)
		if err != nil {
			return nil, fmt.Errorf("template: %w", err)
		}
		task.TemplatePath = p
		log.Printf("template staged")
	}
	for _, font := range m.Task.Fonts {
		dst := filepath.Join(work, "fonts", safeName(font.FileName))
		if err := f.fetch(ctx, font.Source, dst); err != nil {
			return nil, fmt.Errorf("font %s: %w", font.FileName, err)
		}
		task.Fonts = append(task.Fonts, renderer.FontFile{FileName: font.FileName, Path: dst})
	}
	for i, a := range m.Task.Assets {
		asset := a.Asset
		if asset.Src != "" && fetchedTypes[asset.Type] {
			dst := filepath.Join(work, "assets", fmt.Sprintf("%d-%s", i, srcName(asset.Src)))
			if err := f.fetch(ctx, protocol.Source{URL: asset.Src, Internal: a.Internal}, dst); err != nil {
				return nil, fmt.Errorf("assets[%d].src: %w", i, err)
			}
			asset.LocalPath = dst
		}
		task.Assets = append(task.Assets, asset)
	}
	if len(m.Task.Assets) > 0 {
		log.Printf("%s staged", renderer.Count(len(m.Task.Assets), "asset"))
	}
	ext := renderer.ChunkExtension(m.Task.Settings)
	for i, src := range m.Task.Chunks {
		dst := filepath.Join(work, "chunks", fmt.Sprintf("%06d%s", i+1, ext))
		if err := f.fetch(ctx, src, dst); err != nil {
			return nil, fmt.Errorf("chunk %d: %w", i+1, err)
		}
		task.Chunks, task.ChunkFrames = append(task.Chunks, dst), append(task.ChunkFrames, src.Frames)
	}
	if len(m.Task.Chunks) > 0 {
		log.Printf("%d chunks staged", len(m.Task.Chunks))
	}
	return task, nil
}

// template returns a local copy of the template: from the cache when its content hash is known.
func (f *fileMover) template(ctx context.Context, src protocol.Source, work string) (string, error) {
	if src.SHA256 == "" {
		dst := filepath.Join(work, "template")
		return dst, f.fetch(ctx, src, dst)
	}
	cached := filepath.Join(f.cacheDir, safeName(src.SHA256))
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	tmp, err := os.CreateTemp(f.cacheDir, "fetch-*")
	if err != nil {
		return "", fmt.Errorf("%w: %w", renderer.ErrNodeFault, err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if err := f.fetch(ctx, src, tmp.Name()); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), cached); err != nil {
		return "", fmt.Errorf("%w: %w", renderer.ErrNodeFault, err)
	}
	return cached, nil
}

// fetch downloads src to dst. The farm's own files out of reach are the farm's fault (the job
// runs again); one the farm says is gone, or a user's URL that fails, is the job's (it would fail
// again anywhere); the node's own disk failing is the node's. Messages never quote the URL: it
// may hold a signature or a substituted secret.
func (f *fileMover) fetch(ctx context.Context, src protocol.Source, dst string) error {
	fail := func(format string, args ...any) error {
		err := fmt.Errorf(format, args...)
		if src.Internal {
			return fmt.Errorf("%w: %w", renderer.ErrFarmFault, err)
		}
		return err
	}
	u, err := url.Parse(src.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return errors.New("only http and https URLs can be downloaded")
	}
	client := f.External
	if src.Internal {
		client = f.Internal
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	timedOut := func(err error) error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fail("the download took longer than the %s allowed", f.timeout)
		}
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.URL, nil)
	if err != nil {
		return fail("cannot make the request: %v", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return timedOut(fail("download failed: %v", redactURLError(err)))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		if src.Internal && resp.StatusCode/100 == 4 {
			return fmt.Errorf("the farm no longer has the file: it answered %s", resp.Status)
		}
		return fail("download failed: the server answered %s", resp.Status)
	}
	if resp.ContentLength > f.maxBytes {
		return fail("the file is %d bytes, more than the %d allowed", resp.ContentLength, f.maxBytes)
	}
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("%w: %w", renderer.ErrNodeFault, err)
	}
	defer out.Close()
	hash := sha256.New()
	n, err := io.Copy(io.MultiWriter(nodeDisk{out}, hash), io.LimitReader(resp.Body, f.maxBytes+1))
	if errors.Is(err, renderer.ErrNodeFault) {
		return err
	}
	if err != nil {
		return timedOut(fail("download interrupted: %v", redactURLError(err)))
	}
	if n > f.maxBytes {
		return fail("the file is more than the %d bytes allowed", f.maxBytes)
	}
	if src.SHA256 != "" && hex.EncodeToString(hash.Sum(nil)) != src.SHA256 {
		return fail("the downloaded file does not match its content hash")
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("%w: %w", renderer.ErrNodeFault, err)
	}
	return nil
}

// nodeDisk marks the errors of writing a file on the node's disk as the node's.
type nodeDisk struct{ w io.Writer }

func (d nodeDisk) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	if err != nil {
		err = fmt.Errorf("%w: %w", renderer.ErrNodeFault, err)
	}
	return n, err
}

// upload sends the output where the job wants it. The render itself succeeded, so every failure
// is retryable: an output the engine did not leave is the node's fault, the farm's own store out
// of reach the farm's, and the job's own bucket refusing it the job's.
func (f *fileMover) upload(ctx context.Context, out protocol.Output, file string) error {
	body, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("%w: the engine left no output: %w", renderer.ErrNodeFault, err)
	}
	defer body.Close()
	info, err := body.Stat()
	if err != nil {
		return fmt.Errorf("%w: the output cannot be read: %w", renderer.ErrNodeFault, err)
	}
	if out.S3 != nil {
		if err := f.uploadS3(ctx, out.S3, body, info.Size()); err != nil {
			return fmt.Errorf("%w: uploading the output to the job's bucket failed: %w", renderer.ErrRetryable, err)
		}
		return nil
	}
	if err := f.put(ctx, out.PutURL, body, info.Size()); err != nil {
		return fmt.Errorf("%w: uploading the output failed: %w", renderer.ErrFarmFault, err)
	}
	return nil
}

// Sending an output to the farm's bucket: a part that fails is sent again, up to partTries
// times, after waits that start at partWait and double; the parts sent already stay sent.
const (
	partTries = 6
	partWait  = time.Second
)

// uploadToBucket puts an output in the farm's bucket through the presigned URLs of the plan the
// coordinator gives for it: in parts of the assignment's part size, each checked by the bucket
// against its MD5. What it uploaded is reported in the Done; the coordinator completes the
// upload and checks the object is there before the job is finished.
func (f *fileMover) uploadToBucket(ctx context.Context, m *protocol.Assign, file string,
	ask func(context.Context, *protocol.UploadRequest) (*protocol.UploadPlan, error), log *logCapture) (*protocol.OutputReport, error) {
	body, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("%w: the engine left no output: %w", renderer.ErrNodeFault, err)
	}
	defer body.Close()
	info, err := body.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: the output cannot be read: %w", renderer.ErrNodeFault, err)
	}
	size, partSize := info.Size(), m.Task.Output.PartSize
	whole := sha256.New()
	var md5s []string
	for offset := int64(0); offset < size || len(md5s) == 0; offset += partSize {
		part := md5.New()
		if _, err := io.Copy(io.MultiWriter(whole, part), io.NewSectionReader(body, offset, min(partSize, size-offset))); err != nil {
			return nil, fmt.Errorf("%w: the output cannot be read: %w", renderer.ErrNodeFault, err)
		}
		md5s = append(md5s, base64.StdEncoding.EncodeToString(part.Sum(nil)))
	}
	report := &protocol.OutputReport{Size: size, SHA256: hex.EncodeToString(whole.Sum(nil))}
	plan, err := ask(ctx, &protocol.UploadRequest{JobID: m.JobID, Attempt: m.Attempt, Name: m.Task.Output.Name, Size: size,
		SHA256: report.SHA256, PartMD5: md5s})
	if err != nil {
		return nil, fmt.Errorf("%w: no place in the object store for the output: %w", renderer.ErrFarmFault, err)
	}
	report.UploadID = plan.UploadID
	for i, target := range plan.Parts {
		offset := int64(i) * partSize
		n := min(partSize, size-offset)
		wait := partWait
		for try := 1; ; try++ {
			etag, err := f.putPart(ctx, target, io.NewSectionReader(body, offset, n), n)
			if err == nil {
				report.ETags = append(report.ETags, etag)
				break
			}
			if try == partTries || ctx.Err() != nil {
				return nil, fmt.Errorf("%w: uploading part %d of %d of the output failed %d times, the last: %w",
					renderer.ErrFarmFault, i+1, len(plan.Parts), try, err)
			}
			log.Printf("part %d of %d of the output did not reach the object store (%v); sending it again in %s", i+1, len(plan.Parts), err, wait)
			f.log.Warn("a part of an output did not reach the object store; sending it again", "job", m.JobID,
				"part", i+1, "parts", len(plan.Parts), "try", try, "wait", wait, "err", err)
			clock.Sleep(ctx, f.clock, wait)
			wait *= 2
		}
	}
	if len(plan.Parts) == 1 {
		report.ETags = nil // one part is the object itself
		log.Printf("the output (%d bytes) went to the object store", size)
	} else {
		log.Printf("the output (%d bytes) went to the object store in %d parts", size, len(plan.Parts))
	}
	return report, nil
}

// putPart sends one part to its presigned URL with the headers it was signed with, and returns
// the ETag the bucket gave it.
func (f *fileMover) putPart(ctx context.Context, target protocol.PartTarget, body io.Reader, size int64) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, target.URL, body)
	if err != nil {
		return "", err
	}
	req.ContentLength = size
	for name, value := range target.Header {
		req.Header.Set(name, value)
	}
	resp, err := f.Internal.Do(req)
	if err != nil {
		return "", redactURLError(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("the object store answered %s", resp.Status)
	}
	return resp.Header.Get("ETag"), nil
}

func (f *fileMover) put(ctx context.Context, putURL string, body io.Reader, size int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, putURL, body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := f.Internal.Do(req)
	if err != nil {
		return redactURLError(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the coordinator answered %s", resp.Status)
	}
	return nil
}

// uploadS3 puts the output into the job's bucket: AWS S3 by region, or any S3-compatible service
// at endpoint (path-style addressing, which they all understand).
func (f *fileMover) uploadS3(ctx context.Context, t *protocol.S3Target, body io.ReadSeeker, size int64) error {
	opts := s3.Options{
		Region:      t.Region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(t.AccessKeyID, t.SecretAccessKey, "")),
		HTTPClient:  f.External,
		// Checksums only where the operation requires one: not every S3-compatible server takes
		// the newer trailing checksums.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
	}
	if t.Endpoint != "" {
		if u, err := url.Parse(t.Endpoint); err != nil || u.Host == "" {
			return errors.New("upload.params.endpoint is not a URL")
		}
		opts.BaseEndpoint, opts.UsePathStyle = aws.String(t.Endpoint), true
	}
	in := &s3.PutObjectInput{Bucket: aws.String(t.Bucket), Key: aws.String(t.Key), Body: body,
		ContentLength: aws.Int64(size), ContentType: aws.String(renderer.ContentType(path.Ext(t.Key)))}
	if t.ACL != "" {
		in.ACL = types.ObjectCannedACL(t.ACL)
	}
	_, err := s3.New(opts).PutObject(ctx, in)
	return err
}

// redactURLError drops the URL from a client error: it may hold a signature or a secret.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", strings.ToLower(ue.Op), ue.Err)
	}
	return err
}

// safeName keeps a file name inside its directory.
func safeName(name string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "." || name == ".." || name == "/" || name == "" {
		return "file"
	}
	return name
}

// srcName is a file name for a downloaded src, taken from the URL's path.
func srcName(src string) string {
	u, err := url.Parse(src)
	if err != nil {
		return "file"
	}
	return safeName(path.Base(u.Path))
}

// checkInternalURLs refuses a task whose files marked internal, or whose upload URL, are not
// the coordinator's (base, from its welcome): the node reaches those without the guard that
// keeps users' URLs off private addresses. Messages never quote the URL (it holds a signature).
func checkInternalURLs(t *protocol.Task, base string) error {
	theirs := func(u string) bool { return base != "" && strings.HasPrefix(u, base) }
	if t.Template != nil && t.Template.Internal && !theirs(t.Template.URL) {
		return errors.New("the template is marked internal but is not one of the coordinator's files")
	}
	for _, f := range t.Fonts {
		if f.Source.Internal && !theirs(f.Source.URL) {
			return fmt.Errorf("font %s is marked internal but is not one of the coordinator's files", f.FileName)
		}
	}
	for i, a := range t.Assets {
		if a.Internal && !theirs(a.Src) {
			return fmt.Errorf("asset %d is marked internal but is not one of the coordinator's files", i)
		}
	}
	for i, c := range t.Chunks {
		if !c.Internal || !theirs(c.URL) {
			return fmt.Errorf("chunk %d is not one of the coordinator's files", i+1)
		}
	}
	if t.Output.PutURL != "" && !theirs(t.Output.PutURL) {
		return errors.New("the output's upload URL is not one of the coordinator's")
	}
	return nil
}
