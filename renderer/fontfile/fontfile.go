// Package fontfile reads what the coordinator needs from a TrueType file: that it is one, and
// its family name. It bounds every read, so a hostile file yields an error, never a panic.
package fontfile

import (
	"encoding/binary"
	"errors"
	"strings"
	"unicode/utf16"
)

// ErrNotTrueType is returned for files that are not TrueType fonts.
var ErrNotTrueType = errors.New("not a TrueType font (.ttf)")

// Family checks that data is a TrueType font and returns its family name ("" when the font does
// not name it).
func Family(data []byte) (string, error) {
	if len(data) < 12 {
		return "", ErrNotTrueType
	}
	switch string(data[:4]) {
	case "\x00\x01\x00\x00", "true":
	case "OTTO":
		return "", errors.New("an OpenType font with CFF outlines (.otf), not a TrueType font (.ttf)")
	case "ttcf":
		return "", errors.New("a font collection (.ttc), not a single TrueType font (.ttf)")
	default:
		return "", ErrNotTrueType
	}
	numTables := int(binary.BigEndian.Uint16(data[4:]))
	if 12+16*numTables > len(data) {
		return "", errors.New("the font's table directory is truncated")
	}
	for i := range numTables {
		rec := data[12+16*i:]
		if string(rec[:4]) != "name" {
			continue
		}
		off, length := int(binary.BigEndian.Uint32(rec[8:])), int(binary.BigEndian.Uint32(rec[12:]))
		if off < 0 || length < 0 || off > len(data) || length > len(data)-off {
			return "", errors.New("the font's name table lies outside the file")
		}
		return familyFromNameTable(data[off : off+length]), nil
	}
	return "", nil
}

// familyFromNameTable prefers the typographic family (name id 16) over the family (id 1), and
// Windows English names over others.
func familyFromNameTable(t []byte) string {
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
		if nameID != 1 && nameID != 16 {
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
		score := 0
		if nameID == 16 {
			score += 4
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
			r[i] = rune(c) // Mac Roman agrees with ASCII, which family names use
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
