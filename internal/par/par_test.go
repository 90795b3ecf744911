package par

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

func TestRanges(t *testing.T) {
	for _, c := range []struct{ n, workers, want int }{
		{0, 4, 0}, {-3, 4, 0}, {1, 4, 1}, {255, 8, 1}, {256, 1, 1}, {256, 0, 1}, {256, 4, 4},
		{1000, 3, 3}, {1001, 7, 7}, {300, 64, 60}, // 300 in chunks of 5
	} {
		rs := Ranges(c.n, c.workers)
		if len(rs) != c.want {
			t.Errorf("Ranges(%d, %d): %d ranges, want %d", c.n, c.workers, len(rs), c.want)
		}
		next := 0
		for _, r := range rs {
			if r[0] != next || r[1] <= r[0] {
				t.Fatalf("Ranges(%d, %d) = %v: not contiguous and non-empty", c.n, c.workers, rs)
			}
			next = r[1]
		}
		if c.n > 0 && next != c.n {
			t.Fatalf("Ranges(%d, %d) = %v: ends at %d", c.n, c.workers, rs, next)
		}
	}
}

// TestForCoversEachIndexOnce runs every index exactly once, with each range's own k.
func TestForCoversEachIndexOnce(t *testing.T) {
	for _, workers := range []int{0, 1, 2, 5, 16} {
		const n = 10_007
		hits := make([]int32, n)
		var calls atomic.Int32
		For(n, workers, func(k, lo, hi int) {
			calls.Add(1)
			if r := Ranges(n, workers)[k]; r != [2]int{lo, hi} {
				t.Errorf("range %d is %v, called with [%d, %d)", k, r, lo, hi)
			}
			for i := lo; i < hi; i++ {
				atomic.AddInt32(&hits[i], 1)
			}
		})
		if int(calls.Load()) != len(Ranges(n, workers)) {
			t.Fatalf("%d workers: %d calls for %d ranges", workers, calls.Load(), len(Ranges(n, workers)))
		}
		for i, h := range hits {
			if h != 1 {
				t.Fatalf("%d workers: index %d run %d times", workers, i, h)
			}
		}
	}
}

// TestEach calls every index once when nothing fails, and when some fail returns the lowest
// failing index's error, having called every index below it.
func TestEach(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 64} {
		const n = 500
		hits := make([]int32, n)
		if err := Each(n, workers, func(i int) error { atomic.AddInt32(&hits[i], 1); return nil }); err != nil {
			t.Fatal(err)
		}
		for i, h := range hits {
			if h != 1 {
				t.Fatalf("workers %d: index %d called %d times", workers, i, h)
			}
		}
		clear(hits)
		bad := func(i int) bool { return i == 137 || i == 140 || i == 400 }
		err := Each(n, workers, func(i int) error {
			atomic.AddInt32(&hits[i], 1)
			if bad(i) {
				return fmt.Errorf("item %d", i)
			}
			return nil
		})
		if err == nil || err.Error() != "item 137" {
			t.Fatalf("workers %d: error %v, want item 137's", workers, err)
		}
		for i := 0; i < 137; i++ {
			if hits[i] != 1 {
				t.Fatalf("workers %d: index %d below the failure called %d times", workers, i, hits[i])
			}
		}
	}
	if err := Each(0, 4, func(int) error { return errors.New("called") }); err != nil {
		t.Fatalf("no items: %v", err)
	}
}
