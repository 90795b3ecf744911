package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// versionString is what --version prints: the module version (a tag for `go install
// …@vX`, "(devel)" for a local build), the git commit it was built from, the Go version and
// platform, and the GPU backends this binary can drive.
func versionString() string {
	version, commit := "(unknown)", "unknown"
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		goVersion = bi.GoVersion
		var rev, when string
		dirty := false
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				rev = st.Value
			case "vcs.time":
				when = st.Value
			case "vcs.modified":
				dirty = st.Value == "true"
			}
		}
		if rev != "" {
			commit = rev
			if len(commit) > 12 {
				commit = commit[:12]
			}
			if when != "" {
				commit += " (" + when + ")"
			}
			if dirty {
				commit += " with local changes"
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rlxsplat %s\n", version)
	fmt.Fprintf(&b, "commit:       %s\n", commit)
	fmt.Fprintf(&b, "go:           %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
	// The CUDA engine is always built in: purego loads libcuda (and NVRTC, else the embedded
	// PTX) at run time, so no build of this binary lacks it.
	fmt.Fprintf(&b, "GPU backends: cuda (libcuda loaded at run time; NVRTC or embedded PTX); CPU engine always")
	return b.String()
}
