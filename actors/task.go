package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/framefarm/framefarm/cluster/clock"
	"github.com/framefarm/framefarm/cluster/protocol"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/secrets"
)

// taskBuilder turns jobs into the tasks render nodes are given.
type taskBuilder struct {
	cfg   Config
	clock clock.Clock
	store interface {
		ReadTeam(ulid.ULID, func(persistence.TeamReads) error) error
	}
	secrets *secretReader
	urls    URLSigner
	// uploads, when set, has nodes put outputs in the farm's bucket themselves.
	uploads OutputUploads
	// own recognizes the farm's own file URLs, as handed to clients.
	own OwnURLs
}

// OwnURLs recognizes the URLs of the farm's files it hands to clients (blobs.Signer).
type OwnURLs interface {
	// Key is the object key of such a URL that allows a GET now; ok is false for any other.
	Key(rawURL string, now time.Time) (key string, ok bool)
}

// build turns a job into what a node needs: signed URLs for the template, fonts and child
// outputs, secrets substituted, and where the output goes. Secrets are resolved here, at
// dispatch, and never stored in clear.
func (c *taskBuilder) build(job *persistence.Job) (task protocol.Task, err error) {
	expires := c.clock.Now().Add(c.cfg.NodeURLTTL)
	err = c.store.ReadTeam(job.TeamID, func(team persistence.TeamReads) error {
		job, err := team.AsRendered(job)
		if err != nil {
			return err
		}
		task = protocol.Task{
			Engine:         job.Engine,
			Composition:    job.Spec.Composition,
			Settings:       job.Spec.Settings,
			Preview:        job.Spec.Preview,
			SilenceTimeout: c.cfg.SilenceTimeout,
			MaxDuration:    c.cfg.MaxRenderTime,
			Output:         protocol.Output{Name: job.OutputName},
			Chunk:          job.Kind == persistence.KindChunk,
		}
		expand := func(s string) (string, error) { return c.secrets.expand(team, s) }
		if err := c.template(team, job, &task, expand, expires); err != nil {
			return err
		}
		for i, a := range job.Spec.Assets {
			asset, err := c.asset(team, a, expand, expires)
			if err != nil {
				return fmt.Errorf("assets[%d]: %w", i, err)
			}
			task.Assets = append(task.Assets, asset)
		}
		for _, name := range job.Spec.Fonts {
			f, err := team.Font(name)
			if errors.Is(err, persistence.ErrNotFound) {
				continue // reported in missingFonts when the job was created
			}
			if err != nil {
				return err
			}
			task.Fonts = append(task.Fonts, protocol.Font{FileName: name, Source: protocol.Source{
				URL: c.urls.URL(http.MethodGet, f.File.Key, expires), SHA256: f.File.SHA256, Internal: true}})
		}
		if err := c.output(job, &task, expand, expires); err != nil {
			return err
		}
		if err := c.chunks(team, job, &task, expires); err != nil {
			return err
		}
		revealed, err := c.secrets.revealed(team, job)
		task.Redact = revealed.Named()
		return err
	})
	return task, err
}

func (c *taskBuilder) template(team persistence.TeamReads, job *persistence.Job, task *protocol.Task,
	expand func(string) (string, error), expires time.Time) error {
	if job.TemplateID == (ulid.ULID{}) {
		return nil
	}
	tpl, err := team.Template(job.TemplateID)
	if err != nil {
		return fmt.Errorf("template %s: %w", job.TemplateID, err)
	}
	task.TemplateType = tpl.Type
	if job.Spec.TemplateSrc != "" {
		src, err := expand(job.Spec.TemplateSrc)
		if err != nil {
			return fmt.Errorf("template.src: %w", err)
		}
		task.Template = &protocol.Source{URL: src}
		return nil
	}
	if tpl.File == nil {
		return fmt.Errorf("template %s has no file (status %s)", tpl.ID, tpl.Status)
	}
	task.Template = &protocol.Source{URL: c.urls.URL(http.MethodGet, tpl.File.Key, expires), SHA256: tpl.File.SHA256, Internal: true}
	return nil
}

