package cuda

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ebitengine/purego"
)

// symbol is one C entry point to bind to a Go function variable.
type symbol struct {
	fptr     any      // pointer to a func variable
	names    []string // tried in order; the first that exists is bound (e.g. a _v2 then the plain name)
	optional bool     // absent: the variable stays nil and the feature is unavailable
}

func sym(fptr any, names ...string) symbol { return symbol{fptr: fptr, names: names} }
func optSym(fptr any, names ...string) symbol {
	return symbol{fptr: fptr, names: names, optional: true}
}

// openFirst dlopens the first candidate that loads, returning the path used; when none loads
// the error joins every attempt's reason.
func openFirst(cands []string) (uintptr, string, error) {
	var errs []error
	for _, c := range cands {
		h, err := purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err == nil && h != 0 {
			return h, c, nil
		}
		if err == nil {
			err = errors.New("dlopen returned no handle")
		}
		if strings.Contains(err.Error(), c) {
			errs = append(errs, err) // dlerror already names the file
		} else {
			errs = append(errs, fmt.Errorf("%s: %w", c, err))
		}
	}
	return 0, "", errors.Join(errs...)
}

// bind resolves every symbol before registering any, because purego.RegisterLibFunc panics on a
// missing symbol; the error names the first required entry point the library lacks.
func bind(lib uintptr, libName string, syms []symbol) error {
	addrs := make([]uintptr, len(syms))
	for i, s := range syms {
		for _, n := range s.names {
			if a, err := purego.Dlsym(lib, n); err == nil && a != 0 {
				addrs[i] = a
				break
			}
		}
		if addrs[i] == 0 && !s.optional {
			return fmt.Errorf("cuda: %s has no %s (library too old or not the real one)", libName, strings.Join(s.names, " or "))
		}
	}
	for i, s := range syms {
		if addrs[i] != 0 {
			purego.RegisterFunc(s.fptr, addrs[i])
		}
	}
	return nil
}
