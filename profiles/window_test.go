package profiles

import (
	"maps"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/gpuprof/gpuprof/correlate"
)

func windowsOf(ps []Profile) [][2]uint64 {
	var out [][2]uint64
	for _, p := range ps {
		out = append(out, [2]uint64{p.StartNS, p.EndNS})
	}
	return out
}

// TestWindowsCompleteOnceStepsPassThem: a window is returned once its
// process's steps are cut past its end, and not before.
func TestWindowsCompleteOnceStepsPassThem(t *testing.T) {
	b := New(Config{Interval: time.Second})
	for _, at := range []uint64{s / 2, 1*s + s/2, 2*s + s/2} {
		b.Add(cpuSample(101, at))
	}
	b.Step(step(0, span(correlate.PhaseCompute, s/4, 1*s+200*ms)))
	if got := windowsOf(b.Flush(1*s+300*ms, false)); len(got) != 1 || got[0] != [2]uint64{0, s} {
		t.Fatalf("windows %v, want only [0, 1 s)", got)
	}
	b.Step(step(1, span(correlate.PhaseCompute, 1*s+200*ms, 2*s)))
	ps := b.Flush(2*s+100*ms, false)
	if got := windowsOf(ps); len(got) != 1 || got[0] != [2]uint64{s, 2 * s} {
		t.Fatalf("windows %v, want only [1 s, 2 s)", got)
	}
	if got := sum(only(t, ps, TypeCPU), 0, label(LabelSpanID)); !maps.Equal(got, map[string]int64{SpanID(1): int64(period)}) {
		t.Errorf("second window's samples by span %v", got)
	}
	if ps := b.Flush(2*s+100*ms, true); len(ps) != 1 || ps[0].StartNS != 2*s {
		t.Fatalf("final flush: %v, want the last window", windowsOf(ps))
	}
}

// TestLagFlush: a process whose steps do not come (none found yet, or a
// worker with none) gets its windows once they are older than the lag
// bound, its samples outside any step.
func TestLagFlush(t *testing.T) {
	b := New(Config{Interval: time.Second})
	b.Add(cpuSample(101, s/2))
	b.Add(pyWait(101, s/4, s/2, getPy))
	if ps := b.Flush(3*s+999*ms, false); len(ps) != 0 {
		t.Fatalf("%d profiles before the lag bound (3 intervals past the window)", len(ps))
	}
	ps := b.Flush(4*s, false)
	if len(ps) != 2 {
		t.Fatalf("%d profiles past the lag bound, want cpu and wait", len(ps))
	}
	for _, typ := range []Type{TypeCPU, TypeWait} {
		p := only(t, ps, typ)
		if got := sum(p, 0, labels2(LabelPhase, LabelSpanID)); len(got) != 1 || got["other/"] == 0 {
			t.Errorf("%s by phase/span %v, want all other, in no step", typ, got)
		}
	}
}

// TestWaitsAcrossWindows: blocked time is cut at the windows it crosses;
// what falls in a window already returned is dropped and counted.
func TestWaitsAcrossWindows(t *testing.T) {
	b := New(Config{Interval: time.Second})
	b.Add(pyWait(101, 800*ms, 1*s+300*ms, getPy))
	b.Step(step(0, span(correlate.PhaseCompute, 700*ms, 1*s+100*ms)))
	ps := b.Flush(1*s+200*ms, false)
	if got := total(only(t, ps, TypeWait), 0); got != int64(200*ms) {
		t.Fatalf("first window holds %d ns of the wait, want 200 ms", got)
	}
	b.Add(pyWait(102, 500*ms, 1*s+500*ms, getPy)) // its first half's window was sent
	if st := b.Stats(); st.Late != 1 || st.LateNS != 500*ms {
		t.Fatalf("late %d (%d ns), want one stretch of 500 ms", st.Late, st.LateNS)
	}
	p := only(t, b.Flush(2*s, true), TypeWait)
	// Thread 101's wait past the step, and 102's: in step 0 (as another
	// thread's, other), then in none.
	want := map[string]int64{"compute/" + SpanID(0): int64(100 * ms), "other/" + SpanID(0): int64(100 * ms), "other/": int64(200*ms + 400*ms)}
	if got := sum(p, 0, labels2(LabelPhase, LabelSpanID)); !maps.Equal(got, want) {
		t.Errorf("second window by phase/span %v, want %v", got, want)
	}
}

