package cuda

import (
	"strings"
	"testing"
)

// The binder is exercised on libc, which every Linux machine has, so that symbol probing and
// error reporting are tested without a GPU.
func TestOpenFirstAndBind(t *testing.T) {
	lib, used, err := openFirst([]string{"/nonexistent/libnothing.so.9", "libc.so.6"})
	if err != nil {
		t.Skip("no libc.so.6 to test the loader with: " + err.Error())
	}
	if used != "libc.so.6" {
		t.Fatalf("used %q", used)
	}
	var abs, labs, missingOpt func(int32) int32
	err = bind(lib, used, []symbol{
		sym(&abs, "rlx_no_such_abs", "abs"),
		sym(&labs, "labs"),
		optSym(&missingOpt, "rlx_no_such_symbol"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if abs(-7) != 7 || labs(-9) != 9 {
		t.Fatal("bound functions do not work")
	}
	if missingOpt != nil {
		t.Fatal("optional missing symbol was bound")
	}

	var f1, f2 func(int32) int32
	err = bind(lib, used, []symbol{sym(&f1, "abs"), sym(&f2, "cuRlxMissing_v2", "cuRlxMissing")})
	if err == nil || !strings.Contains(err.Error(), "cuRlxMissing_v2 or cuRlxMissing") || !strings.Contains(err.Error(), "libc.so.6") {
		t.Fatalf("err = %v, want the missing names and the library", err)
	}
	if f1 != nil {
		t.Fatal("a symbol was registered although a required one is missing")
	}
}

func TestOpenFirstJoinsErrors(t *testing.T) {
	_, _, err := openFirst([]string{"/nonexistent/a.so", "/nonexistent/b.so"})
	if err == nil {
		t.Fatal("opened a nonexistent library")
	}
	for _, want := range []string{"/nonexistent/a.so", "/nonexistent/b.so"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
