package cuda

import (
	"path/filepath"
	"runtime"
)

// Library names, most specific first: the versioned SONAME is what the driver package
// installs; the bare .so exists only with development packages.
var (
	driverLibNames = []string{"libcuda.so.1", "libcuda.so"}
	nvrtcLibNames  = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}
)

// driverLibDirs are places the driver lives outside the loader's search path (containers that
// mount it under /usr/local/nvidia, WSL).
func driverLibDirs() []string {
	return []string{"/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"}
}

// nvrtcLibDirs are CUDA toolkit locations; cudaHome is $CUDA_HOME or $CUDA_PATH if set.
func nvrtcLibDirs(cudaHome, goarch string) []string {
	target := "x86_64-linux"
	if goarch == "arm64" {
		target = "sbsa-linux"
	}
	var dirs []string
	if cudaHome != "" {
		dirs = append(dirs, filepath.Join(cudaHome, "lib64"), filepath.Join(cudaHome, "targets", target, "lib"))
	}
	return append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/"+target+"/lib")
}

// libCandidates lists what to dlopen, in order: each name through the loader's own search
// path first (LD_LIBRARY_PATH, ld.so.cache), then in each extra directory. No duplicates.
func libCandidates(names, dirs []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, n := range names {
		add(n)
		for _, d := range dirs {
			add(filepath.Join(d, n))
		}
	}
	return out
}

func nvrtcCandidates(getenv func(string) string) []string {
	home := getenv("CUDA_HOME")
	if home == "" {
		home = getenv("CUDA_PATH")
	}
	return libCandidates(nvrtcLibNames, nvrtcLibDirs(home, runtime.GOARCH))
}

func driverCandidates() []string { return libCandidates(driverLibNames, driverLibDirs()) }
