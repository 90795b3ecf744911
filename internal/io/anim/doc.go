// Package anim turns a sequence of rendered frames, PNG files in a directory, into one
// animated file: a GIF with the standard library's encoder, or an MP4 through an ffmpeg
// found on PATH. Both are written atomically: a reader never sees a partial file.
//
// Non-goals: rendering the frames (the caller does), and any codec of its own; the GIF's
// palette is the only image processing here.
package anim
