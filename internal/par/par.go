// Package par runs the index ranges of a loop on several goroutines: the one way the CPU
// stages split [0, n) into contiguous chunks, so that each writes its own part of the output
// and results that depend on order can be joined range by range.
package par

import "sync"

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
