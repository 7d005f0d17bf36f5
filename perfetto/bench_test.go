package perfetto

import (
	"io"
	"math"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// BenchmarkWriter prices Event on the events of a recorded trace, cycled
// and moved on in time each round so that the tracks keep filling: an op
// is one event. "mix" is every event as the loop sees them (most of them
// calls the file leaves out); "slices" only those that become a slice
// (Python and GIL waits, syncs and copies); "steps" a Step call with its
// phases and counters. bytes/op is the file's growth.
func BenchmarkWriter(b *testing.B) {
	tr := readTrace(b, specData)
	var drawn []events.Event
	for _, e := range tr.evs {
		if _, ok := heldThread(&e, nil); ok {
			drawn = append(drawn, e)
		}
	}
	for _, bc := range []struct {
		name string
		evs  []events.Event
	}{{"mix", tr.evs}, {"slices", drawn}} {
		b.Run(bc.name, func(b *testing.B) {
			benchEvents(b, bc.evs)
		})
	}
	b.Run("steps", benchSteps)
}

func benchEvents(b *testing.B, evs []events.Event) {
	first, last := uint64(math.MaxUint64), uint64(0)
	for _, e := range evs {
		if e.End != 0 {
			first, last = min(first, e.Start, e.End), max(last, e.End)
		}
	}
	span := last - first + 1_000_000
	w := New(io.Discard, Options{MaxBytes: math.MaxInt64})
	round := make([]events.Event, len(evs))
	copy(round, evs)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(round)
		if j == 0 && i > 0 {
			for k := range round {
				if round[k].End != 0 {
					round[k].Start += span
					round[k].End += span
				}
				for g := range round[k].GPUs {
					round[k].GPUs[g].TimeNS += span
				}
			}
		}
		w.Event(&round[j])
	}
	b.StopTimer()
	b.ReportMetric(float64(w.Stats().Bytes)/float64(b.N), "bytes/op")
	if w.Stats().Dropped > 0 || w.Stats().Truncated {
		b.Fatalf("stats %+v", w.Stats())
	}
}

func benchSteps(b *testing.B) {
	w := New(io.Discard, Options{MaxBytes: math.MaxInt64})
	const stepNS = 10_000_000
	st := correlate.Step{PID: 1, TID: 1, WallTime: 0.01, StepTime: 0.009, DispatchWait: 0.001, WaitsObserved: true,
		DataMeasured: true, DataTime: 0.002, PoolMeasured: true, Pool: 5, LaunchesCounted: true, Launches: 300,
		ComputeTime: 0.006, ComputeSource: correlate.ComputeEvents, SyncTime: 0.0005, Syncs: 1, H2DBytes: 1 << 20}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := uint64(1e9) + uint64(i)*stepNS
		st.Index, st.StartNS, st.EndNS = i, s, s+stepNS
		st.Phases = append(st.Phases[:0], phase(correlate.PhaseDispatchWait, s, s+1_000_000),
			phase(correlate.PhaseData, s+1_000_000, s+3_000_000), phase(correlate.PhaseCompute, s+3_000_000, s+9_500_000),
			phase(correlate.PhaseSync, s+9_500_000, s+stepNS))
		w.Step(st)
	}
	b.StopTimer()
	b.ReportMetric(float64(w.Stats().Bytes)/float64(b.N), "bytes/op")
}
