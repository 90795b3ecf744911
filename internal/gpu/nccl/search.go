package nccl

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// libName is the SONAME every NCCL 2 release installs (distribution packages, NVIDIA's
// tarballs, pip's nvidia-nccl-cu12 wheel, conda-forge).
const libName = "libnccl.so.2"

// installHint says how to get NCCL, for the not-found error.
const installHint = "install it with `pip install nvidia-nccl-cu12` (nvidia-nccl-cu13 for CUDA 13; into " +
	"the active virtual environment, conda environment or ~/.local), or the distribution's NCCL package (libnccl2 from NVIDIA's CUDA " +
	"repository on Debian/Ubuntu, libnccl on RHEL-like systems), or point NCCL_HOME at a directory " +
	"whose lib/ holds " + libName

// sysEnv is what the search reads from the system, injected so that tests hold no global state.
type sysEnv struct {
	getenv func(string) string
	glob   func(pattern string) ([]string, error) // filepath.Glob
	goarch string                                 // runtime.GOARCH
}

// candidate is one place to look: a file to dlopen (a bare name goes through the loader's own
// search path), or a glob pattern that matched nothing, kept only to say where we looked.
type candidate struct {
	path      string
	unmatched bool
}

// multiarchDir is where Debian-style distributions put their libraries for goarch.
func multiarchDir(goarch string) string {
	switch goarch {
	case "amd64":
		return "/usr/lib/x86_64-linux-gnu"
	case "arm64":
		return "/usr/lib/aarch64-linux-gnu"
	case "ppc64le":
		return "/usr/lib/powerpc64le-linux-gnu"
	}
	return ""
}

// candidates lists where to look for NCCL, most deliberate first: the loader's own search
// path (LD_LIBRARY_PATH, ld.so.cache, which is where a user who set things up expects to be
// obeyed), then NCCL_HOME and the CUDA toolkit, then the distribution's directories, then the
// places pip and conda install it, which is how most machines with PyTorch have it.
func candidates(env sysEnv) []candidate {
	var out []candidate
	seen := map[string]bool{}
	add := func(c candidate) {
		if !seen[c.path] {
			seen[c.path] = true
			out = append(out, c)
		}
	}
	file := func(dir string) {
		if dir != "" {
			add(candidate{path: filepath.Join(dir, libName)})
		}
	}
	// pattern adds every file matching it, or the pattern itself when none does.
	pattern := func(p string) {
		matches, err := env.glob(p)
		if err != nil || len(matches) == 0 {
			add(candidate{path: p, unmatched: true})
			return
		}
		for _, m := range matches {
			add(candidate{path: m})
		}
	}
	const wheel = "nvidia/nccl/lib/" + libName // inside a site-packages directory

	add(candidate{path: libName})
	if h := env.getenv("NCCL_HOME"); h != "" {
		file(filepath.Join(h, "lib"))
	}
	cudaHome := env.getenv("CUDA_HOME")
	if cudaHome == "" {
		cudaHome = env.getenv("CUDA_PATH")
	}
	if cudaHome != "" {
		file(filepath.Join(cudaHome, "lib64"))
	}
	file("/usr/local/cuda/lib64")
	file(multiarchDir(env.goarch))
	file("/usr/lib64")
	if venv := env.getenv("VIRTUAL_ENV"); venv != "" {
		pattern(filepath.Join(venv, "lib/python3.*/site-packages", wheel))
	}
	if conda := env.getenv("CONDA_PREFIX"); conda != "" {
		file(filepath.Join(conda, "lib")) // conda-forge's nccl package
		pattern(filepath.Join(conda, "lib/python3.*/site-packages", wheel))
	}
	if home := env.getenv("HOME"); home != "" {
		pattern(filepath.Join(home, ".local/lib/python3.*/site-packages", wheel))
	}
	pattern(filepath.Join("/usr/local/lib/python3.*/dist-packages", wheel))
	pattern(filepath.Join("/usr/local/lib/python3.*/site-packages", wheel))
	add(candidate{path: filepath.Join("/usr/lib/python3/dist-packages", wheel)})
	return out
}

