package aerender

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/framefarm/framefarm/renderer"
	"github.com/framefarm/framefarm/renderer/fontfile"
	"github.com/framefarm/framefarm/renderer/workfiles"
)

// installedPrefix starts the name of every font framefarm installs, so files a crashed node left
// behind can be told from the user's own fonts and removed.
const installedPrefix = "framefarm-"

// maxFontBytes caps a font file read to learn its family.
const maxFontBytes = 64 << 20

// fontBook installs renders' fonts into the font folder After Effects reads, which every render
// on the machine shares. Each file is installed under a name made from its content, for the
// render that needs it, and removed when no render needs it any more; so one team's font never
// stays behind to stand in for another's. After Effects picks fonts by family: a render whose
// font has a family that another render installed from a different file waits until that
// render ends, rather than render with whichever of the two the system offers.
type fontBook struct {
	dir      string
	mu       sync.Mutex
	changed  *sync.Cond
	refs     map[string]int    // installed file name -> renders using it
	families map[string]string // family -> installed file name
	// waiting, when set, is called each time a render starts waiting for a family (tests).
	waiting func()
}

var books sync.Map // font folder -> *fontBook

// fontBookFor returns the book of a font folder, shared by the engines that use it; the first
// call removes what an earlier run of the node left installed.
func fontBookFor(dir string) *fontBook {
	if b, ok := books.Load(dir); ok {
		return b.(*fontBook)
	}
	b := &fontBook{dir: dir, refs: map[string]int{}, families: map[string]string{}}
	b.changed = sync.NewCond(&b.mu)
	if existing, loaded := books.LoadOrStore(dir, b); loaded {
		return existing.(*fontBook)
	}
	leftovers, _ := filepath.Glob(filepath.Join(dir, installedPrefix+"*"))
	for _, p := range leftovers {
		os.Remove(p)
	}
	return b
}

// jobFont is one font a render needs: its file, the name it is installed under, its family.
type jobFont struct{ source, name, family, shown string }

// describe reads a font's content hash and family.
func describe(f renderer.FontFile) (jobFont, error) {
	file, err := os.Open(f.Path)
	if err != nil {
		return jobFont{}, fmt.Errorf("%w: %w", renderer.ErrNodeFault, err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxFontBytes+1))
	if err != nil {
		return jobFont{}, fmt.Errorf("%w: %w", renderer.ErrNodeFault, err)
	}
	if len(data) > maxFontBytes {
		return jobFont{}, fmt.Errorf("font %s is larger than %d bytes", f.FileName, maxFontBytes)
	}
	sum := sha256.Sum256(data)
	base := filepath.Base(f.FileName)
	names, err := fontfile.Read(data)
	family := names.Family
	if err != nil || family == "" {
		family = "file " + base // not readable as a font: its file name stands for its family
	}
	return jobFont{source: f.Path, shown: base, family: strings.ToLower(family),
		name: installedPrefix + hex.EncodeToString(sum[:6]) + "-" + base}, nil
}

// install puts a render's fonts in the folder, waiting while another render holds one of their
// families with another file; release removes them once no render needs them.
func (b *fontBook) install(ctx context.Context, fonts []renderer.FontFile, log io.Writer) (release func(), err error) {
	var wanted []jobFont
	chosen := map[string]string{}
	for _, f := range fonts {
		jf, err := describe(f)
		if err != nil {
			return nil, err
		}
		if other, dup := chosen[jf.family]; dup {
			if other != jf.name {
				fmt.Fprintf(log, "font %s left out: the job already has a font of family %q\n", jf.shown, jf.family)
			}
			continue
		}
		chosen[jf.family] = jf.name
		wanted = append(wanted, jf)
	}
	if len(wanted) == 0 {
		return func() {}, nil
	}
	stop := context.AfterFunc(ctx, func() { b.mu.Lock(); b.changed.Broadcast(); b.mu.Unlock() })
	defer stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.conflict(wanted) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if b.waiting != nil {
			b.waiting()
		}
		b.changed.Wait()
	}
	if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: the font folder cannot be made: %w", renderer.ErrNodeFault, err)
	}
	for i, f := range wanted {
		if b.refs[f.name] == 0 {
			if err := workfiles.Copy(f.source, filepath.Join(b.dir, f.name), 0); err != nil {
				b.releaseLocked(wanted[:i])
				return nil, fmt.Errorf("%w: font %s cannot be installed: %w", renderer.ErrNodeFault, f.shown, err)
			}
		}
		b.refs[f.name]++
		b.families[f.family] = f.name
		fmt.Fprintf(log, "installed font %s as %s\n", f.shown, f.name)
	}
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.releaseLocked(wanted)
	}, nil
}

// conflict reports whether a family of wanted is installed from another file.
func (b *fontBook) conflict(wanted []jobFont) bool {
	for _, f := range wanted {
		if name, ok := b.families[f.family]; ok && name != f.name {
			return true
		}
	}
	return false
}

func (b *fontBook) releaseLocked(fonts []jobFont) {
	for _, f := range fonts {
		if b.refs[f.name]--; b.refs[f.name] > 0 {
			continue
		}
		delete(b.refs, f.name)
		delete(b.families, f.family)
		os.Remove(filepath.Join(b.dir, f.name))
	}
	b.changed.Broadcast()
}
