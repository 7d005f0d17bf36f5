package htmlreport

import (
	"math"
	"testing"
)

// A series of many more items than bins keeps at most 2*maxBins bins,
// each naming the items it holds, with their sums exact.
func TestSeriesBoundedAndExact(t *testing.T) {
	var s series
	const n = 12345
	for i := range n {
		it := item{index: i, startNS: uint64(i) * 10, endNS: uint64(i)*10 + 10}
		it.set(0, float64(i))
		if i%3 == 0 {
			it.set(1, 1)
		}
		s.add(&it)
	}
	if len(s.bins) > 2*maxBins || len(s.bins) < maxBins {
		t.Fatalf("%d bins for %d items, want %d to %d", len(s.bins), n, maxBins, 2*maxBins)
	}
	next := 0
	for i := range s.bins {
		b := &s.bins[i]
		if b.First != next || b.Last-b.First+1 != b.N {
			t.Fatalf("bin %d holds items %d-%d (%d), want from %d", i, b.First, b.Last, b.N, next)
		}
		want := float64(b.First+b.Last) / 2 // the mean of First..Last
		if got, ok := b.Mean(0); !ok || math.Abs(got-want) > 1e-9 {
			t.Fatalf("bin %d mean %v, want %v", i, got, want)
		}
		thirds := 0
		for k := b.First; k <= b.Last; k++ {
			if k%3 == 0 {
				thirds++
			}
		}
		if b.Count[1] != thirds {
			t.Fatalf("bin %d counts field 1 in %d items, want %d", i, b.Count[1], thirds)
		}
		if b.StartNS != uint64(b.First)*10 || b.EndNS != uint64(b.Last)*10+10 {
			t.Fatalf("bin %d spans [%d, %d]", i, b.StartNS, b.EndNS)
		}
		next = b.Last + 1
	}
	if next != n || s.items() != n {
		t.Fatalf("bins end at %d, hold %d items, want %d", next, s.items(), n)
	}
	if sum, k := s.total(0); k != n || sum != float64(n)*float64(n-1)/2 {
		t.Fatalf("total %v over %d", sum, k)
	}
}
