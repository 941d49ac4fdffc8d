package validate

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/framefarm/framefarm/http/outbound"
	"github.com/framefarm/framefarm/persistence"
	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/secrets"
)

// Catalog is what validation needs to know of the requesting team.
type Catalog interface {
	// Template returns one of the team's templates, or persistence.ErrNotFound.
	Template(id string) (*persistence.Template, error)
	FontExists(fileName string) bool
	// Fonts is the team's font library, read when a template names fonts.
	Fonts() []*persistence.Font
	SecretExists(name string) bool
	// Policy is the team's policy (what priority and pools its jobs may ask).
	Policy() persistence.TeamPolicy
	// LimitExists reports whether the farm has a limit of that name.
	LimitExists(name string) bool
	// InstalledFont reports whether every ready render node of the engine has the font of that
	// name installed on its system.
	InstalledFont(engine, name string) bool
}

// Limits bound what one request may ask for.
type Limits struct {
	// MaxDepth is how deep job assets may nest [3].
	MaxDepth int
	// MaxAssets caps the assets of one job [1000].
	MaxAssets int
	// AllowPrivateURLs accepts URLs naming loopback or private addresses.
	AllowPrivateURLs bool
	// ChunkFrames, when set, splits jobs that do not say otherwise into chunks of this many
	// frames, if they render at least ChunkAbove frames.
	ChunkFrames int
	ChunkAbove  int
	// EngineLimits are the limits every job of an engine holds while it renders.
	EngineLimits map[string][]string
	// Engines are the rules of the engines that refuse some assets at creation (the Lottie
	// engine's, from the composition root); an engine without rules takes every asset.
	Engines map[string]renderer.AssetRules
}

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = 3
	}
	if l.MaxAssets <= 0 {
		l.MaxAssets = 1000
	}
	return l
}

// Job is a validated job request: what becomes one job record, and its children.
type Job = persistence.JobRequest

// rawJob is the request as sent; fields with several accepted forms stay raw until checked.
type rawJob struct {
	Template *rawTemplateRef   `json:"template"`
	Assets   []json.RawMessage `json:"assets"`
	Preview  *bool             `json:"preview"`
	Fonts    []string          `json:"fonts"`
	Settings json.RawMessage   `json:"settings"`
	Upload   json.RawMessage   `json:"upload"`
	Webhook  json.RawMessage   `json:"webhook"`
	// Chunks splits the job over several nodes (an extension).
	Chunks json.RawMessage `json:"chunks"`
	// requestFields are the keys that set a record's field of their name (jobfields_gen.go):
	// priority, tags, and the extensions name, pool (the nodes it renders on) and limits (what
	// its renders hold).
	requestFields
	// decodedAssets are Assets already decoded (nil: not decoded, or none).
	decodedAssets []rawAsset
}

// decodedJob is a job request read in one pass, its assets with it: a valid body, the common
// case, is decoded once. A body it refuses is read again as a rawJob and its assets one by one,
// so that errors name the asset.
type decodedJob struct {
	rawJob
	Assets []rawAsset `json:"assets"`
}

func decodeJob(body []byte) (*rawJob, *Error) {
	fast, ok := decodeJobFast(body)
	if !ok {
		fast = new(decodedJob)
		ok = decodeStrict(body, fast, "") == nil
	}
	if ok {
		fast.decodedAssets = fast.Assets
		return &fast.rawJob, nil
	}
	var raw rawJob
	if err := decodeStrict(body, &raw, ""); err != nil {
		return nil, err
	}
	return &raw, nil
}

type rawTemplateRef struct {
	ID          string `json:"id"`
	Composition string `json:"composition"`
	Src         string `json:"src"`
}

type rawSettings struct {
	Type    string          `json:"type"`
	Frames  json.RawMessage `json:"frames"`
	Quality string          `json:"quality"`
	Codec   string          `json:"codec"`
	Engine  string          `json:"engine"`
	Preset  string          `json:"preset"`
}

