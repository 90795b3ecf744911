package driver

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestCacheKey(t *testing.T) {
	k := CacheKey("srchash", "-lineinfo", "nvrtc 13.0", "sm_90", "cubin")
	if len(k) != 64 {
		t.Fatalf("key %q", k)
	}
	diff := [][]string{
		{"srchash2", "-lineinfo", "nvrtc 13.0", "sm_90", "cubin"},
		{"srchash", "", "nvrtc 13.0", "sm_90", "cubin"},
		{"srchash", "-lineinfo", "nvrtc 12.8", "sm_90", "cubin"},
		{"srchash", "-lineinfo", "nvrtc 13.0", "sm_89", "cubin"},
		{"srchash", "-lineinfo", "nvrtc 13.0", "sm_90", "ptx"},
		{"srchash-lineinfo", "nvrtc 13.0", "sm_90", "cubin"},
	}
	for _, parts := range diff {
		if CacheKey(parts...) == k {
			t.Errorf("key does not change for %q", parts)
		}
	}
}

func TestCacheRoundTripAndCorruption(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	c := NewCache(dir)
	key := CacheKey("x")
	if _, ok := c.Get(key); ok {
		t.Fatal("hit in an empty cache")
	}
	data := []byte("\x7fELF pretend cubin \x00 with zero")
	if err := c.Put(key, data); err != nil {
		t.Fatal(err)
	}
	got, ok := c.Get(key)
	if !ok || string(got) != string(data) {
		t.Fatalf("Get = %q, %v", got, ok)
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("leftover %s", e.Name())
		}
	}
	p := filepath.Join(dir, key+".bin")
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	corruptions := map[string][]byte{
		"truncated":    raw[:len(raw)-3],
		"flipped byte": flip(raw, len(raw)-1),
		"bad magic":    flip(raw, 0),
		"header only":  raw[:cacheHeader],
		"empty":        {},
	}
	for name, bad := range corruptions {
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Get(key); ok {
			t.Errorf("%s entry was returned", name)
		}
	}
	// A later Put replaces the corrupt entry.
	if err := c.Put(key, data); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.Get(key); !ok || string(got) != string(data) {
		t.Fatal("entry not rebuilt after corruption")
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}

func TestCacheDisabledAndBadKeys(t *testing.T) {
	off := NewCache(CacheOff)
	if off.Dir() != "" {
		t.Fatal("disabled cache has a dir")
	}
	if err := off.Put(CacheKey("a"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, ok := off.Get(CacheKey("a")); ok {
		t.Fatal("disabled cache hit")
	}
	var nilCache *Cache
	if _, ok := nilCache.Get(CacheKey("a")); ok {
		t.Fatal("nil cache hit")
	}
	c := NewCache(t.TempDir())
	for _, key := range []string{"../../etc/passwd", "abc", strings.Repeat("z", 64)} {
		if err := c.Put(key, []byte("x")); err == nil {
			t.Errorf("Put accepted key %q", key)
		}
	}
}

func TestDefaultCacheDirHonoursXDG(t *testing.T) {
	if os.Getenv("HOME") == "" {
		t.Skip("no HOME")
	}
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	got, err := DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	// os.UserCacheDir uses XDG_CACHE_HOME on Linux and BSDs only.
	if runtime.GOOS == "linux" && got != filepath.Join(dir, "rlxsplat", "kernels") {
		t.Fatalf("DefaultCacheDir = %s, want under %s", got, dir)
	}
	if !strings.HasSuffix(got, filepath.Join("rlxsplat", "kernels")) {
		t.Fatalf("DefaultCacheDir = %s", got)
	}
}
