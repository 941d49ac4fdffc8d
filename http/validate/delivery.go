package validate

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"github.com/framefarm/framefarm/persistence"
)

type rawUpload struct {
	Prefix    string          `json:"prefix"`
	OutputURL string          `json:"outputUrl"`
	Provider  string          `json:"provider"`
	Params    json.RawMessage `json:"params"`
}

var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9!_.*'()/ -]{0,512}$`)

// upload checks where a job's output goes.
func (c *checker) upload(raw json.RawMessage, path string) *persistence.Upload {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var ru rawUpload
	if err := decodeStrict(raw, &ru, path); err != nil {
		c.merge(err)
		return nil
	}
	up := &persistence.Upload{Prefix: ru.Prefix, Provider: ru.Provider}
	switch ru.Provider {
	case "":
		up.Provider = "s3"
	case "s3":
	default:
		c.add(CodeValidation, at(path, "provider"), "must be s3, not %q", ru.Provider)
	}
	if !prefixPattern.MatchString(ru.Prefix) || strings.Contains(ru.Prefix, "..") {
		c.add(CodeValidation, at(path, "prefix"), "must be a folder path of letters, digits and -_.!*'()/ without \"..\"")
	}
	up.OutputURL = c.url(ru.OutputURL, at(path, "outputUrl"), false)
	if len(ru.Params) > 0 && string(ru.Params) != "null" {
		var p persistence.UploadParams
		if err := decodeStrict(ru.Params, &p, at(path, "params")); err != nil {
			c.merge(err)
			return up
		}
		pp := at(path, "params")
		for field, v := range map[string]string{"region": p.Region, "bucket": p.Bucket, "accessKeyId": p.AccessKeyID, "accessKeySecret": p.AccessKeySecret} {
			if v == "" {
				c.add(CodeValidation, at(pp, field), "is required when params are given")
			}
			c.secrets(v, at(pp, field))
		}
		p.Endpoint = c.url(p.Endpoint, at(pp, "endpoint"), false)
		switch p.ACL {
		case "", "public-read", "private":
		default:
			c.add(CodeValidation, at(pp, "acl"), "must be public-read or private, not %q", p.ACL)
		}
		up.Params = &p
	}
	return up
}

type rawWebhook struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"`
	Headers map[string]string `json:"headers"`
	Data    json.RawMessage   `json:"data"`
	Custom  bool              `json:"custom"`
}

var headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")

// reservedHeaders are set by the webhook sender and cannot be configured.
var reservedHeaders = []string{"Content-Type", "Content-Length", "Host", "Transfer-Encoding", "Connection",
	"X-Webhook-Id", "X-Webhook-Timestamp", "X-Webhook-Signature"}

// webhook checks a job's callback configuration.
func (c *checker) webhook(raw json.RawMessage, path string) *persistence.Webhook {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var rw rawWebhook
	if err := decodeStrict(raw, &rw, path); err != nil {
		c.merge(err)
		return nil
	}
	hook := &persistence.Webhook{URL: c.url(rw.URL, at(path, "url"), true), Method: strings.ToUpper(rw.Method), Custom: rw.Custom}
	switch hook.Method {
	case "":
		hook.Method = http.MethodPost
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		c.add(CodeValidation, at(path, "method"), "must be POST, PUT or PATCH, not %q", rw.Method)
	}
	if len(rw.Headers) > 50 {
		c.add(CodeValidation, at(path, "headers"), "at most 50 headers")
	}
	for name, value := range rw.Headers {
		hp := at(path, "headers."+name)
		switch {
		case !headerNamePattern.MatchString(name):
			c.add(CodeValidation, hp, "is not a valid header name")
		case containsFold(reservedHeaders, name):
			c.add(CodeValidation, hp, "is set by the webhook sender and cannot be configured")
		case strings.ContainsAny(value, "\r\n\x00") || len(value) > 8192:
			c.add(CodeValidation, hp, "must be one line of at most 8192 characters")
		}
		c.secrets(value, hp)
	}
	hook.Headers = rw.Headers
	if len(rw.Data) > 0 && string(rw.Data) != "null" {
		if len(rw.Data) > maxValueLength {
			c.add(CodeValidation, at(path, "data"), "is larger than %d bytes", maxValueLength)
		}
		c.secrets(string(rw.Data), at(path, "data"))
		hook.Data = compact(rw.Data)
	}
	return hook
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