// rawAsset holds every field any asset type may carry; which ones a type allows is checked after.
type rawAsset struct {
	Type        string            `json:"type"`
	LayerName   *string           `json:"layerName"`
	Composition *string           `json:"composition"`
	Property    *string           `json:"property"`
	Value       json.RawMessage   `json:"value"`
	Expression  *string           `json:"expression"`
	Src         *string           `json:"src"`
	Name        *string           `json:"name"`
	Params      json.RawMessage   `json:"params"`
	Template    *rawTemplateRef   `json:"template"`
	Assets      []json.RawMessage `json:"assets"`
	Preview     *bool             `json:"preview"`
	Settings    json.RawMessage   `json:"settings"`
	Fonts       []string          `json:"fonts"`
}

// ParseJob reads and checks a POST /jobs body.
func ParseJob(body []byte, cat Catalog, lim Limits) (*Job, *Error) {
	raw, err := decodeJob(body)
	if err != nil {
		return nil, err
	}
	c := &checker{cat: cat, lim: lim.withDefaults()}
	job := c.job(raw, "", 0)
	if e := c.err(); e != nil {
		return nil, e
	}
	return job, nil
}

type checker struct {
	problems
	cat Catalog
	lim Limits
	// inherited is the top-level job's placement, which its nested jobs take.
	inherited placement
}

func (c *checker) job(raw *rawJob, path string, depth int) *Job {
	job := &Job{Kind: persistence.KindRender}
	if raw.Template == nil {
		c.add(CodeValidation, at(path, "template"), "is required")
		return job
	}
	tpl := c.template(raw.Template, at(path, "template"))
	if tpl != nil {
		job.TemplateID = tpl.ID
	}
	job.Spec.TemplateSrc = c.url(raw.Template.Src, at(path, "template.src"), false)
	job.Spec.Preview = raw.Preview != nil && *raw.Preview
	if job.Spec.Preview && len(raw.Settings) > 0 && string(raw.Settings) != "null" {
		c.add(CodeValidation, at(path, "settings"), "cannot be combined with preview: true")
	}
	var comp *renderer.Composition
	if tpl != nil && tpl.Inspection != nil {
		job.Spec.Composition, comp = c.composition(tpl, raw.Template.Composition, at(path, "template.composition"))
	}
	job.Spec.Settings = c.settings(raw.Settings, at(path, "settings"), false)
	job.Engine = c.engine(tpl, job.Spec.Settings, at(path, "settings.engine"))
	if depth == 0 {
		job.Name = c.name(raw.Name, at(path, "name"))
		c.inherited = c.placement(raw.Pool, raw.Limits, path)
	}
	c.place(job, c.inherited, path)
	job.Spec.Fonts, job.MissingFonts = c.fonts(raw.Fonts, at(path, "fonts"))
	if tpl != nil && tpl.Inspection != nil {
		job.MissingFonts = append(job.MissingFonts, c.templateFontsMissing(tpl.Inspection.Fonts, tpl.Inspection.BundledFonts, job.Spec.Fonts, job.Engine)...)
	}
	job.Priority = c.priority(raw.Priority, at(path, "priority"))
	job.Tags = c.tags(raw.Tags, at(path, "tags"))
	job.Spec.Upload = c.upload(raw.Upload, at(path, "upload"))
	job.Spec.Webhook = c.webhook(raw.Webhook, at(path, "webhook"))
	// Only template is required: a job without assets renders the template as it is.
	c.assets(job, raw, tpl, comp, path, depth)
	if depth == 0 { // nested jobs render whole; their parent may be split
		c.chunks(raw.Chunks, job, comp, at(path, "chunks"))
	}
	job.Frames = framesOf(job.Spec.Settings, comp)
	if job.Spec.TemplateSrc != "" {
		job.Frames = 0 // its template, and so its frames, are known only when it renders
	}
	return job
}

// framesOf is how many frames a render makes: its range, one for a single frame, its
// composition's; 0 when that is not known (an aep output is a project, not frames).
func framesOf(s renderer.Settings, comp *renderer.Composition) int {
	switch {
	case s.Type == renderer.OutputAEP:
		return 0
	case s.Frames != nil && s.Frames.Range:
		return s.Frames.End - s.Frames.Start + 1
	case s.Frames != nil, s.Type == renderer.OutputImage:
		return 1
	case comp != nil:
		return int(math.Round(comp.Duration * comp.FPS))
	}
	return 0
}

