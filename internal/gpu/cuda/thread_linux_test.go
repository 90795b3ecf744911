package cuda

import (
	"errors"
	"sync"
	"syscall"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// TestOwnerThreadSingleOSThread checks that the calls and posts of concurrent callers all run
// on one OS thread (the property CUDA contexts need), one at a time, and each caller's in the
// order it made them.
func TestOwnerThreadSingleOSThread(t *testing.T) {
	var setupTID int
	th, err := newOwnerThread(func() error { setupTID = syscall.Gettid(); return nil })
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, per = 8, 60
	var wg sync.WaitGroup
	tids := make(chan int, goroutines*per)
	// Touched only on the owner thread; a data race here would show under -race.
	inside, maxInside := 0, 0
	last := make([]int, goroutines) // the last sequence number of each caller that ran
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= per; i++ {
				fn := func() {
					inside++
					maxInside = max(maxInside, inside)
					if last[g] != i-1 {
						t.Errorf("caller %d: call %d ran after %d", g, i, last[g])
					}
					last[g] = i
					tids <- syscall.Gettid()
					inside--
				}
				var err error
				if i%3 == 0 { // every third waits, the rest are posted
					err = th.Call(fn)
				} else {
					err = th.Post(fn)
				}
				if err != nil {
					t.Error(err)
				}
			}
			if err := th.Call(func() {}); err != nil { // drains this caller's posts
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	close(tids)
	n := 0
	for tid := range tids {
		n++
		if tid != setupTID {
			t.Fatalf("call ran on thread %d, setup ran on %d", tid, setupTID)
		}
	}
	if n != goroutines*per || maxInside != 1 {
		t.Fatalf("%d calls ran (want %d), max concurrent %d", n, goroutines*per, maxInside)
	}
	th.stop()
	ran := false
	if err := th.Call(func() { ran = true }); !errors.Is(err, driver.ErrClosed) || ran {
		t.Fatalf("Call after stop: err %v, ran %v", err, ran)
	}
	if err := th.Post(func() { ran = true }); !errors.Is(err, driver.ErrClosed) || ran {
		t.Fatalf("Post after stop: err %v, ran %v", err, ran)
	}
}

func TestOwnerThreadSetupError(t *testing.T) {
	boom := errors.New("cuCtxSetCurrent failed")
	if _, err := newOwnerThread(func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkOwnerThread is the host cost of a hop to the owner thread: a Call there and back
// (what every waited-for driver call pays), and a Post with a Call every 64 (what a launch
// costs its caller).
func BenchmarkOwnerThread(b *testing.B) {
	th, err := newOwnerThread(func() error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	defer th.stop()
	x := 0
	inc := func() { x++ }
	b.Run("call", func(b *testing.B) {
		for b.Loop() {
			if err := th.Call(inc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("post", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if i++; i%64 == 0 {
				err = th.Call(inc)
			} else {
				err = th.Post(inc)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
