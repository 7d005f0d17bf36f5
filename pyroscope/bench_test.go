package pyroscope

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkEncode is what Push costs its caller: checking and encoding a
// profile (the network is the lanes').
func BenchmarkEncode(b *testing.B) {
	for _, n := range []int{100, 2000, 16000} {
		b.Run(fmt.Sprintf("%d_samples", n), func(b *testing.B) {
			p := manySamples(n, time.Now())
			for b.Loop() {
				if _, _, err := encode(p, DefaultMaxSamples, DefaultMaxProfileBytes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
