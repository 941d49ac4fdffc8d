// Package secretbox encrypts team secrets at rest with AES-256-GCM and manages the key files the
// coordinator creates for itself.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the size of every key this package handles (AES-256, HMAC-SHA256).
const KeySize = 32

// Box seals and opens secret values.
type Box struct{ aead cipher.AEAD }

// New makes a Box from a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secret key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plaintext; additional binds the ciphertext to its owner (a team and a name), so
// a ciphertext copied to another record does not open.
func (b *Box) Seal(plaintext, additional []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return b.aead.Seal(nonce, nonce, plaintext, additional)
}

// Open decrypts what Seal produced with the same additional data.
func (b *Box) Open(sealed, additional []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("sealed value too short")
	}
	return b.aead.Open(nil, sealed[:n], sealed[n:], additional)
}

// LoadOrCreateKey returns the base64 key in configured if it is set, otherwise the key stored in
// the file at path, creating the file (mode 0600) with a random key on first use.
func LoadOrCreateKey(configured, path string) ([]byte, error) {
	if configured != "" {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(configured))
		if err != nil || len(key) != KeySize {
			return nil, fmt.Errorf("configured key must be %d bytes in base64", KeySize)
		}
		return key, nil
	}
	raw, err := os.ReadFile(path)
	if err == nil {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
		if err != nil || len(key) != KeySize {
			return nil, fmt.Errorf("key file %s must hold %d bytes in base64", path, KeySize)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return key, f.Close()
}
