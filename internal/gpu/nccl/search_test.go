package nccl

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// fakeGlob answers from a table of pattern → matches.
func fakeGlob(matches map[string][]string) func(string) ([]string, error) {
	return func(p string) ([]string, error) { return matches[p], nil }
}

func fakeGetenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestCandidates(t *testing.T) {
	const (
		venvSP  = "/home/u/venv/lib/python3.*/site-packages/nvidia/nccl/lib/libnccl.so.2"
		condaSP = "/opt/conda/lib/python3.*/site-packages/nvidia/nccl/lib/libnccl.so.2"
		userSP  = "/home/u/.local/lib/python3.*/site-packages/nvidia/nccl/lib/libnccl.so.2"
		localDP = "/usr/local/lib/python3.*/dist-packages/nvidia/nccl/lib/libnccl.so.2"
		localSP = "/usr/local/lib/python3.*/site-packages/nvidia/nccl/lib/libnccl.so.2"
		distDP  = "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2"
	)
	tests := []struct {
		name   string
		env    map[string]string
		globs  map[string][]string
		goarch string
		want   []candidate
	}{
		{
			name:   "nothing set, nothing installed",
			goarch: "amd64",
			want: []candidate{
				{path: "libnccl.so.2"},
				{path: "/usr/local/cuda/lib64/libnccl.so.2"},
				{path: "/usr/lib/x86_64-linux-gnu/libnccl.so.2"},
				{path: "/usr/lib64/libnccl.so.2"},
				{path: localDP, unmatched: true},
				{path: localSP, unmatched: true},
				{path: distDP},
			},
		},
		{
			name: "every variable, wheels in the venv and ~/.local, arm64",
			env: map[string]string{
				"NCCL_HOME": "/opt/nccl", "CUDA_HOME": "/opt/cuda-12.8", "CUDA_PATH": "/ignored",
				"VIRTUAL_ENV": "/home/u/venv", "CONDA_PREFIX": "/opt/conda", "HOME": "/home/u",
			},
			globs: map[string][]string{
				venvSP: {
					"/home/u/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2",
					"/home/u/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
				},
				userSP: {"/home/u/.local/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2"},
			},
			goarch: "arm64",
			want: []candidate{
				{path: "libnccl.so.2"},
				{path: "/opt/nccl/lib/libnccl.so.2"},
				{path: "/opt/cuda-12.8/lib64/libnccl.so.2"},
				{path: "/usr/local/cuda/lib64/libnccl.so.2"},
				{path: "/usr/lib/aarch64-linux-gnu/libnccl.so.2"},
				{path: "/usr/lib64/libnccl.so.2"},
				{path: "/home/u/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"},
				{path: "/home/u/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"},
				{path: "/opt/conda/lib/libnccl.so.2"},
				{path: condaSP, unmatched: true},
				{path: "/home/u/.local/lib/python3.10/site-packages/nvidia/nccl/lib/libnccl.so.2"},
				{path: localDP, unmatched: true},
				{path: localSP, unmatched: true},
				{path: distDP},
			},
		},
		{
			name:   "CUDA_PATH when CUDA_HOME is unset; a CUDA home at the default appears once; system pip",
			env:    map[string]string{"CUDA_PATH": "/usr/local/cuda"},
			globs:  map[string][]string{localDP: {"/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2"}},
			goarch: "amd64",
			want: []candidate{
				{path: "libnccl.so.2"},
				{path: "/usr/local/cuda/lib64/libnccl.so.2"},
				{path: "/usr/lib/x86_64-linux-gnu/libnccl.so.2"},
				{path: "/usr/lib64/libnccl.so.2"},
				{path: "/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib/libnccl.so.2"},
				{path: localSP, unmatched: true},
				{path: distDP},
			},
		},
		{
			name:   "an architecture without a multiarch directory",
			goarch: "riscv64",
			want: []candidate{
				{path: "libnccl.so.2"},
				{path: "/usr/local/cuda/lib64/libnccl.so.2"},
				{path: "/usr/lib64/libnccl.so.2"},
				{path: localDP, unmatched: true},
				{path: localSP, unmatched: true},
				{path: distDP},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := candidates(sysEnv{getenv: fakeGetenv(tt.env), glob: fakeGlob(tt.globs), goarch: tt.goarch})
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got\n%s\nwant\n%s", formatCands(got), formatCands(tt.want))
			}
		})
	}
}

