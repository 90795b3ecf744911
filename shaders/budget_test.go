package shaders

import (
	"bufio"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// maxSharedBytes is the threadgroup memory Metal guarantees a kernel (Apple's limits table:
// 32 KB on every Apple GPU); CUDA allows 48 KB of static shared memory, so it is the portable
// bound.
const maxSharedBytes = 32 << 10

var (
	ptxEntry  = regexp.MustCompile(`\.entry\s+([A-Za-z_$][\w$]*)\s*\(`)
	ptxShared = regexp.MustCompile(`^\s*(\.extern\s+)?\.shared\s+(?:\.align\s+(\d+)\s+)?\.(b8|b16|b32|b64|u8|u16|u32|u64|s8|s16|s32|s64|f16|f32|f64)\s+([\w$]+)\s*(?:\[(\d*)\])?`)
)

// sharedBytes returns each kernel's static shared bytes as the PTX declares them: the .shared
// variables inside its body plus those at module scope (which any kernel may use), each
// placed at its alignment. extern (dynamic) arrays have no static size: they are listed in
// dynamic, since their size is the launch's.
func sharedBytes(ptx string) (static map[string]int, dynamic []string, err error) {
	static = map[string]int{}
	module := 0
	var entries []string
	cur := ""
	sc := bufio.NewScanner(strings.NewReader(ptx))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if m := ptxEntry.FindStringSubmatch(text); m != nil {
			cur = m[1]
			entries = append(entries, cur)
			static[cur] += 0
			continue
		}
		if strings.HasPrefix(text, "}") {
			cur = ""
			continue
		}
		m := ptxShared.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		if m[1] != "" {
			dynamic = append(dynamic, m[4])
			continue
		}
		elem := map[string]int{"8": 1, "16": 2, "32": 4, "64": 8}[m[3][1:]]
		n := 1
		if strings.Contains(text, "[") {
			if m[5] == "" {
				return nil, nil, fmt.Errorf("line %d: shared array %s without a size", line, m[4])
			}
			if n, err = strconv.Atoi(m[5]); err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", line, err)
			}
		}
		align := elem
		if m[2] != "" {
			if align, err = strconv.Atoi(m[2]); err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", line, err)
			}
		}
		place := func(at int) int { return (at+align-1)/align*align + n*elem }
		if cur == "" {
			module = place(module)
		} else {
			static[cur] = place(static[cur])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		static[e] += module
	}
	return static, dynamic, nil
}

// TestSharedMemoryBudget fails when a kernel declares more static shared memory than Metal
// allows a threadgroup, read from the prebuilt PTX (TestPTXUpToDate keeps it in step with the
// sources).
func TestSharedMemoryBudget(t *testing.T) {
	files, err := fs.Glob(PTX(), "*.ptx")
	if err != nil || len(files) == 0 {
		t.Fatalf("no prebuilt PTX (%v)", err)
	}
	kernels := 0
	for _, f := range files {
		b, err := fs.ReadFile(PTX(), f)
		if err != nil {
			t.Fatal(err)
		}
		static, dynamic, err := sharedBytes(string(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		names := make([]string, 0, len(static))
		for k := range static {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			kernels++
			if static[k] > maxSharedBytes {
				t.Errorf("%s: kernel %s declares %d bytes of shared memory, over the %d a Metal threadgroup may use", f, k, static[k], maxSharedBytes)
			} else if testing.Verbose() {
				t.Logf("%s: %s %d bytes", f, k, static[k])
			}
		}
		if len(dynamic) > 0 {
			t.Logf("%s: dynamic shared arrays %v are sized at launch (not counted)", f, dynamic)
		}
	}
	if kernels == 0 {
		t.Fatal("no kernel entries found in the PTX: the parser no longer matches it")
	}
}

// TestSharedBytesParser checks the parser on declarations as NVRTC writes them, so that a
// kernel over the budget is caught (the budget test must be able to fail).
func TestSharedBytesParser(t *testing.T) {
	ptx := `.shared .align 4 .b8 mod_scratch[16];
.visible .entry big(
	.param .u64 big_param_0
)
{
	.shared .align 4 .b8 _ZZ3bigE1a[16384];
	.shared .align 8 .b8 _ZZ3bigE1b[16388];
	.shared .align 4 .u32 _ZZ3bigE1c;
}
.visible .entry small(
)
{
	.shared .align 2 .b8 _ZZ5smallE1h[6];
}
.extern .shared .align 16 .b8 partial[];
`
	static, dynamic, err := sharedBytes(ptx)
	if err != nil {
		t.Fatal(err)
	}
	// big: 16384, then 16388 at 16384 (8-aligned) = 32772, u32 at 32772 = 32776, + 16 module.
	if static["big"] != 32792 || static["small"] != 22 {
		t.Errorf("sizes %v, want big 32792, small 22", static)
	}
	if static["big"] <= maxSharedBytes {
		t.Error("the over-budget kernel is within the budget")
	}
	if len(dynamic) != 1 || dynamic[0] != "partial" {
		t.Errorf("dynamic %v, want [partial]", dynamic)
	}
}
