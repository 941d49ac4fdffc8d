package persistence

import (
	"errors"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"
)

// Where the farm's files live: the keys of the objects in the farm's object store, and the URLs
// of outputs in a job's own bucket. Every key is made here and nowhere else.
//
//	templates/TEMPLATE/FILE              a template's project file (one per upload or download)
//	fonts/TEAM/FONT.ttf                  a font of a team's library
//	outputs/JOB/ATTEMPT/NAME             the output of one attempt of a job
//	outputs/JOB/NAME                     the link clients are given: the current attempt's output
//	uploads/templates/TEAM/TEMPLATE/W    what a template's upload URL signs (not an object)

// ErrTooLarge is returned by an object store when a stored stream exceeds its size limit.
var ErrTooLarge = errors.New("file exceeds its size limit")

// TemplateFileKey is where one file uploaded or downloaded for a template is stored.
func TemplateFileKey(templateID, fileID ulid.ULID) string {
	return TemplateFolder(templateID) + "/" + fileID.String()
}

// TemplateFolder holds every file of a template.
func TemplateFolder(templateID ulid.ULID) string { return "templates/" + templateID.String() }

// FontKey is where a font of a team's library is stored.
func FontKey(teamID, fontID ulid.ULID) string {
	return "fonts/" + teamID.String() + "/" + fontID.String() + ".ttf"
}

// OutputKey is the key of the output of the job's current attempt. Each attempt uploads under
// its own key, so a late upload from an attempt the job has moved past can never replace the
// output of the attempt that finished. Clients get OutputLink instead.
func (j *Job) OutputKey() string {
	return j.OutputFolder() + "/" + strconv.Itoa(j.Attempts) + "/" + j.OutputName
}

// OutputInFarm reports whether the job's output is kept in the farm's object store (not the
// job's own bucket).
func (j *Job) OutputInFarm() bool { return j.Spec.Upload == nil || j.Spec.Upload.Params == nil }

// ObjectKinds are the kinds of the farm's objects, each the first part of its keys (kind/...).
var ObjectKinds = []string{"templates", "fonts", "outputs"}

// OutputsPrefix starts the key of every job's output (each attempt's, and those uploaded in parts).
const OutputsPrefix = "outputs/"

// OutputFolder holds every attempt's output of the job.
func (j *Job) OutputFolder() string { return OutputsPrefix + j.ID.String() }

// OutputLink is the key clients are given for the job's output: the same for every attempt, it
// is served from the attempt that is current when it is read (ParseOutputLink).
func (j *Job) OutputLink() string { return j.OutputFolder() + "/" + j.OutputName }

// ParseOutputLink reads a key made by OutputLink.
func ParseOutputLink(key string) (ulid.ULID, string, bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 3 || parts[0]+"/" != OutputsPrefix || parts[2] == "" {
		return ulid.ULID{}, "", false
	}
	jobID, ok := ParseID(parts[1])
	return jobID, parts[2], ok
}

// AttemptOutputKey is the key an attempt's output is uploaded to, from the parts of its upload
// URL's path; ok is false for parts that make no such key.
func AttemptOutputKey(jobID, attempt, name string) (key string, ok bool) {
	if _, err := ulid.ParseStrict(jobID); err != nil {
		return "", false
	}
	if n, err := strconv.Atoi(attempt); err != nil || n < 1 || strconv.Itoa(n) != attempt {
		return "", false
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\") {
		return "", false
	}
	return OutputsPrefix + jobID + "/" + attempt + "/" + name, true
}

// Downloadable reports whether a key names an object clients may fetch through a signed URL:
// template files, fonts and outputs.
func Downloadable(key string) bool {
	for _, kind := range ObjectKinds {
		if strings.HasPrefix(key, kind+"/") {
			return true
		}
	}
	return false
}

// UploadKey is the key that the template's upload URL signs for its current upload window.
func (t *Template) UploadKey() string {
	return TemplateUploadKey(t.TeamID, t.ID, t.UploadWindow)
}

// TemplateUploadKey is the key an upload URL of a template's window signs; window 0, of
// templates made before windows were numbered, has the shape of those releases' URLs.
func TemplateUploadKey(team, id ulid.ULID, window int) string {
	key := "uploads/templates/" + team.String() + "/" + id.String()
	if window == 0 {
		return key
	}
	return key + "/" + strconv.Itoa(window)
}

// Key is where an output named name goes in the job's own bucket: under Prefix, a folder path.
func (u *Upload) Key(name string) string {
	prefix := strings.Trim(u.Prefix, "/")
	if prefix == "" {
		return name
	}
	return path.Join(prefix, name)
}

// PublicURL is where an output named name can be read in the job's own bucket: under the
// OutputURL the job gave, else the bucket's own address; "" when the job names neither.
func (u *Upload) PublicURL(name string) string {
	var base string
	switch p := u.Params; {
	case u.OutputURL != "":
		base = strings.TrimRight(u.OutputURL, "/")
	case p == nil:
		return ""
	case p.Endpoint != "":
		base = strings.TrimRight(p.Endpoint, "/") + "/" + url.PathEscape(p.Bucket)
	default:
		base = "https://" + p.Bucket + ".s3." + p.Region + ".amazonaws.com"
	}
	return base + "/" + u.Key(name)
}