func formatCands(cs []candidate) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString("  " + c.path)
		if c.unmatched {
			b.WriteString(" (pattern)")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestOpenFirst(t *testing.T) {
	cands := []candidate{
		{path: "libnccl.so.2"},
		{path: "/absent/libnccl.so.2"},
		{path: "/broken/libnccl.so.2"},
		{path: "/pattern/*/libnccl.so.2", unmatched: true},
		{path: "/good/libnccl.so.2"},
		{path: "/later/libnccl.so.2"},
	}
	exists := map[string]bool{"/broken/libnccl.so.2": true, "/good/libnccl.so.2": true, "/later/libnccl.so.2": true}
	stat := func(p string) error {
		if exists[p] {
			return nil
		}
		return errors.New("stat " + p + ": no such file or directory")
	}
	type outcome struct {
		h   uintptr
		err error
	}
	tests := []struct {
		name       string
		results    map[string]outcome // what dlopen returns for a path
		wantPath   string
		wantOpened []string // every path dlopen was asked for, in order
		wantFailed []string // substrings of the reported failures, in order
	}{
		{
			name: "the first loadable file wins, a broken one before it is passed over",
			results: map[string]outcome{
				"libnccl.so.2":         {err: errors.New("libnccl.so.2: cannot open shared object file: No such file or directory")},
				"/broken/libnccl.so.2": {err: errors.New("/broken/libnccl.so.2: wrong ELF class: ELFCLASS32")},
				"/good/libnccl.so.2":   {h: 7},
			},
			wantPath:   "/good/libnccl.so.2",
			wantOpened: []string{"libnccl.so.2", "/broken/libnccl.so.2", "/good/libnccl.so.2"},
		},
		{
			name: "nothing loads: absent files are quiet, broken ones (a missing dependency too) are reported",
			results: map[string]outcome{
				"libnccl.so.2":         {err: errors.New("libcudart.so.12: cannot open shared object file: No such file or directory")},
				"/broken/libnccl.so.2": {err: errors.New("undefined symbol: cudaGetDriverEntryPoint")},
				"/good/libnccl.so.2":   {},
				"/later/libnccl.so.2":  {err: errors.New("/later/libnccl.so.2: file too short")},
			},
			wantOpened: []string{"libnccl.so.2", "/broken/libnccl.so.2", "/good/libnccl.so.2", "/later/libnccl.so.2"},
			wantFailed: []string{
				"libnccl.so.2: libcudart.so.12: cannot open shared object file",
				"/broken/libnccl.so.2: undefined symbol: cudaGetDriverEntryPoint",
				"/good/libnccl.so.2: dlopen returned no handle",
				"/later/libnccl.so.2: file too short",
			},
		},
		{
			name: "a bare name the loader found but could not load is reported",
			results: map[string]outcome{
				"libnccl.so.2":         {err: errors.New("libnccl.so.2: undefined symbol: ncclFoo")},
				"/broken/libnccl.so.2": {err: errors.New("/broken/libnccl.so.2: wrong ELF class: ELFCLASS32")},
				"/good/libnccl.so.2":   {h: 3},
			},
			wantPath:   "/good/libnccl.so.2",
			wantOpened: []string{"libnccl.so.2", "/broken/libnccl.so.2", "/good/libnccl.so.2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opened []string
			dlopen := func(p string) (uintptr, error) {
				opened = append(opened, p)
				o := tt.results[p]
				return o.h, o.err
			}
			h, path, err := openFirst(cands, dlopen, stat)
			if !reflect.DeepEqual(opened, tt.wantOpened) {
				t.Errorf("dlopen asked for %q, want %q", opened, tt.wantOpened)
			}
			if tt.wantPath != "" {
				if err != nil || path != tt.wantPath || h == 0 {
					t.Fatalf("openFirst = %d, %q, %v; want %q", h, path, err, tt.wantPath)
				}
				return
			}
			var nf *NotFoundError
			if !errors.As(err, &nf) || !errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %v, want a *NotFoundError wrapping ErrUnavailable", err)
			}
			var looked []string
			for _, c := range cands {
				looked = append(looked, c.path)
			}
			if !reflect.DeepEqual(nf.Looked, looked) {
				t.Errorf("Looked = %q, want every candidate %q", nf.Looked, looked)
			}
			if len(nf.Failed) != len(tt.wantFailed) {
				t.Fatalf("Failed = %v, want %d failures", nf.Failed, len(tt.wantFailed))
			}
			for i, w := range tt.wantFailed {
				if !strings.Contains(nf.Failed[i].Error(), w) {
					t.Errorf("failure %d = %q, want it to contain %q", i, nf.Failed[i], w)
				}
			}
		})
	}
}

