// Package par runs the index ranges of a loop on several goroutines: the one way the CPU
// stages split [0, n) into contiguous chunks, so that each writes its own part of the output
// and results that depend on order can be joined range by range; and, for items of uneven
// cost that may fail (files to decode), a queue that hands indices out one at a time (Each).
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// minLen is the loop length below which a goroutine costs more than it saves.
const minLen = 256

// Ranges cuts [0, n) into at most workers contiguous ranges of nearly equal length, in order:
// one range when workers ≤ 1 or n < 256, none when n ≤ 0.
func Ranges(n, workers int) [][2]int {
	if n <= 0 {
		return nil
	}
	if workers < 1 || n < minLen {
		workers = 1
	}
	chunk := (n + workers - 1) / workers
	out := make([][2]int, 0, workers)
	for lo := 0; lo < n; lo += chunk {
		out = append(out, [2]int{lo, min(lo+chunk, n)})
	}
	return out
}

// For calls f(k, lo, hi) for the k-th range of Ranges(n, workers), all at once (on the
// caller's goroutine when there is one range), and returns when every call has.
func For(n, workers int, f func(k, lo, hi int)) {
	rs := Ranges(n, workers)
	if len(rs) == 1 {
		f(0, rs[0][0], rs[0][1])
		return
	}
	var wg sync.WaitGroup
	for k, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(k, r[0], r[1])
		}()
	}
	wg.Wait()
}

// Each calls f(i) for i in [0, n) on up to workers goroutines (GOMAXPROCS when workers ≤ 0),
// handing the indices out in order, one at a time, so that slow items do not hold up a fixed
// share. After a call fails no further index is handed out, and Each returns the error of the
// lowest failing index: every index below it has been called by then, since indices go out in
// order and a call once started always finishes, so the error is the same whatever the
// scheduling.
func Each(n, workers int, f func(i int) error) error {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	errs := make([]error, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() {
					return
				}
				if errs[i] = f(i); errs[i] != nil {
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
