// Package blobs is the embedded object store: template files, fonts and render outputs kept as
// files under the data directory, reached from outside through HMAC-signed, expiring URLs.
package blobs

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/framefarm/framefarm/persistence"
)

// ErrTooLarge is returned when a stored stream exceeds its size limit.
var ErrTooLarge = persistence.ErrTooLarge

// ErrBadKey is returned for keys that are not plain relative paths.
var ErrBadKey = errors.New("invalid object key")

// Store keeps objects as files under one root directory.
type Store struct {
	root string
	tmp  string
}

// Open prepares a store rooted at dir.
func Open(dir string) (*Store, error) {
	s := &Store{root: filepath.Join(dir, "objects"), tmp: filepath.Join(dir, "tmp")}
	for _, d := range []string{s.root, s.tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// CheckKey accepts keys made of clean, relative path segments.
func CheckKey(key string) error {
	if key == "" || len(key) > 512 || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") ||
		path.Clean(key) != key || strings.HasPrefix(key, "../") || key == ".." || strings.Contains(key, "\x00") {
		return ErrBadKey
	}
	return nil
}

// Path is the file behind a key.
func (s *Store) Path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// Put streams r into the object at key, failing with ErrTooLarge past limit bytes. The object
// appears whole or not at all.
func (s *Store) Put(key string, r io.Reader, limit int64) (persistence.StoredFile, error) {
	dst, err := s.Path(key)
	if err != nil {
		return persistence.StoredFile{}, err
	}
	tmp, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return persistence.StoredFile{}, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	hash := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, hash), io.LimitReader(r, limit+1))
	if err != nil {
		return persistence.StoredFile{}, err
	}
	if n > limit {
		return persistence.StoredFile{}, ErrTooLarge
	}
	if err := tmp.Sync(); err != nil {
		return persistence.StoredFile{}, err
	}
	if err := tmp.Close(); err != nil {
		return persistence.StoredFile{}, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return persistence.StoredFile{}, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return persistence.StoredFile{}, err
	}
	return persistence.StoredFile{Key: key, Size: n, SHA256: hex.EncodeToString(hash.Sum(nil))}, nil
}

// PutFile stores the local file at src under key.
func (s *Store) PutFile(key, src string) (persistence.StoredFile, error) {
	f, err := os.Open(src)
	if err != nil {
		return persistence.StoredFile{}, err
	}
	defer f.Close()
	return s.Put(key, f, 1<<62)
}

// Delete removes the object at key; a missing object is not an error.
func (s *Store) Delete(key string) error {
	p, err := s.Path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Head is the size of the object at key; persistence.ErrNotFound when there is none.
func (s *Store) Head(key string) (int64, error) {
	p, err := s.Path(key)
	if err != nil {
		return 0, err
	}
	info, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) || (err == nil && info.IsDir()) {
		return 0, persistence.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	return info.Size(), nil
}

// Local is the object's own file: nothing to release.
func (s *Store) Local(_ context.Context, key string) (string, func(), error) {
	p, err := s.Path(key)
	if err != nil {
		return "", nil, err
	}
	if _, err := os.Stat(p); err != nil {
		return "", nil, err
	}
	return p, func() {}, nil
}

// Usage counts the objects under prefix and the bytes they hold.
func (s *Store) Usage(_ context.Context, prefix string) (objects, bytes int64, err error) {
	err = s.Walk(prefix, func(_ string, size int64) error {
		objects, bytes = objects+1, bytes+size
		return nil
	})
	return objects, bytes, err
}

// Walk calls fn with the key and size of every object under prefix ("" for all), in key order.
func (s *Store) Walk(prefix string, fn func(key string, size int64) error) error {
	root := s.root
	if prefix = strings.TrimSuffix(prefix, "/"); prefix != "" {
		var err error
		if root, err = s.Path(prefix); err != nil {
			return err
		}
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil // gone since it was listed: a delete, not a failure
		}
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel), info.Size())
	})
}

