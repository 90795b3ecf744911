package driver

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// Cache is the on-disk store of compiled kernel images, one file per key. Entries carry a
// checksum: a truncated or corrupted file is treated as a miss and replaced on the next Put,
// so a crash during a write can never poison later runs. A nil or disabled Cache misses.
type Cache struct {
	dir string // "" = disabled
}

// CacheOff is the CacheDir value that disables the cache.
const CacheOff = "off"

// DefaultCacheDir is $XDG_CACHE_HOME/rlxsplat/kernels (os.UserCacheDir: ~/.cache on Linux,
// ~/Library/Caches on macOS).
func DefaultCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("gpu: kernel cache: %w", err)
	}
	return filepath.Join(base, "rlxsplat", "kernels"), nil
}

// NewCache returns the cache in dir ("" = DefaultCacheDir, CacheOff = disabled). The
// directory is created on the first Put. When no default directory can be found the cache is
// disabled rather than failing: compiling without a cache is only slower.
func NewCache(dir string) *Cache {
	switch dir {
	case CacheOff:
		return &Cache{}
	case "":
		d, err := DefaultCacheDir()
		if err != nil {
			return &Cache{}
		}
		dir = d
	}
	return &Cache{dir: dir}
}

// Dir is the cache directory ("" when disabled).
func (c *Cache) Dir() string {
	if c == nil {
		return ""
	}
	return c.dir
}

// CacheKey hashes the parts that decide a compiled image (source hash, options, compiler
// version, target architecture, output format) into a file-name-safe key.
func CacheKey(parts ...string) string {
	h := sha256.New()
	writeField(h, "rlxsplat-kernel-cache-v1")
	writeCount(h, len(parts))
	for _, p := range parts {
		writeField(h, p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

var cacheMagic = []byte("RLXKCACHE1\n")

const cacheHeader = 11 + 8 + sha256.Size // magic, payload length, payload checksum

func (c *Cache) path(key string) (string, error) {
	if len(key) != 64 {
		return "", fmt.Errorf("gpu: kernel cache: bad key %q", key)
	}
	if _, err := hex.DecodeString(key); err != nil {
		return "", fmt.Errorf("gpu: kernel cache: bad key %q", key)
	}
	return filepath.Join(c.dir, key+".bin"), nil
}

// Get returns the image stored under key; ok is false on a miss, a disabled cache, an
// unreadable file or a corrupt entry.
func (c *Cache) Get(key string) (data []byte, ok bool) {
	if c == nil || c.dir == "" {
		return nil, false
	}
	p, err := c.path(key)
	if err != nil {
		return nil, false
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, false
	}
	payload, err := decodeEntry(raw)
	if err != nil {
		return nil, false
	}
	return payload, true
}

func decodeEntry(raw []byte) ([]byte, error) {
	if len(raw) < cacheHeader || !bytes.Equal(raw[:len(cacheMagic)], cacheMagic) {
		return nil, fmt.Errorf("gpu: kernel cache: bad header")
	}
	n := binary.LittleEndian.Uint64(raw[len(cacheMagic):])
	sum := raw[len(cacheMagic)+8 : cacheHeader]
	payload := raw[cacheHeader:]
	if uint64(len(payload)) != n {
		return nil, fmt.Errorf("gpu: kernel cache: length %d, header says %d", len(payload), n)
	}
	got := sha256.Sum256(payload)
	if !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("gpu: kernel cache: checksum mismatch")
	}
	return payload, nil
}

// Put stores data under key atomically (a temporary file in the same directory, synced, then
// renamed), so that concurrent processes and crashes never expose a half-written entry.
func (c *Cache) Put(key string, data []byte) error {
	if c == nil || c.dir == "" {
		return nil
	}
	p, err := c.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("gpu: kernel cache: %w", err)
	}
	f, err := os.CreateTemp(c.dir, key+".*.tmp")
	if err != nil {
		return fmt.Errorf("gpu: kernel cache: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("gpu: kernel cache: write %s: %w", tmp, err)
	}
	var hdr [cacheHeader]byte
	copy(hdr[:], cacheMagic)
	binary.LittleEndian.PutUint64(hdr[len(cacheMagic):], uint64(len(data)))
	sum := sha256.Sum256(data)
	copy(hdr[len(cacheMagic)+8:], sum[:])
	if _, err := f.Write(hdr[:]); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gpu: kernel cache: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gpu: kernel cache: rename to %s: %w", p, err)
	}
	return nil
}
