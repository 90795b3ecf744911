package driver

import "unsafe"

// wordsAsBytes views w as bytes. All supported hosts (amd64, arm64) are little-endian, so the
// view matches the byte order the GPU reads.
func wordsAsBytes(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}