// at joins a field path.
func at(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func (c *checker) template(ref *rawTemplateRef, path string) *persistence.Template {
	if ref.ID == "" {
		c.add(CodeValidation, at(path, "id"), "is required")
		return nil
	}
	tpl, err := c.cat.Template(ref.ID)
	if err != nil {
		c.add(CodeTemplateNotFound, at(path, "id"), "no template %q", ref.ID)
		return nil
	}
	if tpl.Status != persistence.TemplateUploaded || tpl.Inspection == nil {
		msg := fmt.Sprintf("template %s is %s, not uploaded", tpl.ID, tpl.Status)
		if tpl.Error != "" {
			msg += ": " + tpl.Error
		}
		c.add(CodeTemplateNotReady, at(path, "id"), "%s", msg)
		return nil
	}
	return tpl
}

// composition resolves the composition to render; a mogrt falls back to its own.
func (c *checker) composition(tpl *persistence.Template, name, path string) (string, *renderer.Composition) {
	if name == "" && tpl.Inspection.Mogrt != nil {
		name = tpl.Inspection.Mogrt.Composition
	}
	if name == "" {
		c.add(CodeValidation, path, "is required; the template has %s", quoteList(tpl.Inspection.CompositionNames()))
		return "", nil
	}
	comp := tpl.Inspection.Composition(name)
	if comp == nil {
		c.add(CodeCompositionNotFound, path, "no composition named %q in template %s; it has %s", name, tpl.ID, quoteList(tpl.Inspection.CompositionNames()))
	}
	return name, comp
}

func quoteList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, 0, min(len(names), 20))
	for _, n := range names[:min(len(names), 20)] {
		q = append(q, fmt.Sprintf("%q", n))
	}
	s := strings.Join(q, ", ")
	if len(names) > 20 {
		s += fmt.Sprintf(" and %d more", len(names)-20)
	}
	return s
}

var videoCodecs = []string{
	"video_h264_vbr_1mbps", "video_h264_vbr_5mbps", "video_h264_vbr_15mbps", "video_h264_vbr_40mbps",
	"video_h264_cbr_1mbps", "video_h264_cbr_5mbps", "video_h264_cbr_15mbps", "video_h264_cbr_40mbps",
	"video_prores_422", "video_prores_4444",
}
var imageCodecs = []string{renderer.CodecPNG, renderer.CodecJPEG}

// settings checks and normalises settings; join jobs take only a preset.
func (c *checker) settings(raw json.RawMessage, path string, join bool) renderer.Settings {
	var rs rawSettings
	if len(raw) > 0 && string(raw) != "null" {
		if err := decodeStrict(raw, &rs, path); err != nil {
			c.merge(hintSettings(err, path))
			return renderer.Settings{}
		}
	}
	if join {
		for field, set := range map[string]bool{"type": rs.Type != "", "frames": len(rs.Frames) > 0, "quality": rs.Quality != "", "codec": rs.Codec != "", "engine": rs.Engine != ""} {
			if set {
				c.add(CodeValidation, at(path, field), "does not apply to join jobs (only settings.preset does)")
			}
		}
		switch rs.Preset {
		case "", "mp4":
			return renderer.Settings{Type: renderer.OutputVideo, Preset: "mp4", Codec: "video_h264_vbr_15mbps"}
		}
		c.add(CodeValidation, at(path, "preset"), "unknown preset %q; the only preset is \"mp4\"", rs.Preset)
		return renderer.Settings{}
	}
	s := renderer.Settings{Type: rs.Type, Quality: rs.Quality, Engine: rs.Engine}
	if rs.Preset != "" {
		c.add(CodeValidation, at(path, "preset"), "applies to join jobs only")
	}
	switch s.Type {
	case "":
		s.Type = renderer.OutputVideo
	case renderer.OutputVideo, renderer.OutputImage, renderer.OutputAEP:
	default:
		c.add(CodeValidation, at(path, "type"), "must be video, image or aep, not %q", s.Type)
	}
	if len(rs.Frames) > 0 && string(rs.Frames) != "null" {
		var f renderer.Frames
		if err := f.UnmarshalJSON(rs.Frames); err != nil {
			c.add(CodeValidation, at(path, "frames"), "%v", err)
		} else {
			s.Frames = &f
		}
	}
	switch {
	case s.Type == renderer.OutputImage && s.Frames == nil:
		c.add(CodeValidation, at(path, "frames"), "is required when type is image")
	case s.Type == renderer.OutputVideo && s.Frames != nil && !s.Frames.Range:
		c.add(CodeValidation, at(path, "frames"), "a video needs a range [start, end], not a single frame")
	case s.Type == renderer.OutputAEP && s.Frames != nil:
		c.add(CodeValidation, at(path, "frames"), "does not apply to aep output")
	}
	switch s.Quality {
	case "", "full", "draft":
	default:
		c.add(CodeValidation, at(path, "quality"), "must be draft or full, not %q", s.Quality)
	}
	s.Codec = c.codec(rs.Codec, s.Type, at(path, "codec"))
	if s.Engine != "" && !slices.Contains(renderer.SelectableEngines, s.Engine) {
		c.add(CodeValidation, at(path, "engine"), "must be one of %s, not %q", quoteList(renderer.SelectableEngines), s.Engine)
	}
	return s
}

