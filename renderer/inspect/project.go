package inspect

import (
	"bytes"
	"fmt"
	"io"

	"github.com/framefarm/framefarm/renderer"
)

// inspectAEPBytes reads a binary (.aep) or XML (.aepx) project held in memory.
func inspectAEPBytes(b []byte) (*renderer.Inspection, error) {
	if looksLikeAEPX(b[:min(len(b), 512)]) {
		return inspectAEPX(bytes.NewReader(b))
	}
	root, err := parseRIFX(b)
	if err != nil {
		return nil, err
	}
	return inspectTree(root)
}

// inspectAEPX reads an XML project as it streams in: only its chunk tree is held, not its text.
func inspectAEPX(r io.Reader) (*renderer.Inspection, error) {
	root, err := parseAEPX(r)
	if err != nil {
		return nil, err
	}
	return inspectTree(root)
}

func inspectTree(root *chunk) (*renderer.Inspection, error) {
	in, err := inspectProject(root)
	if err != nil {
		return nil, fmt.Errorf("the After Effects project cannot be read: %w", err)
	}
	return in, nil
}