// DeletePrefix removes every object under a key prefix (a directory).
func (s *Store) DeletePrefix(prefix string) error {
	p, err := s.Path(strings.TrimSuffix(prefix, "/"))
	if err != nil {
		return err
	}
	return os.RemoveAll(p)
}

// Signer makes and checks signed URLs for objects.
type Signer struct {
	base     string
	key      []byte
	signings sync.Pool // of *signing
}

// signing is what one signature needs, kept between signatures: a listing signs a URL per job,
// and a keyed hash set up and buffers grown each time cost more than the hashing.
type signing struct {
	mac           hash.Hash
	msg, sum, out []byte
}

// NewSigner signs URLs under base (the public URL of the coordinator) with key.
func NewSigner(base string, key []byte) *Signer {
	s := &Signer{base: strings.TrimRight(base, "/"), key: key}
	s.signings.New = func() any { return &signing{mac: hmac.New(sha256.New, s.key)} }
	return s
}

// FilesPrefix is the HTTP path under which signed objects are served.
const FilesPrefix = "/files/"

// Base is what every URL this signer makes starts with.
func (s *Signer) Base() string { return s.base + FilesPrefix }

// URL returns a URL allowing method on key until expires.
func (s *Signer) URL(method, key string, expires time.Time) string {
	sg := s.signings.Get().(*signing)
	defer s.signings.Put(sg)
	b := append(append(append(sg.out[:0], s.base...), FilesPrefix...), escapeKey(key)...)
	b = append(b, "?exp="...)
	expAt := len(b)
	b = strconv.AppendInt(b, expires.Unix(), 10)
	exp := b[expAt:]
	b = sg.appendSignature(append(b, "&sig="...), method, key, exp)
	sg.out = b
	return string(b)
}

// Key is the object key of one of this signer's URLs that allows a GET at now (its signature
// matches, it has not expired); ok is false for any other URL.
func (s *Signer) Key(rawURL string, now time.Time) (key string, ok bool) {
	rest, found := strings.CutPrefix(rawURL, s.base+FilesPrefix)
	if !found {
		return "", false
	}
	u, err := url.Parse("/" + rest)
	if err != nil {
		return "", false
	}
	key = strings.TrimPrefix(u.Path, "/")
	q := u.Query()
	if CheckKey(key) != nil || s.Verify("GET", key, q.Get("exp"), q.Get("sig"), now) != nil {
		return "", false
	}
	return key, true
}

// Verify checks a signed request for key at now.
func (s *Signer) Verify(method, key, exp, sig string, now time.Time) error {
	expUnix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return errors.New("signed URL has no valid expiry")
	}
	sg := s.signings.Get().(*signing)
	defer s.signings.Put(sg)
	sg.out = sg.appendSignature(sg.out[:0], method, key, []byte(exp))
	if !hmac.Equal([]byte(sig), sg.out) {
		return errors.New("signed URL signature does not match")
	}
	if now.Unix() > expUnix {
		return fmt.Errorf("signed URL expired at %s", time.Unix(expUnix, 0).UTC().Format(time.RFC3339))
	}
	return nil
}

// appendSignature appends the hex HMAC of method, key and exp, a line each, to b; exp may lie in
// b.
func (sg *signing) appendSignature(b []byte, method, key string, exp []byte) []byte {
	sg.msg = append(append(append(append(append(sg.msg[:0], method...), '\n'), key...), '\n'), exp...)
	sg.mac.Reset()
	sg.mac.Write(sg.msg)
	sg.sum = sg.mac.Sum(sg.sum[:0])
	return hex.AppendEncode(b, sg.sum)
}

func escapeKey(key string) string {
	if !strings.ContainsFunc(key, needsEscape) {
		return key // the usual case (ids, file names), without splitting and joining
	}
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// needsEscape reports whether a key's character changes in a URL path (url.PathEscape leaves
// letters, digits, '/' and -_.~ as they are).
func needsEscape(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("/-_.~", r)
}