// chunks hands the join of a split job its chunks' intermediates, in frame order.
func (c *taskBuilder) chunks(team persistence.TeamReads, job *persistence.Job, task *protocol.Task, expires time.Time) error {
	if !job.Split() {
		return nil
	}
	for i, id := range job.Children {
		chunk, err := team.Job(id)
		if err != nil {
			return fmt.Errorf("chunk %d: %w", i+1, err)
		}
		if chunk.State != persistence.JobFinished {
			return fmt.Errorf("chunk %d is %s, not finished", i+1, chunk.State)
		}
		frames := chunk.Spec.Settings.Frames
		if frames == nil {
			return fmt.Errorf("chunk %d has no frames", i+1)
		}
		task.Chunks = append(task.Chunks, protocol.Source{URL: c.urls.URL(http.MethodGet, chunk.OutputKey(), expires), Internal: true,
			Frames: frames.End - frames.Start + 1})
	}
	return nil
}

// taskAsset resolves one asset: secrets substituted, and a child job's output put in the place
// of the job asset, as an image or a video.
func (c *taskBuilder) asset(team persistence.TeamReads, a renderer.Asset,
	expand func(string) (string, error), expires time.Time) (protocol.Asset, error) {
	var err error
	if a.Src, err = expand(a.Src); err != nil {
		return protocol.Asset{}, err
	}
	if len(a.Value) > 0 {
		v, err := expand(string(a.Value))
		if err != nil {
			return protocol.Asset{}, err
		}
		if !json.Valid([]byte(v)) {
			return protocol.Asset{}, errors.New("value is not valid JSON once its secrets are substituted")
		}
		a.Value = json.RawMessage(v)
	}
	if a.Type != renderer.AssetJob {
		return c.farmFile(team, a, expires), nil
	}
	childID, err := ulid.ParseStrict(a.JobID)
	if err != nil {
		return protocol.Asset{}, fmt.Errorf("job asset has no child job id")
	}
	child, err := team.Job(childID)
	if err != nil {
		return protocol.Asset{}, fmt.Errorf("child job %s: %w", childID, err)
	}
	if child.State != persistence.JobFinished {
		return protocol.Asset{}, fmt.Errorf("child job %s is %s, not finished", childID, child.State)
	}
	a.Type = renderer.AssetVideo
	if child.Spec.Settings.Type == renderer.OutputImage {
		a.Type = renderer.AssetImage
	}
	if child.OutputURL != "" && child.Spec.Upload != nil && child.Spec.Upload.Params != nil {
		a.Src = child.OutputURL
		return protocol.Asset{Asset: a}, nil
	}
	a.Src = c.urls.URL(http.MethodGet, child.OutputKey(), expires)
	return protocol.Asset{Asset: a, Internal: true}, nil
}

// farmFile fetches an asset whose src is one of the farm's own file URLs (an earlier job's
// outputUrl, joined into a video) from the farm, as the node fetches the template: a bucket's
// files are not behind those URLs but behind a redirect a node does not follow. An output link
// of the team names whichever attempt of that job is current.
func (c *taskBuilder) farmFile(team persistence.TeamReads, a renderer.Asset, expires time.Time) protocol.Asset {
	if c.own == nil {
		return protocol.Asset{Asset: a}
	}
	key, ok := c.own.Key(a.Src, c.clock.Now())
	if !ok {
		return protocol.Asset{Asset: a}
	}
	if jobID, name, link := persistence.ParseOutputLink(key); link {
		j, err := team.Job(jobID)
		if err != nil || j.OutputName != name {
			return protocol.Asset{Asset: a} // another team's, or gone: as any URL
		}
		key = j.OutputKey()
	}
	a.Src = c.urls.URL(http.MethodGet, key, expires)
	return protocol.Asset{Asset: a, Internal: true}
}

// output says where the output goes: the job's own S3 bucket, or the coordinator's store.
func (c *taskBuilder) output(job *persistence.Job, task *protocol.Task, expand func(string) (string, error), expires time.Time) error {
	up := job.Spec.Upload
	switch {
	case !job.OutputInFarm():
	case c.uploads != nil:
		task.Output.PartSize = c.uploads.PartSize()
		return nil
	default:
		task.Output.PutURL = c.urls.URL(http.MethodPut, job.OutputKey(), expires)
		return nil
	}
	p := *up.Params
	for _, field := range []*string{&p.Endpoint, &p.Region, &p.Bucket, &p.ACL, &p.AccessKeyID, &p.AccessKeySecret} {
		v, err := expand(*field)
		if err != nil {
			return fmt.Errorf("upload.params: %w", err)
		}
		*field = v
	}
	task.Output.S3 = &protocol.S3Target{
		Endpoint: p.Endpoint, Region: p.Region, Bucket: p.Bucket, ACL: p.ACL,
		Key:         up.Key(job.OutputName),
		AccessKeyID: p.AccessKeyID, SecretAccessKey: p.AccessKeySecret,
	}
	return nil
}

