// Package fontfile reads what the coordinator needs from a TrueType file: that it is one, its
// family name and its PostScript name (the name After Effects projects use for a font). It
// bounds every read, so a hostile file yields an error, never a panic.
package fontfile

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"unicode/utf16"
)

// ErrNotTrueType is returned for files that are not TrueType fonts.
var ErrNotTrueType = errors.New("not a TrueType font (.ttf)")

// Names are the names a font gives itself ("" where it gives none).
type Names struct {
	Family     string
	PostScript string
}

// Read checks that data is a TrueType font and returns its names.
func Read(data []byte) (Names, error) {
	if len(data) < 12 {
		return Names{}, ErrNotTrueType
	}
	switch string(data[:4]) {
	case "\x00\x01\x00\x00", "true":
	case "OTTO":
		return Names{}, errors.New("an OpenType font with CFF outlines (.otf), not a TrueType font (.ttf)")
	case "ttcf":
		return Names{}, errors.New("a font collection (.ttc), not a single TrueType font (.ttf)")
	default:
		return Names{}, ErrNotTrueType
	}
	numTables := int(binary.BigEndian.Uint16(data[4:]))
	if 12+16*numTables > len(data) {
		return Names{}, errors.New("the font's table directory is truncated")
	}
	for i := range numTables {
		rec := data[12+16*i:]
		if string(rec[:4]) != "name" {
			continue
		}
		off, length := int(binary.BigEndian.Uint32(rec[8:])), int(binary.BigEndian.Uint32(rec[12:]))
		if off < 0 || length < 0 || off > len(data) || length > len(data)-off {
			return Names{}, errors.New("the font's name table lies outside the file")
		}
		table := data[off : off+length]
		return Names{Family: fromNameTable(table, familyScore), PostScript: fromNameTable(table, postScriptScore)}, nil
	}
	return Names{}, nil
}

// familyScore prefers the typographic family (name id 16) over the family (id 1).
func familyScore(nameID uint16) int {
	switch nameID {
	case 16:
		return 4
	case 1:
		return 0
	}
	return -1
}

func postScriptScore(nameID uint16) int {
	if nameID == 6 {
		return 0
	}
	return -1
}

// fromNameTable returns the name that idScore ranks highest (ids it scores below 0 are not
// taken), Windows English names before others.
func fromNameTable(t []byte, idScore func(nameID uint16) int) string {
	if len(t) < 6 {
		return ""
	}
	count := int(binary.BigEndian.Uint16(t[2:]))
	storage := int(binary.BigEndian.Uint16(t[4:]))
	best, bestScore := "", -1
	for i := range count {
		rec := 6 + 12*i
		if rec+12 > len(t) {
			break
		}
		platform := binary.BigEndian.Uint16(t[rec:])
		encoding := binary.BigEndian.Uint16(t[rec+2:])
		language := binary.BigEndian.Uint16(t[rec+4:])
		nameID := binary.BigEndian.Uint16(t[rec+6:])
		length := int(binary.BigEndian.Uint16(t[rec+8:]))
		offset := int(binary.BigEndian.Uint16(t[rec+10:]))
		score := idScore(nameID)
		if score < 0 {
			continue
		}
		start := storage + offset
		if start > len(t) || length > len(t)-start {
			continue
		}
		name := decode(platform, encoding, t[start:start+length])
		if name == "" {
			continue
		}
		if platform == 3 {
			score += 2
		}
		if language == 0x409 || (platform == 1 && language == 0) {
			score++
		}
		if score > bestScore {
			best, bestScore = name, score
		}
	}
	return best
}

func decode(platform, encoding uint16, b []byte) string {
	var s string
	switch {
	case platform == 0 || (platform == 3 && (encoding == 1 || encoding == 10)):
		if len(b)%2 != 0 {
			return ""
		}
		u := make([]uint16, len(b)/2)
		for i := range u {
			u[i] = binary.BigEndian.Uint16(b[2*i:])
		}
		s = string(utf16.Decode(u))
	case platform == 1 && encoding == 0:
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c) // Mac Roman agrees with ASCII, which font names use
		}
		s = string(r)
	default:
		return ""
	}
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return -1
		}
		return r
	}, s))
}

// maxNameTable bounds the name table NamesAt reads.
const maxNameTable = 1 << 20

// NamesAt reads the names of an installed font file of size bytes: TrueType, OpenType (CFF
// outlines too) or the first font of a collection, reading its table directory and name table
// only (a system's fonts are many, and some large).
func NamesAt(r io.ReaderAt, size int64) (Names, error) {
	head := make([]byte, 12)
	if _, err := r.ReadAt(head, 0); err != nil {
		return Names{}, ErrNotTrueType
	}
	var offset int64
	switch string(head[:4]) {
	case "\x00\x01\x00\x00", "true", "OTTO":
	case "ttcf":
		offset = int64(binary.BigEndian.Uint32(head[8:])) // the collection's first font
		if _, err := r.ReadAt(head, offset); err != nil {
			return Names{}, ErrNotTrueType
		}
	default:
		return Names{}, ErrNotTrueType
	}
	numTables := int64(binary.BigEndian.Uint16(head[4:]))
	dir := make([]byte, 16*numTables)
	if _, err := r.ReadAt(dir, offset+12); err != nil {
		return Names{}, errors.New("the font's table directory is truncated")
	}
	for i := range numTables {
		rec := dir[16*i:]
		if string(rec[:4]) != "name" {
			continue
		}
		off, length := int64(binary.BigEndian.Uint32(rec[8:])), int64(binary.BigEndian.Uint32(rec[12:]))
		if length > maxNameTable || off+length > size {
			return Names{}, errors.New("the font's name table lies outside the file, or is too large")
		}
		table := make([]byte, length)
		if _, err := r.ReadAt(table, off); err != nil {
			return Names{}, err
		}
		return Names{Family: fromNameTable(table, familyScore), PostScript: fromNameTable(table, postScriptScore)}, nil
	}
	return Names{}, nil
}
