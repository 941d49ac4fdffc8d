package fontfile

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"
)

// systemFont finds a TrueType font installed on the machine (fonts-dejavu-core is installed by
// the README's set-up command).
func systemFont(t testing.TB) []byte {
	for _, p := range []string{"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"} {
		if data, err := os.ReadFile(p); err == nil {
			return data
		}
	}
	matches, _ := filepath.Glob("/usr/share/fonts/truetype/*/*.ttf")
	if len(matches) == 0 {
		t.Fatal("no TrueType font on this machine; install fonts-dejavu-core (make setup does)")
	}
	data, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestNamesOfARealFont(t *testing.T) {
	names, err := Read(systemFont(t))
	if err != nil {
		t.Fatal(err)
	}
	if names != (Names{Family: "DejaVu Sans", PostScript: "DejaVuSans"}) {
		t.Fatalf("names %+v, want DejaVu Sans, DejaVuSans", names)
	}
}

// buildFont makes a minimal TrueType file with one name table entry.
func buildFont(platform, encoding, nameID uint16, name []byte) []byte {
	header := make([]byte, 12+16)
	binary.BigEndian.PutUint32(header[0:], 0x00010000)
	binary.BigEndian.PutUint16(header[4:], 1)
	copy(header[12:], "name")
	table := make([]byte, 6+12)
	binary.BigEndian.PutUint16(table[2:], 1)
	binary.BigEndian.PutUint16(table[4:], 18)
	binary.BigEndian.PutUint16(table[6:], platform)
	binary.BigEndian.PutUint16(table[8:], encoding)
	binary.BigEndian.PutUint16(table[10:], 0x409)
	binary.BigEndian.PutUint16(table[12:], nameID)
	binary.BigEndian.PutUint16(table[14:], uint16(len(name)))
	table = append(table, name...)
	binary.BigEndian.PutUint32(header[12+8:], uint32(len(header)))
	binary.BigEndian.PutUint32(header[12+12:], uint32(len(table)))
	return append(header, table...)
}

func TestFamilyDecodesUTF16(t *testing.T) {
	u := utf16.Encode([]rune("Héllo Sans"))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.BigEndian.PutUint16(b[2*i:], c)
	}
	got, err := Read(buildFont(3, 1, 1, b))
	if err != nil || got != (Names{Family: "Héllo Sans"}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	got, err = Read(buildFont(3, 1, 6, b))
	if err != nil || got != (Names{PostScript: "Héllo Sans"}) {
		t.Fatalf("a PostScript name: got %+v, %v", got, err)
	}
}

func TestRejectsOtherFiles(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty": nil, "otf": []byte("OTTO\x00\x00\x00\x00\x00\x00\x00\x00"), "zip": []byte("PK\x03\x04aaaaaaaaaaaa"),
		"truncated directory": append([]byte("\x00\x01\x00\x00\x00\x09"), make([]byte, 10)...),
	} {
		if _, err := Read(data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzNames(f *testing.F) {
	f.Add(buildFont(3, 1, 1, []byte{0, 'A'}))
	f.Add(buildFont(1, 0, 16, []byte("Mac")))
	f.Add([]byte("true\x00\x01\x00\x00\x00\x00\x00\x00name"))
	f.Fuzz(func(t *testing.T, data []byte) {
		Read(data) // must not panic
	})
}

// TestNamesAtReadsAnInstalledFont: an installed font's names are read from its name table alone,
// the same as from the whole file; a file that is no font, or cut short, is an error.
func TestNamesAtReadsAnInstalledFont(t *testing.T) {
	data := systemFont(t)
	names, err := NamesAt(bytes.NewReader(data), int64(len(data)))
	if want, _ := Read(data); err != nil || names != want {
		t.Fatalf("names %+v (%v), want %+v", names, err, want)
	}
	for _, bad := range [][]byte{[]byte("not a font at all"), data[:64]} {
		if _, err := NamesAt(bytes.NewReader(bad), int64(len(bad))); err == nil {
			t.Errorf("%d bytes read as a font", len(bad))
		}
	}
}

// FuzzNamesAt: no file, however made, crashes the reading of an installed font's names.
func FuzzNamesAt(f *testing.F) {
	f.Add(buildFont(3, 1, 1, []byte{0, 'A'}))
	f.Add([]byte("ttcf\x00\x01\x00\x00\x00\x00\x00\x0c"))
	f.Fuzz(func(t *testing.T, data []byte) {
		NamesAt(bytes.NewReader(data), int64(len(data)))
	})
}