// TestWindowsOnTheWallClock: windows start at multiples of the interval
// on the wall clock, so every process and host cuts at the same instants,
// and TimeNanos is the window's start there.
func TestWindowsOnTheWallClock(t *testing.T) {
	const boot = int64(1_700_000_000_250_000_000) // wall time at event time 0: a quarter second past a whole second
	b := New(Config{Interval: time.Second, Clock: func(m uint64) time.Time { return time.Unix(0, boot+int64(m)) }})
	b.Add(cpuSample(101, 5*s+700*ms))
	b.Add(cpuSample(101, 5*s+800*ms))
	ps := b.Flush(10*s, true)
	if got := windowsOf(ps); len(got) != 2 || got[0] != [2]uint64{4*s + 750*ms, 5*s + 750*ms} || got[1] != [2]uint64{5*s + 750*ms, 6*s + 750*ms} {
		t.Fatalf("windows %v", got)
	}
	if tn := ps[1].Prof.TimeNanos; tn != boot+int64(5*s+750*ms) || tn%int64(s) != 0 {
		t.Errorf("TimeNanos %d, want the window's start on the wall clock, a whole second", tn)
	}
}

// TestBoundedStacks: past MaxStacks new stacks fold into "[other
// stacks]", past MaxSamples new (stack, labels) pairs do, keeping their
// phase but not their step; past MaxPending a sample is labelled at once.
// The totals stay whole, and the folds are counted.
func TestBoundedStacks(t *testing.T) {
	funcs := []string{"a", "b", "c"}
	sample := func(b *Builder, f string, at uint64) {
		e := cpuSample(101, at)
		e.Native = nil
		e.Frames = trainPy[:0:0]
		e.Frames = append(e.Frames, trainPy[0])
		e.Frames[0].Func = f
		b.Add(e)
	}
	b := New(Config{MaxStacks: 2})
	for i, f := range funcs {
		sample(b, f, 1*s+uint64(i+1)*ms)
	}
	b.Step(step0)
	p := only(t, b.Flush(2*s, true), TypeCPU)
	want := map[string]int64{"model.py a": int64(period), "model.py b": int64(period), "[other stacks]": int64(period)}
	if got := sum(p, 0, names); !maps.Equal(got, want) || b.Stats().StacksFolded != 1 {
		t.Errorf("stacks %v (%d folded), want %v", got, b.Stats().StacksFolded, want)
	}

	b = New(Config{MaxSamples: 2})
	for i, f := range funcs {
		sample(b, f, 1*s+uint64(i+1)*ms)
	}
	b.Step(step0)
	p = only(t, b.Flush(2*s, true), TypeCPU)
	want = map[string]int64{"model.py a/" + SpanID(0): int64(period), "model.py b/" + SpanID(0): int64(period), "[other stacks]/": int64(period)}
	spanOf := label(LabelSpanID)
	if got := sum(p, 0, func(s2 *profile.Sample) string { return names(s2) + "/" + spanOf(s2) }); !maps.Equal(got, want) || b.Stats().SamplesFolded != 1 {
		t.Errorf("samples %v (%d folded), want %v", got, b.Stats().SamplesFolded, want)
	}
	if len(p.Sample) != 3 {
		t.Errorf("%d samples, want 2 and the fold", len(p.Sample))
	}

	b = New(Config{MaxPending: 1})
	sample(b, "a", 1*s+30*ms)
	sample(b, "a", 1*s+60*ms)
	b.Step(step0)
	p = only(t, b.Flush(2*s, true), TypeCPU)
	want = map[string]int64{"data": int64(period), "other": int64(period)}
	if got := sum(p, 0, label(LabelPhase)); !maps.Equal(got, want) || b.Stats().Unplaced != 1 {
		t.Errorf("by phase %v (%d unplaced), want %v", got, b.Stats().Unplaced, want)
	}
}

// TestStepsForgotten: the steps kept to label samples go once the lag
// bound is past them, in a process with no samples too.
func TestStepsForgotten(t *testing.T) {
	b := New(Config{Interval: time.Second})
	for i := range 1000 {
		b.Step(step(i, span(correlate.PhaseCompute, uint64(i)*10*ms, uint64(i+1)*10*ms)))
		b.Flush(uint64(i+1)*10*ms, false)
	}
	// Steps end at 10 s; the lag bound is at 7 s, where a window begins.
	if n := len(b.procs[100].steps); n != 300 {
		t.Errorf("%d steps kept, want the 300 since 7 s", n)
	}
	b.Add(cpuSample(101, 5*s))
	if b.Stats().Late != 1 {
		t.Errorf("a sample of a window past the lag bound was not counted late")
	}
}
