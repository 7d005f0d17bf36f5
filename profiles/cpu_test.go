package profiles

import (
	"maps"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
)

// TestCPUSamplesByPhase: each on-CPU sample is worth the sampling period,
// labelled with its thread's phase (the step thread's timeline; another
// thread's is other) and its step; samples before any step have neither.
func TestCPUSamplesByPhase(t *testing.T) {
	b := New(Config{})
	for _, e := range []struct {
		tid uint32
		at  uint64
	}{{101, s / 2}, {101, 1*s + 30*ms}, {101, 1*s + 60*ms}, {102, 1*s + 60*ms}, {101, 1*s + 70*ms}, {101, 1*s + 150*ms}} {
		b.Add(cpuSample(e.tid, e.at))
	}
	b.Step(step0)
	b.Step(step1)
	if ps := b.Flush(5*s, false); len(ps) != 0 {
		t.Fatalf("%d profiles from a window whose steps and lag are still to come", len(ps))
	}
	ps := b.Flush(5*s, true)
	p := only(t, ps, TypeCPU)
	if ps[0].PID != 100 || ps[0].StartNS != 0 || ps[0].EndNS != 10*s || p.TimeNanos != 0 || p.DurationNanos != int64(10*s) {
		t.Fatalf("window %+v, time %d for %d", ps[0], p.TimeNanos, p.DurationNanos)
	}
	if p.SampleType[0].Type != "cpu" || p.SampleType[0].Unit != "nanoseconds" || p.PeriodType.Type != "cpu" || p.Period != int64(period) {
		t.Fatalf("types %v, period %v %d", p.SampleType[0], p.PeriodType, p.Period)
	}
	n := int64(period)
	want := map[string]int64{string(correlate.PhaseData): n, string(correlate.PhaseCompute): 3 * n, string(correlate.PhaseOther): 2 * n}
	if got := sum(p, 0, label(LabelPhase)); !maps.Equal(got, want) {
		t.Errorf("cpu by phase %v, want %v", got, want)
	}
	want = map[string]int64{SpanID(0): 4 * n, SpanID(1): n, "": n}
	if got := sum(p, 0, label(LabelSpanID)); !maps.Equal(got, want) {
		t.Errorf("cpu by span %v, want %v", got, want)
	}
	want = map[string]int64{"train.py train;model.py Model.forward;at::native::addmm_out": 6 * n}
	if got := sum(p, 0, names); !maps.Equal(got, want) {
		t.Errorf("cpu by stack %v, want %v", got, want)
	}
}
