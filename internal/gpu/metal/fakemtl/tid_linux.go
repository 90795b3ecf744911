package fakemtl

import "syscall"

// threadID identifies the calling OS thread, so that the fake can tell whether every call came
// from one thread, as Metal's autorelease pools need.
func threadID() int { return syscall.Gettid() }
