package inspect

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// chunk is a node of an After Effects project: a RIFX chunk of an .aep, or an element of an
// .aepx, which holds the same tree as XML. Lists have kids; other chunks have data.
type chunk struct {
	id   string
	list bool
	data []byte
	kids []*chunk
}

// Bounds of the project tree: hostile files must not exhaust the stack or the memory.
const (
	maxChunkDepth = 64
	maxChunks     = 2_000_000
)

// child returns the first child with the id.
func (c *chunk) child(id string) *chunk {
	for _, k := range c.kids {
		if k.id == id {
			return k
		}
	}
	return nil
}

// text is the first Utf8 child's text.
func (c *chunk) text() string {
	if u := c.child("Utf8"); u != nil {
		return strings.TrimRight(string(u.data), "\x00")
	}
	return ""
}

// find returns the first node with the id in the subtree, depth first.
func (c *chunk) find(id string) *chunk {
	for _, k := range c.kids {
		if k.id == id {
			return k
		}
		if f := k.find(id); f != nil {
			return f
		}
	}
	return nil
}

// parseRIFX reads the chunk tree of a binary .aep (RIFX, form Egg!).
func parseRIFX(b []byte) (*chunk, error) {
	if len(b) < 12 || string(b[:4]) != "RIFX" || string(b[8:12]) != "Egg!" {
		return nil, errors.New("not an After Effects project: it does not start with RIFX...Egg!")
	}
	size := int64(binary.BigEndian.Uint32(b[4:8]))
	body := b[12:]
	if size-4 < int64(len(body)) && size >= 4 {
		body = body[:size-4]
	}
	root := &chunk{id: "Egg!", list: true}
	count := 0
	if err := readChunks(body, root, 0, &count, 12); err != nil {
		return nil, err
	}
	return root, nil
}

func readChunks(b []byte, parent *chunk, depth int, count *int, offset int) error {
	if depth > maxChunkDepth {
		return fmt.Errorf("damaged project: chunks nest deeper than %d levels (at byte %d)", maxChunkDepth, offset)
	}
	for len(b) >= 8 {
		id := string(b[:4])
		size := int(binary.BigEndian.Uint32(b[4:8]))
		if size > len(b)-8 {
			if depth == 0 {
				return nil // the XMP metadata after the last chunk
			}
			return fmt.Errorf("damaged project: chunk %q at byte %d claims %d bytes, but only %d remain", printable(id), offset, size, len(b)-8)
		}
		if *count++; *count > maxChunks {
			return fmt.Errorf("the project has more than %d chunks", maxChunks)
		}
		data := b[8 : 8+size]
		switch {
		case id != "LIST":
			parent.kids = append(parent.kids, &chunk{id: id, data: data})
		case size < 4:
			return fmt.Errorf("damaged project: list at byte %d is shorter than its type", offset)
		case string(data[:4]) == "btdk":
			// A text document: its content is not made of chunks.
			parent.kids = append(parent.kids, &chunk{id: "btdk", data: data[4:]})
		default:
			list := &chunk{id: string(data[:4]), list: true}
			parent.kids = append(parent.kids, list)
			if err := readChunks(data[4:], list, depth+1, count, offset+12); err != nil {
				return err
			}
		}
		n := 8 + size + size%2
		if n > len(b) {
			return nil
		}
		b, offset = b[n:], offset+n
	}
	return nil
}

func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}

// parseAEPX reads the chunk tree of an .aepx: an element per chunk, hex data in bdata,
// Utf8 chunks as <string> elements, lists as elements with children.
func parseAEPX(r io.Reader) (*chunk, error) {
	dec := xml.NewDecoder(r)
	dec.Strict = true
	var stack []*chunk
	var root *chunk
	count := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("damaged project XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if count++; count > maxChunks {
				return nil, fmt.Errorf("the project has more than %d elements", maxChunks)
			}
			if len(stack) > maxChunkDepth {
				return nil, fmt.Errorf("damaged project XML: elements nest deeper than %d levels", maxChunkDepth)
			}
			if root != nil && len(stack) == 0 {
				return nil, fmt.Errorf("damaged project XML: <%s> follows the end of the project", t.Name.Local)
			}
			if root == nil {
				if t.Name.Local != "AfterEffectsProject" {
					return nil, fmt.Errorf("not an After Effects XML project: the root element is <%s>", t.Name.Local)
				}
				root = &chunk{id: "Egg!", list: true}
				stack = append(stack, root)
				continue
			}
			c := &chunk{id: t.Name.Local, list: true}
			if c.id == "string" {
				c.id, c.list = "Utf8", false
			}
			for _, a := range t.Attr {
				if a.Name.Local == "bdata" {
					data, err := hex.DecodeString(a.Value)
					if err != nil {
						return nil, fmt.Errorf("damaged project XML: <%s> has bad bdata: %w", c.id, err)
					}
					c.data, c.list = data, false
				}
			}
			parent := stack[len(stack)-1]
			parent.kids = append(parent.kids, c)
			stack = append(stack, c)
		case xml.EndElement:
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			if len(stack) > 0 && stack[len(stack)-1].id == "Utf8" {
				top := stack[len(stack)-1]
				top.data = append(top.data, t...)
			}
		}
	}
	if root == nil {
		return nil, errors.New("not an After Effects XML project: no AfterEffectsProject element")
	}
	return root, nil
}