// NotFoundError says that no NCCL could be loaded: where it was looked for, which files were
// there but did not load (with the loader's reason), and how to install it.
type NotFoundError struct {
	Looked []string // every place, in order; unmatched glob patterns as patterns
	Failed []error  // files that exist but did not load
}

func (e *NotFoundError) Error() string {
	var b strings.Builder
	if len(e.Failed) == 0 {
		fmt.Fprintf(&b, "nccl: NCCL (%s) was not found; looked in:", libName)
	} else {
		fmt.Fprintf(&b, "nccl: NCCL (%s) could not be loaded; looked in:", libName)
	}
	for _, p := range e.Looked {
		b.WriteString("\n  " + p)
		if p == libName {
			b.WriteString(" (the loader's search path: LD_LIBRARY_PATH, ld.so.cache)")
		}
	}
	if len(e.Failed) > 0 {
		b.WriteString("\nfound but not loadable:")
		for _, err := range e.Failed {
			b.WriteString("\n  " + err.Error())
		}
	}
	b.WriteString("\nTo use several GPUs, " + installHint + ".")
	return b.String()
}

func (e *NotFoundError) Unwrap() error { return ErrUnavailable }

// absentSuffix follows the name in glibc's dlerror for a library it cannot find. The name
// matters: the same words about another name mean that a dependency is missing.
const absentSuffix = ": cannot open shared object file: No such file or directory"

// openFirst dlopens the first candidate that loads and returns its handle and path. Absent
// files are skipped quietly (checked with stat, or for a bare name by dlopen's own message);
// files that exist but fail to load are reported, since that is a broken install (a missing
// dependency, the wrong architecture) rather than a missing one.
func openFirst(cands []candidate, dlopen func(string) (uintptr, error), stat func(string) error) (uintptr, string, error) {
	nf := &NotFoundError{}
	for _, c := range cands {
		nf.Looked = append(nf.Looked, c.path)
		if c.unmatched {
			continue
		}
		bare := !strings.ContainsRune(c.path, '/')
		if !bare && stat(c.path) != nil {
			continue
		}
		h, err := dlopen(c.path)
		if err == nil && h != 0 {
			return h, c.path, nil
		}
		if err == nil {
			err = errors.New("dlopen returned no handle")
		}
		if bare && strings.Contains(err.Error(), c.path+absentSuffix) {
			continue
		}
		if !strings.Contains(err.Error(), c.path) {
			err = fmt.Errorf("%s: %w", c.path, err)
		}
		nf.Failed = append(nf.Failed, err)
	}
	return 0, "", nf
}

// nvlsVar is NCCL's switch for NVLink SHARP / multicast (NVLS).
const nvlsVar = "NCCL_NVLS_ENABLE"

// disableNVLS sets NCCL_NVLS_ENABLE=0 unless the user set it. NVLS programs the NVSwitch
// fabric's multicast objects, and a process that dies or misbehaves while holding them can
// leave a host's shared GPUs out of service for a long time; the hosts this trainer runs on
// must not have it used, and an all-reduce of gradients gains little from it. The program
// sets the variable itself because it is started from environments (schedulers, containers,
// shells) that do not carry it. It must happen before the first communicator is made: NCCL
// reads the variable once, then; a value in /etc/nccl.conf does not override it, because
// NCCL applies that file only to variables not already set. An empty value counts as unset,
// as it does for NCCL.
func disableNVLS(getenv func(string) string, setenv func(key, value string) error) error {
	if getenv(nvlsVar) != "" {
		return nil
	}
	if err := setenv(nvlsVar, "0"); err != nil {
		return fmt.Errorf("nccl: set %s=0: %w", nvlsVar, err)
	}
	return nil
}