func TestNotFoundMessage(t *testing.T) {
	looked := []string{"libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/lib/python3.*/dist-packages/nvidia/nccl/lib/libnccl.so.2"}
	absent := (&NotFoundError{Looked: looked}).Error()
	want := "nccl: NCCL (libnccl.so.2) was not found; looked in:\n" +
		"  libnccl.so.2 (the loader's search path: LD_LIBRARY_PATH, ld.so.cache)\n" +
		"  /usr/local/cuda/lib64/libnccl.so.2\n" +
		"  /usr/local/lib/python3.*/dist-packages/nvidia/nccl/lib/libnccl.so.2\n" +
		"To use several GPUs, install it with `pip install nvidia-nccl-cu12`"
	if !strings.HasPrefix(absent, want) {
		t.Fatalf("message:\n%s\nwant it to start with:\n%s", absent, want)
	}
	for _, hint := range []string{"libnccl2", "NCCL_HOME"} {
		if !strings.Contains(absent, hint) {
			t.Errorf("message lacks %q:\n%s", hint, absent)
		}
	}
	broken := (&NotFoundError{Looked: looked[:2], Failed: []error{errors.New("/usr/local/cuda/lib64/libnccl.so.2: wrong ELF class")}}).Error()
	if !strings.HasPrefix(broken, "nccl: NCCL (libnccl.so.2) could not be loaded; looked in:") ||
		!strings.Contains(broken, "\nfound but not loadable:\n  /usr/local/cuda/lib64/libnccl.so.2: wrong ELF class\n") {
		t.Fatalf("message with a broken file:\n%s", broken)
	}
}

func TestDisableNVLS(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		failSet bool
		want    map[string]string // the environment afterwards
		wantErr bool
	}{
		{name: "unset: set to 0", env: map[string]string{}, want: map[string]string{"NCCL_NVLS_ENABLE": "0"}},
		{name: "empty counts as unset", env: map[string]string{"NCCL_NVLS_ENABLE": ""}, want: map[string]string{"NCCL_NVLS_ENABLE": "0"}},
		{name: "the user's 0 is kept", env: map[string]string{"NCCL_NVLS_ENABLE": "0"}, want: map[string]string{"NCCL_NVLS_ENABLE": "0"}},
		{name: "the user's 1 is kept", env: map[string]string{"NCCL_NVLS_ENABLE": "1"}, want: map[string]string{"NCCL_NVLS_ENABLE": "1"}},
		{name: "setenv fails", env: map[string]string{}, failSet: true, want: map[string]string{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range tt.env {
				env[k] = v
			}
			setenv := func(k, v string) error {
				if tt.failSet {
					return errors.New("invalid argument")
				}
				env[k] = v
				return nil
			}
			err := disableNVLS(fakeGetenv(env), setenv)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "NCCL_NVLS_ENABLE=0") {
				t.Errorf("error %q does not name the variable", err)
			}
			if !reflect.DeepEqual(env, tt.want) {
				t.Fatalf("environment %v, want %v", env, tt.want)
			}
		})
	}
}