// settingsHints say where what an unknown field of settings means is set, for the fields users
// of other renderers guess.
var settingsHints = map[string]string{
	"format":    "the output's format follows from settings.type (video, image or aep) and settings.codec (video_h264_vbr_15mbps, video_prores_422, image_png, ...)",
	"container": "the container follows from settings.codec: MP4 for H.264, MOV for ProRes",
	"fps":       "the output keeps the composition's frame rate",
	"width":     "the output keeps the composition's size (quality: draft renders at half of it)",
	"height":    "the output keeps the composition's size (quality: draft renders at half of it)",
}

// hintSettings adds, to an unknown field of settings, where what it means is set.
func hintSettings(err *Error, path string) *Error {
	for i, d := range err.Details {
		field, _ := strings.CutPrefix(d.Field, path+".")
		if hint, ok := settingsHints[field]; ok && d.Message == "unknown field" {
			err.Details[i].Message = "unknown field: " + hint
			err.Message = d.Field + ": " + err.Details[i].Message
		}
	}
	return err
}

func (c *checker) codec(codec, outputType, path string) string {
	if codec == "" {
		switch outputType {
		case renderer.OutputImage:
			return renderer.CodecPNG
		case renderer.OutputAEP:
			return ""
		}
		return "video_h264_vbr_15mbps"
	}
	normal := codec
	if !strings.HasPrefix(codec, "video_") && !strings.HasPrefix(codec, "image_") {
		if slices.Contains(imageCodecs, "image_"+codec) {
			normal = "image_" + codec
		} else {
			normal = "video_" + codec
		}
	}
	switch {
	case outputType == renderer.OutputAEP:
		c.add(CodeValidation, path, "does not apply to aep output")
	case outputType == renderer.OutputImage && !slices.Contains(imageCodecs, normal):
		c.add(CodeValidation, path, "an image needs %s, not %q", quoteList(imageCodecs), codec)
	case outputType == renderer.OutputVideo && !slices.Contains(videoCodecs, normal):
		c.add(CodeValidation, path, "a video needs one of %s, not %q", quoteList(videoCodecs), codec)
	}
	return normal
}

// engine picks the job's engine: the one asked for, if the template supports it, or the
// template's preferred engine.
func (c *checker) engine(tpl *persistence.Template, s renderer.Settings, path string) string {
	if tpl == nil || tpl.Inspection == nil {
		return s.Engine
	}
	engines := tpl.Inspection.Engines
	if s.Engine == "" {
		if len(engines) == 0 {
			c.add(CodeValidation, path, "no render engine can render template %s", tpl.ID)
			return ""
		}
		return engines[0]
	}
	if !slices.Contains(engines, s.Engine) && !(isAfterEffects(s.Engine) && slices.ContainsFunc(engines, isAfterEffects)) {
		c.add(CodeValidation, path, "template %s can be rendered by %s, not %q", tpl.ID, quoteList(engines), s.Engine)
	}
	if s.Engine == renderer.EngineLottie && s.Type == renderer.OutputAEP {
		c.add(CodeValidation, path, "aep output needs an After Effects engine")
	}
	return s.Engine
}

