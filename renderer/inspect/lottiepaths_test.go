package inspect

import (
	"path"
	"strings"
	"testing"
)

func TestLottieFilePathStaysInTheTemplate(t *testing.T) {
	for _, ok := range [][2]string{{"images/", "img_0.png"}, {"", "img.png"}, {"a/b/", "c.png"}, {"", "data:image/png;base64,AAAA"}, {"images/", "x..y.png"}} {
		if err := LottieFilePath(ok[0], ok[1]); err != nil {
			t.Errorf("%q %q: %v", ok[0], ok[1], err)
		}
	}
	for _, bad := range [][2]string{{"../../etc/", "passwd"}, {"/etc/", "passwd"}, {"", "/etc/passwd"}, {"images/../../", "x.png"},
		{"", "file:///etc/passwd"}, {"http://169.254.169.254/", "latest"}, {`C:\Windows\`, "win.ini"}, {`images\..\..\`, "x.png"}} {
		if err := LottieFilePath(bad[0], bad[1]); err == nil {
			t.Errorf("%q %q was accepted", bad[0], bad[1])
		}
	}
	if LottieFontPath("https://fonts.googleapis.com/css?family=Roboto") != nil || LottieFontPath("") != nil || LottieFontPath("/usr/share/fonts/x.ttf") == nil {
		t.Error("font paths")
	}
}

// TestLottieTemplateReadingTheNodesFilesIsRefused: inspection names the field at fault.
func TestLottieTemplateReadingTheNodesFilesIsRefused(t *testing.T) {
	base := `{"fr":25,"ip":0,"op":25,"w":100,"h":100,"layers":[{"ty":2,"nm":"Photo","refId":"image_0","ip":0,"op":25,"st":0,"ks":{}}],`
	for name, tc := range map[string]struct{ doc, field string }{
		"climbing image": {base + `"assets":[{"id":"image_0","w":10,"h":10,"u":"../../../etc/","p":"passwd"}]}`, `assets[0] (id "image_0") u and p`},
		"absolute image": {base + `"assets":[{"id":"image_0","w":10,"h":10,"u":"","p":"/etc/shadow"}]}`, `assets[0] (id "image_0") u and p`},
		"font file":      {base + `"assets":[],"fonts":{"list":[{"fFamily":"X","fName":"X","fPath":"../../x.ttf"}]}}`, "fonts.list[0].fPath"},
	} {
		_, err := inspectLottie([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error naming %s", name, err, tc.field)
		}
	}
}

// FuzzLottieFilePath: whatever an accepted path is, it stays inside the template's folder once
// joined to it (or is a data URI).
func FuzzLottieFilePath(f *testing.F) {
	for _, seed := range [][2]string{{"images/", "a.png"}, {"../", "x"}, {"", "/etc/passwd"}, {`..\`, "x"}, {"", "data:x"}, {"a/./../", "b"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, u, p string) {
		if LottieFilePath(u, p) != nil || strings.HasPrefix(p, "data:") {
			return
		}
		root := "/template"
		joined := path.Join(root, strings.ReplaceAll(u+p, `\`, "/"))
		if joined != root && !strings.HasPrefix(joined, root+"/") {
			t.Fatalf("%q %q was accepted and resolves to %q", u, p, joined)
		}
	})
}
