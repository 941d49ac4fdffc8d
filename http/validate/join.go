package validate

import (
	"encoding/json"
	"fmt"

	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
)

type rawJoin struct {
	Assets   []json.RawMessage `json:"assets"`
	Settings json.RawMessage   `json:"settings"`
	Upload   json.RawMessage   `json:"upload"`
	Webhook  json.RawMessage   `json:"webhook"`
	Priority *float64          `json:"priority"`
	Tags     json.RawMessage   `json:"tags"`
	Name     *string           `json:"name"`
	Pool     *string           `json:"pool"`
	Limits   []string          `json:"limits"`
}

// ParseJoin reads and checks a POST /jobs/join body: an ordered list of static videos (type video
// with src) and nested jobs rendering videos, stitched with ffmpeg.
func ParseJoin(body []byte, cat Catalog, lim Limits) (*Job, *Error) {
	var raw rawJoin
	if err := decodeStrict(body, &raw, ""); err != nil {
		return nil, err
	}
	c := &checker{cat: cat, lim: lim.withDefaults()}
	job := &Job{Kind: persistence.KindJoin, Engine: renderer.EngineFFmpeg}
	job.Spec.Settings = c.settings(raw.Settings, "settings", true)
	job.Priority = c.priority(raw.Priority, "priority")
	job.Tags = c.tags(raw.Tags, "tags")
	job.Spec.Upload = c.upload(raw.Upload, "upload")
	job.Spec.Webhook = c.webhook(raw.Webhook, "webhook")
	job.Name = c.name(raw.Name, "name")
	c.inherited = c.placement(raw.Pool, raw.Limits, "")
	c.place(job, c.inherited, "")
	switch {
	case len(raw.Assets) == 0:
		c.add(CodeValidation, "assets", "needs at least one video or job asset")
	case len(raw.Assets) > c.lim.MaxAssets:
		c.add(CodeValidation, "assets", "at most %d assets, got %d", c.lim.MaxAssets, len(raw.Assets))
	}
	job.Spec.Assets = []renderer.Asset{}
	for i, rawAsset := range raw.Assets {
		c.joinAsset(job, rawAsset, fmt.Sprintf("assets[%d]", i))
	}
	if e := c.err(); e != nil {
		return nil, e
	}
	return job, nil
}

type rawJoinAsset struct {
	Type      string            `json:"type"`
	Src       *string           `json:"src"`
	LayerName *string           `json:"layerName"`
	Template  *rawTemplateRef   `json:"template"`
	Assets    []json.RawMessage `json:"assets"`
	Preview   *bool             `json:"preview"`
	Settings  json.RawMessage   `json:"settings"`
	Fonts     []string          `json:"fonts"`
}

func (c *checker) joinAsset(job *Job, raw json.RawMessage, path string) {
	var ra rawJoinAsset
	if err := decodeStrict(raw, &ra, path); err != nil {
		c.merge(err)
		return
	}
	switch ra.Type {
	case renderer.AssetVideo:
		if ra.Template != nil || ra.Assets != nil || ra.Settings != nil || ra.Preview != nil || ra.Fonts != nil {
			c.add(CodeValidation, path, "a video asset of a join takes only type and src")
		}
		if ra.Src == nil {
			c.add(CodeValidation, at(path, "src"), "is required for assets of type video")
			return
		}
		job.Spec.Assets = append(job.Spec.Assets, renderer.Asset{Type: renderer.AssetVideo, Src: c.url(*ra.Src, at(path, "src"), true)})
	case renderer.AssetJob:
		if ra.Src != nil {
			c.add(CodeValidation, at(path, "src"), "is not used by assets of type job")
		}
		if ra.Template == nil {
			c.add(CodeValidation, at(path, "template"), "is required for assets of type job")
			return
		}
		child := c.job(&rawJob{Template: ra.Template, Assets: ra.Assets, Preview: ra.Preview, Settings: ra.Settings, Fonts: ra.Fonts}, path, 1)
		if child.Spec.Settings.Type != renderer.OutputVideo {
			c.add(CodeValidation, at(path, "settings.type"), "a join stitches videos; a child job must render a video")
		}
		child.Priority, child.Tags = job.Priority, job.Tags
		job.Children = append(job.Children, child)
		job.ChildAsset = append(job.ChildAsset, len(job.Spec.Assets))
		layer := ""
		if ra.LayerName != nil {
			layer = *ra.LayerName
		}
		job.Spec.Assets = append(job.Spec.Assets, renderer.Asset{Type: renderer.AssetJob, LayerName: layer})
	default:
		c.add(CodeValidation, at(path, "type"), "a join takes video and job assets, not %q", ra.Type)
	}
}

// MaxBatchJobs caps the jobs of one batch.
const MaxBatchJobs = 1000

// ParseBatch reads a POST /batches body into its items, which are then checked one by one
// with ParseJob.
func ParseBatch(body []byte) (name string, jobs []json.RawMessage, e *Error) {
	var raw struct {
		Jobs []json.RawMessage `json:"jobs"`
		Name *string           `json:"name"`
	}
	if err := decodeStrict(body, &raw, ""); err != nil {
		return "", nil, err
	}
	switch {
	case raw.Jobs == nil:
		return "", nil, fieldError("jobs", "is required")
	case len(raw.Jobs) == 0:
		return "", nil, fieldError("jobs", "needs at least one job")
	case len(raw.Jobs) > MaxBatchJobs:
		return "", nil, fieldError("jobs", fmt.Sprintf("at most %d jobs per batch, got %d", MaxBatchJobs, len(raw.Jobs)))
	}
	c := &checker{cat: noCatalog{}}
	name = c.name(raw.Name, "name")
	return name, raw.Jobs, c.err()
}

func fieldError(field, msg string) *Error {
	return &Error{Code: CodeValidation, Message: field + ": " + msg, Details: []FieldError{{Field: field, Message: msg}}}
}