func isAfterEffects(engine string) bool { return strings.HasPrefix(engine, "ae") }

var fileNamePattern = regexp.MustCompile(`^[^/\\\x00]{1,255}$`)

// fonts reads a job's fonts: each a font of the team's library by its file name, or by its family
// or PostScript name (case, spaces, hyphens and underscores aside), kept as its file name; a name
// no font of the library has is kept as it is and listed missing.
func (c *checker) fonts(names []string, path string) (fonts, missing []string) {
	if len(names) > 100 {
		c.add(CodeValidation, path, "at most 100 fonts, got %d", len(names))
		return nil, nil
	}
	for i, name := range names {
		if !fileNamePattern.MatchString(name) || name == "." || name == ".." {
			c.add(CodeValidation, fmt.Sprintf("%s[%d]", path, i), "must be a font's file name, family name or PostScript name")
			continue
		}
		found := c.cat.FontExists(name)
		if !found {
			if f := c.libraryFont(name); f != nil {
				name, found = f.FileName, true
			}
		}
		if slices.Contains(fonts, name) {
			continue
		}
		fonts = append(fonts, name)
		if !found {
			missing = append(missing, name)
		}
	}
	return fonts, missing
}

// libraryFont is the team's font whose family or PostScript name is name, compared as the
// engines compare font names; nil when none is.
func (c *checker) libraryFont(name string) *persistence.Font {
	key := renderer.FontKey(name)
	for _, f := range c.cat.Fonts() {
		for _, n := range []string{f.FamilyName, f.PostScriptName} {
			if n != "" && renderer.FontKey(n) == key {
				return f
			}
		}
	}
	return nil
}

// templateFontsMissing lists the template's own fonts (the names it uses) that neither the font
// files it bundles, nor a font file the job names, nor the team's library provides, nor every
// ready render node of the job's engine has installed (FontsMissing).
func (c *checker) templateFontsMissing(used, bundled, jobFonts []string, engine string) []string {
	if len(used) == 0 {
		return nil
	}
	return FontsMissing(used, bundled, jobFonts, c.cat.Fonts(), func(name string) bool { return c.cat.InstalledFont(engine, name) })
}

