//go:build !linux

package fakemtl

// threadID is 0 where the fake has no portable thread id: the one-thread check is skipped.
func threadID() int { return 0 }
