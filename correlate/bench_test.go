package correlate

import "testing"

// BenchmarkCorrelate measures the correlator's cost per event on a
// spec_pipeline-shaped stream (a trainer and two engine threads), once the
// boundary is known: what attach spends per event it reads.
func BenchmarkCorrelate(b *testing.B) {
	tr := newThread(100, 101, 0)
	for range 2000 {
		pytorchStep(b, tr, 3*ms, 6*ms, 50, true)
	}
	evs := merge(tr, engine(b, 102, tr.t), engine(b, 103, tr.t))
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		c, _ := New(Config{})
		for i := range evs {
			c.Add(&evs[i])
			n++
			if n == b.N {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/event")
}
