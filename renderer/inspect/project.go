package inspect

import (
	"bytes"
	"fmt"

	"github.com/framefarm/framefarm/renderer"
)

// inspectAEPBytes reads a binary (.aep) or XML (.aepx) project held in memory.
func inspectAEPBytes(b []byte) (*renderer.Inspection, error) {
	var root *chunk
	var err error
	if looksLikeAEPX(b[:min(len(b), 512)]) {
		root, err = parseAEPX(bytes.NewReader(b))
	} else {
		root, err = parseRIFX(b)
	}
	if err != nil {
		return nil, err
	}
	in, err := inspectProject(root)
	if err != nil {
		return nil, fmt.Errorf("the After Effects project cannot be read: %w", err)
	}
	return in, nil
}
