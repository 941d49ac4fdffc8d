package renderer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Asset types a job may carry.
const (
	AssetText      = "text"
	AssetData      = "data"
	AssetImage     = "image"
	AssetVideo     = "video"
	AssetAudio     = "audio"
	AssetStatic    = "static"
	AssetEssential = "essential"
	AssetScript    = "script"
	AssetFunction  = "function"
	AssetJob       = "job"
)

// Asset targets a named layer and replaces or overrides its content.
type Asset struct {
	Type        string          `json:"type"`
	LayerName   string          `json:"layerName,omitempty"`
	Composition string          `json:"composition,omitempty"`
	Property    string          `json:"property,omitempty"`
	Value       json.RawMessage `json:"value,omitempty"`
	Expression  string          `json:"expression,omitempty"`
	Src         string          `json:"src,omitempty"`
	Name        string          `json:"name,omitempty"`
	Params      json.RawMessage `json:"params,omitempty"`
	// JobID links an asset of type job to the child job rendering it.
	JobID string `json:"jobId,omitempty"`
	// LocalPath is where the node staged Src for one render; never stored.
	LocalPath string `json:"-"`
}

// Output types of settings.type.
const (
	OutputVideo = "video"
	OutputImage = "image"
	OutputAEP   = "aep"
)

// Settings are a job's output settings, normalised by validation.
type Settings struct {
	Type    string  `json:"type,omitempty"`
	Frames  *Frames `json:"frames,omitempty"`
	Quality string  `json:"quality,omitempty"`
	Codec   string  `json:"codec,omitempty"`
	Engine  string  `json:"engine,omitempty"`
	Preset  string  `json:"preset,omitempty"`
}

// Frames is settings.frames: one frame, or the range [Start, End].
type Frames struct {
	Start int
	End   int
	Range bool
}

// MarshalJSON writes the form the client sent: an integer or [start, end].
func (f Frames) MarshalJSON() ([]byte, error) {
	if f.Range {
		return []byte("[" + strconv.Itoa(f.Start) + "," + strconv.Itoa(f.End) + "]"), nil
	}
	return []byte(strconv.Itoa(f.Start)), nil
}

// UnmarshalJSON accepts an integer >= 0 or [start, end] with end > start >= 0.
func (f *Frames) UnmarshalJSON(b []byte) error {
	var single int
	if err := json.Unmarshal(b, &single); err == nil {
		if single < 0 {
			return errors.New("must be >= 0")
		}
		*f = Frames{Start: single, End: single}
		return nil
	}
	var pair []int
	if err := json.Unmarshal(b, &pair); err != nil {
		return errors.New("must be an integer or [start, end]")
	}
	if len(pair) != 2 {
		return fmt.Errorf("must be [start, end], got %d numbers", len(pair))
	}
	if pair[0] < 0 || pair[1] <= pair[0] {
		return errors.New("[start, end] needs 0 <= start < end")
	}
	*f = Frames{Start: pair[0], End: pair[1], Range: true}
	return nil
}

// Codecs accepted in settings.codec, in their normalised form.
const (
	CodecPNG  = "image_png"
	CodecJPEG = "image_jpeg"
)

// OutputExtension is the file extension of a job's output, from its normalised settings.
func OutputExtension(s Settings) string {
	switch s.Type {
	case OutputAEP:
		return ".zip"
	case OutputImage:
		if s.Frames != nil && s.Frames.Range {
			return ".zip"
		}
		if s.Codec == CodecJPEG {
			return ".jpg"
		}
		return ".png"
	default:
		if len(s.Codec) > len("video_prores") && s.Codec[:len("video_prores")] == "video_prores" {
			return ".mov"
		}
		return ".mp4"
	}
}

// CodecLossless is the codec of the chunks of a split job whose join encodes them once (FFV1,
// alpha and all): chosen by the farm, never by clients.
const CodecLossless = "video_ffv1"

// JoinEncodes reports whether a split job's join encodes its chunks' frames once, the chunks
// being lossless (CodecLossless), rather than copying chunks already encoded as the job asks. A
// constant bit rate H.264 stream is one buffer model from its first frame to its last (what
// broadcast deliveries check); segments encoded apart, each within the model, are not within it
// joined. Every other output is copied: ProRes and still frames are coded frame by frame, and a
// variable bit rate needs no model across its segments.
func JoinEncodes(s Settings) bool {
	return s.Type != OutputImage && strings.HasPrefix(s.Codec, "video_h264_cbr_")
}

// ChunkExtension is the file extension of a chunk's output: its frames encoded as the job asks,
// in a container its join concatenates without decoding (MPEG-TS for H.264, QuickTime for
// ProRes), a Matroska file of CodecLossless when the join encodes, or the zip of its frames for
// an image sequence.
func ChunkExtension(s Settings) string {
	switch ext := OutputExtension(s); {
	case JoinEncodes(s):
		return ".mkv"
	case ext == ".mp4":
		return ".ts"
	default:
		return ext
	}
}

// ContentType is the MIME type served for an output file extension.
func ContentType(ext string) string {
	switch ext {
	case ".mp4":
		return "video/mp4"
	case ".mov":
		return "video/quicktime"
	case ".png":
		return "image/png"
	case ".jpg":
		return "image/jpeg"
	case ".zip":
		return "application/zip"
	default:
		return "application/octet-stream"
	}
}
