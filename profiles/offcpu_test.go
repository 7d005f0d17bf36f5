package profiles

import (
	"maps"
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

var readNative = []events.NativeFrame{{Module: "libc.so.6", Offset: 0x8612b}}

func offCPU(tid uint32, from, to, bits uint64, inCall bool) *events.Event {
	e := &events.Event{Kind: events.KindOffCPU, PID: 100, TID: tid, Start: from, End: to, Args: [5]uint64{period, bits},
		Frames: trainPy, Native: readNative}
	if inCall {
		e.Args[events.StackInCallArg] = 1
	}
	return e
}

// TestOffCPUByPhase: time off CPU no probe timed goes to the wait
// profile: a stretch of the period or more for its own length, split by
// phase; a shorter one for the period, at its middle; a wait for the GIL
// under the Python stack with a [GIL] leaf; a preempted one apart.
func TestOffCPUByPhase(t *testing.T) {
	b := New(Config{})
	b.Add(offCPU(101, 1*s+40*ms, 1*s+60*ms, 0, false))                       // data 10 ms, compute 10 ms
	b.Add(offCPU(101, 1*s+70*ms, 1*s+71*ms, 0, false))                       // compute: stands for the period
	b.Add(offCPU(101, 1*s+140*ms, 1*s+152*ms, events.OffCPUGIL, false))      // compute, the GIL
	b.Add(offCPU(101, 1*s+160*ms, 1*s+161*ms, events.OffCPURunnable, false)) // compute, preempted
	b.Step(step0)
	b.Step(step1)
	p := only(t, b.Flush(5*s, true), TypeWait)
	n := int64(period)
	want := map[string]int64{
		"data/off_cpu":      int64(10 * ms),
		"compute/off_cpu":   int64(10*ms) + n,
		"compute/gil":       int64(12 * ms),
		"compute/preempted": n,
	}
	if got := sum(p, 0, labels2(LabelPhase, LabelWaitKind)); !maps.Equal(got, want) {
		t.Errorf("off CPU by phase/kind\n got %v\nwant %v", got, want)
	}
	want = map[string]int64{
		"train.py train;model.py Model.forward;libc.so.6+0x8612b": int64(20*ms) + 2*n,
		"train.py train;model.py Model.forward;[GIL]":             int64(12 * ms),
	}
	if got := sum(p, 0, names); !maps.Equal(got, want) {
		t.Errorf("off CPU by stack\n got %v\nwant %v", got, want)
	}
}

// TestSamplesInsideProbedWaits: a probed wait reports its own time, so an
// off-CPU sample inside one is dropped, whether the wait comes after it
// (as it does: a wait is reported at its return) or before; a CPU sample
// inside one (a sync spinning) is kept with the wait's kind; a sample
// inside a probed call that reports no wait is placed once the grace has
// passed, its window held for it until then.
func TestSamplesInsideProbedWaits(t *testing.T) {
	b := New(Config{})
	b.Add(offCPU(101, 1*s+21*ms, 1*s+39*ms, 0, true))
	b.Add(pyWait(101, 1*s+20*ms, 1*s+40*ms, getPy))
	b.Add(callStack(t, 101, "cudaStreamSynchronize", 1*s+90*ms, 1*s+100*ms))
	b.Add(offCPU(101, 1*s+91*ms, 1*s+92*ms, 0, true))
	spin := cpuSample(101, 1*s+95*ms)
	spin.Args[events.StackInCallArg] = 1
	b.Add(spin)
	b.Add(offCPU(101, 1*s+60*ms, 1*s+80*ms, 0, true)) // in a launch, say: no wait comes
	b.Step(step0)
	b.Step(step1)
	if ps := b.Flush(1*s+500*ms, false); len(ps) != 0 {
		t.Fatalf("%d profiles while a sample is held", len(ps))
	}
	b.Step(step(2, span("compute", 10*s, 11*s)))
	if ps := b.Flush(11*s, false); len(ps) == 0 {
		t.Fatal("no profiles once the held sample's grace passed and steps were cut past the window")
	} else {
		w := only(t, ps, TypeWait)
		want := map[string]int64{"data/dispatch": int64(20 * ms), "sync/cuda_sync": int64(10 * ms), "compute/off_cpu": int64(20 * ms)}
		if got := sum(w, 0, labels2(LabelPhase, LabelWaitKind)); !maps.Equal(got, want) {
			t.Errorf("wait by phase/kind\n got %v\nwant %v", got, want)
		}
		c := only(t, ps, TypeCPU)
		want = map[string]int64{"sync/cuda_sync": int64(period)}
		if got := sum(c, 0, labels2(LabelPhase, LabelWaitKind)); !maps.Equal(got, want) {
			t.Errorf("cpu by phase/kind\n got %v\nwant %v", got, want)
		}
	}
	if st := b.Stats(); st.OffCPUInWaits != 2 || st.CPUInWaits != 1 {
		t.Errorf("stats %+v: want 2 off-CPU samples in waits, 1 CPU sample", st)
	}
}
