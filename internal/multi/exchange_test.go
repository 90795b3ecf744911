package multi

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rlxsplat/rlxsplat/internal/gpu"
	"github.com/rlxsplat/rlxsplat/internal/gpu/nccl"
)

// word is what rank s sends rank d as its i-th word, so that a receiver can tell every word's
// origin and place.
func word(s, d, i int) uint32 { return uint32(s)<<28 | uint32(d)<<24 | uint32(i) }

// exchangeRound runs one round of x over devs, every rank at once: rank s sends counts[s][d]
// words to rank d and has room for room[s] words; it returns each rank's received words (nil
// for a failed rank) and the ranks' errors.
func exchangeRound(t *testing.T, x Exchanger, devs []gpu.Device, counts [][]int, room []int) ([][]uint32, []error) {
	t.Helper()
	n := len(devs)
	got, errs := make([][]uint32, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		var send []uint32
		for d, k := range counts[r] {
			for i := range k {
				send = append(send, word(r, d, i))
			}
		}
		sb, err := gpu.AllocSlice[uint32](devs[r], max(len(send), 1))
		if err != nil {
			t.Fatal(err)
		}
		rb, err := gpu.AllocSlice[uint32](devs[r], max(room[r], 1))
		if err != nil {
			t.Fatal(err)
		}
		if len(send) > 0 {
			if err := gpu.UploadU32(devs[r], sb, send); err != nil {
				t.Fatal(err)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ex := &Exchange{Send: sb, SendCounts: counts[r], Recv: rb, RecvCap: room[r]}
			if errs[r] = x.Exchange(r, devs[r], ex); errs[r] != nil {
				return
			}
			total := 0
			for s, k := range ex.RecvCounts {
				if k != counts[s][r] {
					errs[r] = fmt.Errorf("RecvCounts %v, want column %d of %v", ex.RecvCounts, r, counts)
					return
				}
				total += k
			}
			got[r] = make([]uint32, total)
			if total > 0 {
				errs[r] = gpu.DownloadU32(devs[r], got[r], rb)
			}
		}()
	}
	wg.Wait()
	return got, errs
}

// checkReceived compares every rank's words with those sent to it, in rank order.
func checkReceived(t *testing.T, got [][]uint32, counts [][]int) {
	t.Helper()
	for r, g := range got {
		var want []uint32
		for s := range counts {
			for i := range counts[s][r] {
				want = append(want, word(s, r, i))
			}
		}
		if len(g) != len(want) {
			t.Errorf("rank %d received %d words, want %d", r, len(g), len(want))
			continue
		}
		for i := range g {
			if g[i] != want[i] {
				t.Errorf("rank %d word %d: %#x, want %#x (sender %d, for rank %d, index %d)", r, i, g[i], want[i],
					want[i]>>28, want[i]>>24&15, want[i]&0xffffff)
				break
			}
		}
	}
}

// exchangeCases are count tables by rank count: runs of zero (to and from a rank, and to
// itself), runs that are not a multiple of anything, and one large run.
func exchangeCases(n int, rng *rand.Rand) map[string][][]int {
	random, zeros, big := make([][]int, n), make([][]int, n), make([][]int, n)
	for s := range n {
		random[s], zeros[s], big[s] = make([]int, n), make([]int, n), make([]int, n)
		for d := range n {
			if rng.IntN(4) > 0 {
				random[s][d] = 1 + rng.IntN(3000)
			}
			big[s][d] = 1 + s + d
		}
	}
	big[n-1][0] = 1 << 20
	return map[string][][]int{"random": random, "no words": zeros, "one large run": big}
}

func rooms(counts [][]int, extra int) []int {
	room := make([]int, len(counts))
	for s := range counts {
		for d, k := range counts[s] {
			room[d] += k
		}
	}
	for d := range room {
		room[d] += extra
	}
	return room
}

// The host exchanger over one, two and three ranks: every rank receives exactly the words sent
// to it, in rank order, and two rounds in a row reuse the exchanger.
func TestHostExchange(t *testing.T) {
	for _, n := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			devs, _ := devices(t, n)
			x := NewHostExchanger(n)
			defer x.Close()
			rng := rand.New(rand.NewPCG(uint64(n), 17))
			for name, counts := range exchangeCases(n, rng) {
				for round := range 2 {
					got, errs := exchangeRound(t, x, devs, counts, rooms(counts, round))
					if err := errors.Join(errs...); err != nil {
						t.Fatalf("%s, round %d: %v", name, round, err)
					}
					checkReceived(t, got, counts)
				}
			}
		})
	}
}

// A round that cannot run fails on every rank, naming the cause, and the next round runs.
func TestExchangeRefusesABadRound(t *testing.T) {
	devs, _ := devices(t, 2)
	x := NewHostExchanger(2)
	defer x.Close()
	counts := [][]int{{3, 5}, {7, 2}}
	for _, c := range []struct {
		name   string
		counts [][]int
		room   []int
		want   string
	}{
		{"too little room", counts, []int{10, 6}, "rank 1 receives 7 words, room for 6"},
		{"a negative count", [][]int{{3, -1}, {7, 2}}, []int{10, 7}, "rank 0's send count for rank 1 is -1"},
		{"counts for another rank count", [][]int{{3}, {7, 2}}, []int{10, 7}, "rank 0 gave 1 send counts for 2 ranks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errs := exchangeRound(t, x, devs, c.counts, c.room)
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("rank %d: %v, want an error saying %q", r, err, c.want)
				}
			}
			got, errs := exchangeRound(t, x, devs, counts, rooms(counts, 0))
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("the round after: %v", err)
			}
			checkReceived(t, got, counts)
		})
	}
}

// The NCCL exchanger on every GPU of the machine (one rank a GPU; one GPU sends to itself
// through NCCL's grouped point-to-point calls), against the same tables as the host's.
func TestNCCLExchange(t *testing.T) {
	probe, onEmu := devices(t, 1)
	if onEmu {
		t.Skip("NCCL needs a CUDA device")
	}
	probe[0].Close()
	lib, err := nccl.Open(os.Getenv)
	if err != nil {
		t.Skipf("no NCCL: %v", err)
	}
	n := 1
	for ; n < 8; n++ {
		d, err := gpu.OpenWith(gpu.KindCUDA, gpu.Options{Ordinal: n, CacheDir: "off"})
		if err != nil {
			break
		}
		d.Close()
	}
	devs, _ := devices(t, n)
	ords := make([]int, n)
	for k := range ords {
		ords[k] = k
	}
	x, err := NewNCCLExchanger(lib, ords)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	t.Logf("%d GPUs, NCCL %s", n, nccl.VersionString(lib.Version()))
	rng := rand.New(rand.NewPCG(uint64(n), 18))
	for name, counts := range exchangeCases(n, rng) {
		got, errs := exchangeRound(t, x, devs, counts, rooms(counts, 1))
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkReceived(t, got, counts)
	}
}