// secretReader reads a team's secrets: to substitute them, and to hide their values.
type secretReader struct {
	store interface {
		ReadTeam(ulid.ULID, func(persistence.TeamReads) error) error
	}
	box SecretBox
	log *slog.Logger
}

// expand substitutes ${secret.NAME} references with the team's decrypted values.
func (r *secretReader) expand(team persistence.TeamReads, s string) (string, error) {
	return secrets.Expand(s, func(name string) (string, error) {
		sec, err := team.Secret(name)
		if errors.Is(err, persistence.ErrNotFound) {
			return "", fmt.Errorf("secret %q no longer exists", name)
		}
		if err != nil {
			return "", err
		}
		plain, err := r.box.Open(sec.Ciphertext, persistence.SecretAAD(sec.TeamID, name))
		if err != nil {
			return "", fmt.Errorf("secret %q cannot be decrypted: %w", name, err)
		}
		return string(plain), nil
	})
}

// revealed resolves every secret a job refers to, anywhere in its spec, so that text about the
// job (a node's error and log, a webhook failure) can be scrubbed of their values. A chunk is
// given as it renders (TeamReads.AsRendered), its job's spec with it.
func (r *secretReader) revealed(team persistence.TeamReads, job *persistence.Job) (*secrets.Revealed, error) {
	revealed := &secrets.Revealed{}
	spec, err := json.Marshal(job.Spec)
	if err != nil {
		return revealed, err
	}
	for _, name := range secrets.References(string(spec)) {
		value, err := r.expand(team, "${secret."+name+"}")
		if err == nil {
			revealed.Add(name, value)
		}
	}
	return revealed, nil
}

// forJob is revealed in a read of its own, for a job as stored.
func (r *secretReader) forJob(job *persistence.Job) *secrets.Revealed {
	revealed := &secrets.Revealed{}
	if err := r.store.ReadTeam(job.TeamID, func(team persistence.TeamReads) error {
		rendered, err := team.AsRendered(job)
		if err != nil {
			return err
		}
		revealed, err = r.revealed(team, rendered)
		return err
	}); err != nil {
		r.log.Warn("cannot resolve a job's secrets to hide them", "job", job.ID.String(), "err", err)
	}
	return revealed
}

// outputStore checks that what a node uploaded to the farm's bucket is there.
type outputStore struct {
	objects interface {
		Head(key string) (int64, error)
	}
	uploads OutputUploads
	clock   clock.Clock
}

// confirmTries is how often confirm asks the store, the waits doubling from a second.
const confirmTries = 3

// confirm completes a multipart upload, when there is one, and checks that the object at key
// holds as many bytes as the node sent.
func (o *outputStore) confirm(key string, report *protocol.OutputReport) error {
	var err error
	wait := time.Second
	for try := 1; try <= confirmTries; try++ {
		if err = o.confirmOnce(key, report); err == nil {
			return nil
		}
		if try < confirmTries {
			clock.Sleep(context.Background(), o.clock, wait)
			wait *= 2
		}
	}
	return err
}

func (o *outputStore) confirmOnce(key string, report *protocol.OutputReport) error {
	var completing error
	if report != nil && report.UploadID != "" {
		if o.uploads == nil {
			return errors.New("the node uploaded parts, but this farm keeps outputs on the coordinator")
		}
		// Completed by an earlier try, a second completion fails: the object then tells.
		completing = o.uploads.CompleteUpload(context.Background(), key, report.UploadID, report.ETags)
	}
	size, err := o.objects.Head(key)
	switch {
	case err != nil && completing != nil:
		return completing
	case err != nil:
		return err
	case report != nil && size != report.Size:
		return fmt.Errorf("it holds %d bytes, the node sent %d", size, report.Size)
	}
	return nil
}