// FontsMissing lists the fonts of used (the names a template uses) that neither the font files
// bundled, nor the font files of jobFonts, nor the library provides, nor installed says are on
// the render nodes. A font provides a name that is its family name, its PostScript name (what
// After Effects projects use) or its file name without the extension, compared as the Lottie
// engine compares them: case, spaces, hyphens and underscores aside.
func FontsMissing(used, bundled, jobFonts []string, library []*persistence.Font, installed func(name string) bool) (missing []string) {
	provided := map[string]bool{}
	for _, fileName := range jobFonts {
		provided[renderer.FontKey(strings.TrimSuffix(fileName, path.Ext(fileName)))] = true
	}
	for _, name := range bundled {
		provided[renderer.FontKey(name)] = true
	}
	for _, f := range library {
		for _, name := range []string{f.FamilyName, f.PostScriptName, strings.TrimSuffix(f.FileName, path.Ext(f.FileName))} {
			if name != "" {
				provided[renderer.FontKey(name)] = true
			}
		}
	}
	for _, name := range used {
		if !provided[renderer.FontKey(name)] && !installed(name) && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	return missing
}

// Priority bounds.
const maxPriority = 1_000_000

func (c *checker) priority(p *float64, path string) int {
	if p == nil {
		return 0
	}
	if *p != math.Trunc(*p) || math.Abs(*p) > maxPriority {
		c.add(CodeValidation, path, "must be an integer between %d and %d", -maxPriority, maxPriority)
		return 0
	}
	if msg := PriorityAllowed(int(*p), c.cat.Policy()); msg != "" {
		c.add(CodeValidation, path, "%s", msg)
	}
	return int(*p)
}

// PriorityAllowed says why a team's policy refuses a priority, "" when it allows it.
func PriorityAllowed(priority int, p persistence.TeamPolicy) string {
	if p.MaxPriority != nil && priority > *p.MaxPriority {
		return fmt.Sprintf("must be at most %d, the team's maxPriority (set by the farm's admin)", *p.MaxPriority)
	}
	return ""
}

// ValidTag reports whether a tag matches ^[a-zA-Z0-9_-]{1,64}$ (checked on every job created,
// so without a regular expression).
func ValidTag(tag string) bool {
	if len(tag) == 0 || len(tag) > 64 {
		return false
	}
	for i := 0; i < len(tag); i++ {
		switch c := tag[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// tags accepts an array of strings or one comma-separated string.
func (c *checker) tags(raw json.RawMessage, path string) []string {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	list, joined, ok := readStrings(raw)
	if !ok {
		c.add(CodeValidation, path, "must be an array of strings or one comma-separated string")
		return nil
	}
	if joined {
		list = strings.Split(list[0], ",")
	}
	if len(list) > 20 {
		c.add(CodeValidation, path, "at most 20 tags, got %d", len(list))
		return nil
	}
	var tags []string
	for _, tag := range list {
		if !ValidTag(tag) {
			c.add(CodeValidation, path, "tag %q must match ^[a-zA-Z0-9-_]+$ (at most 64 characters)", tag)
			continue
		}
		if !slices.Contains(tags, tag) {
			tags = append(tags, tag)
		}
	}
	return tags
}

// secrets checks that every ${secret.NAME} in s names an existing secret.
func (c *checker) secrets(s, path string) {
	for _, name := range secrets.References(s) {
		if !c.cat.SecretExists(name) {
			c.add(CodeSecretNotFound, path, "no secret named %q", name)
		}
	}
}

// url checks an http(s) URL a node or the webhook sender will reach; secret references are
// allowed and checked for existence (the URL itself is then checked when used).
func (c *checker) url(s, path string, required bool) string {
	if s == "" {
		if required {
			c.add(CodeValidation, path, "is required")
		}
		return ""
	}
	if len(s) > 8192 {
		c.add(CodeValidation, path, "is longer than 8192 characters")
		return s
	}
	c.secrets(s, path)
	if len(secrets.References(s)) > 0 && !strings.HasPrefix(s, "http") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.add(CodeValidation, path, "must be an http or https URL")
		return s
	}
	if !c.lim.AllowPrivateURLs && privateHost(u.Hostname()) {
		c.add(CodeValidation, path, "points to a private or loopback address, which this farm does not reach (its operator may set [server] allow_private_urls = true to permit them)")
	}
	return s
}

func privateHost(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return outbound.Internal(addr)
}

func (c *checker) merge(e *Error) {
	if len(e.Details) == 0 {
		c.add(e.Code, "", "%s", e.Message)
		return
	}
	for _, d := range e.Details {
		c.add(e.Code, d.Field, "%s", d.Message)
	}
}

// URL checks an http(s) URL the coordinator fetches itself (a template src): secret references
// are not substituted there, so they are refused.
func URL(raw, field string, lim Limits) *Error {
	c := &checker{cat: noCatalog{}, lim: lim.withDefaults()}
	c.url(raw, field, true)
	return c.err()
}

// noCatalog knows no templates, fonts or secrets.
type noCatalog struct{}

func (noCatalog) Template(string) (*persistence.Template, error) { return nil, persistence.ErrNotFound }
func (noCatalog) FontExists(string) bool                         { return false }
func (noCatalog) Fonts() []*persistence.Font                     { return nil }
func (noCatalog) InstalledFont(string, string) bool              { return false }
func (noCatalog) SecretExists(string) bool                       { return false }
func (noCatalog) Policy() persistence.TeamPolicy                 { return persistence.TeamPolicy{} }
func (noCatalog) LimitExists(string) bool                        { return false }
