// Package mtl is the seam between rlxsplat's Metal backend and Metal itself: the typed
// Runtime interface that internal/gpu/metal drives (device, queue, command buffers, compute and
// blit encoders, buffers, libraries, pipelines, autorelease pools), one implementation of it
// over Objective-C message sends, and the table of every selector those sends use.
//
// The layering exists so that the backend's host code runs on Linux: internal/gpu/metal/fakemtl
// implements Runtime in Go, and the Objective-C implementation (objcRuntime) is written against
// the Sender interface, so a test can send every message to a checker that holds each one to
// the selector table (argument count = colons in the name, NSUInteger as 64 bits, MTLSize and
// NSRange passed with Apple's layout). Only System, the Sender over purego's objc package and
// Metal.framework, is darwin code.
//
// What only a Mac can show: that the selectors answer as Apple documents them, that purego
// passes the by-value structs and the NSError out-parameter as the platform ABI wants, and
// that objects returned autoreleased are retained at the right places (leaks, not crashes,
// would follow from a mistake there).
package mtl
