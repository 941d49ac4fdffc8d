// Package inspect reads template files: what kind of file an upload really is, and (through an
// Inspector) which compositions and layers it holds.
package inspect

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	"github.com/framefarm/framefarm/renderer"
)

// Format is what a file really is, whatever it was declared as.
type Format string

// Formats Sniff recognises.
const (
	FormatAEP   Format = "aep"   // After Effects binary project (RIFX, Egg!)
	FormatAEPX  Format = "aepx"  // After Effects XML project
	FormatZip   Format = "zip"   // zip archive holding a project or a Lottie export
	FormatMogrt Format = "mogrt" // zip archive with definition.json
	FormatJSON  Format = "json"  // a JSON document: a Lottie animation, as Bodymovin exports it
)

// maxZipEntries caps the entries of an archive Sniff will list.
const maxZipEntries = 100000

// Sniff tells what the file at p is from its content alone.
func Sniff(p string) (Format, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return "", err
	}
	head = head[:n]
	switch {
	case len(head) >= 12 && string(head[:4]) == "RIFX" && string(head[8:12]) == "Egg!":
		return FormatAEP, nil
	case looksLikeAEPX(head):
		return FormatAEPX, nil
	case bytes.HasPrefix(head, []byte("PK\x03\x04")) || bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return sniffZip(f)
	case strings.HasPrefix(strings.TrimLeft(string(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))), " \t\r\n"), "{"):
		return FormatJSON, nil
	case n == 0:
		return "", errors.New("the file is empty")
	}
	return "", errors.New("the file is neither an After Effects project (aep, aepx), a zip archive nor a Lottie animation (json)")
}

func looksLikeAEPX(head []byte) bool {
	s := strings.TrimLeft(string(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))), " \t\r\n")
	return strings.HasPrefix(s, "<?xml") && strings.Contains(s, "AfterEffectsProject")
}

func sniffZip(f *os.File) (Format, error) {
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	zr, err := zip.NewReader(f, info.Size())
	if err != nil {
		return "", fmt.Errorf("the zip archive cannot be read: %w", err)
	}
	if len(zr.File) > maxZipEntries {
		return "", fmt.Errorf("the zip archive has %d entries, more than the %d allowed", len(zr.File), maxZipEntries)
	}
	for _, e := range zr.File {
		if path.Base(e.Name) == "definition.json" && !strings.Contains(e.Name, "__MACOSX") {
			return FormatMogrt, nil
		}
	}
	return FormatZip, nil
}

// MatchesType reports whether a file of format f may back a template declared as templateType.
func MatchesType(templateType string, f Format) bool {
	switch templateType {
	case renderer.TemplateAEP:
		return f == FormatAEP || f == FormatAEPX
	case renderer.TemplateZip:
		return f == FormatZip
	case renderer.TemplateMogrt:
		return f == FormatMogrt
	case renderer.TemplateJSON:
		return f == FormatJSON
	}
	return false
}
