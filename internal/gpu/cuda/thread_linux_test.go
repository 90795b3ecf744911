package cuda

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rlxsplat/rlxsplat/internal/gpu/driver"
)

// TestOwnerThreadSingleOSThread checks that concurrent callers all run on one OS thread (the
// property CUDA contexts need) and that calls do not interleave.
func TestOwnerThreadSingleOSThread(t *testing.T) {
	for _, spin := range []time.Duration{0, spinFor} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) { testOwnerThread(t, spin) })
	}
}

func testOwnerThread(t *testing.T, spin time.Duration) {
	var setupTID int
	th, err := startOwnerThread(func() error { setupTID = syscall.Gettid(); return nil }, spin)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, per = 8, 50
	var wg sync.WaitGroup
	tids := make(chan int, goroutines*per)
	inside := 0 // touched only on the owner thread; a data race here would show under -race
	maxInside := 0
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if err := th.Call(func() {
					inside++
					if inside > maxInside {
						maxInside = inside
					}
					tids <- syscall.Gettid()
					inside--
				}); err != nil {
					t.Error(err)
				}
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
}

func TestOwnerThreadSetupError(t *testing.T) {
	boom := errors.New("cuCtxSetCurrent failed")
	if _, err := newOwnerThread(func() error { return boom }, true); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkOwnerThreadCall is the cost of one hop to the owner thread and back, the host
// overhead every driver call pays; run it on the GPU machine, where the spin is on.
func BenchmarkOwnerThreadCall(b *testing.B) {
	for _, spin := range []time.Duration{0, spinFor} {
		b.Run(fmt.Sprintf("spin=%v", spin), func(b *testing.B) {
			th, err := startOwnerThread(func() error { return nil }, spin)
			if err != nil {
				b.Fatal(err)
			}
			defer th.stop()
			x := 0
			for b.Loop() {
				if err := th.Call(func() { x++ }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
