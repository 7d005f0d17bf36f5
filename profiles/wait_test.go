package profiles

import (
	"maps"
	"testing"
)

// TestWaitSplitByPhase: blocked time is split where its thread's phases
// change, so the wait profile's time by phase is the steps' own: a get's
// wait half in the dispatch wait and half in the data phase, its GIL tail
// (under the get's stack), a sync and a D2H copy of the step thread, a
// wait past the last step (outside any once the window closes), and
// another thread's wait (other, in the step).
func TestWaitSplitByPhase(t *testing.T) {
	b := New(Config{})
	b.Add(pyWait(102, 1*s, 1*s+100*ms, getPy))
	b.Add(pyWait(101, 1*s+10*ms, 1*s+40*ms, getPy))
	b.Add(gil(101, 1*s+40*ms+5*us, 1*s+41*ms))
	b.Add(callStack(t, 101, "cudaMemcpyAsync", 1*s+85*ms, 1*s+90*ms, 0xa, 0xb, 4, 2, 0))
	b.Add(callStack(t, 101, "cudaStreamSynchronize", 1*s+90*ms, 1*s+100*ms))
	b.Step(step0)
	b.Add(pyWait(101, 1*s+195*ms, 1*s+250*ms, getPy))
	b.Step(step1)
	p := only(t, b.Flush(2*s, true), TypeWait)
	if p.SampleType[0].Type != "wait" || p.SampleType[0].Unit != "nanoseconds" || p.PeriodType.Type != "wait" {
		t.Fatalf("types %v %v", p.SampleType[0], p.PeriodType)
	}
	ns := func(d uint64) int64 { return int64(d) }
	want := map[string]int64{
		"dispatch_wait/dispatch": ns(10 * ms),
		"data/dispatch":          ns(20 * ms),
		"data/gil":               ns(1*ms - 5*us),
		"compute/cuda_copy":      ns(5 * ms),
		"sync/cuda_sync":         ns(10 * ms),
		"compute/dispatch":       ns(5 * ms),
		"other/dispatch":         ns(100*ms + 50*ms), // thread 102's, and past step 1
	}
	if got := sum(p, 0, labels2(LabelPhase, LabelWaitKind)); !maps.Equal(got, want) {
		t.Errorf("wait by phase/kind\n got %v\nwant %v", got, want)
	}
	want = map[string]int64{SpanID(0): ns(100*ms + 30*ms + 1*ms - 5*us + 15*ms), SpanID(1): ns(5 * ms), "": ns(50 * ms)}
	if got := sum(p, 0, label(LabelSpanID)); !maps.Equal(got, want) {
		t.Errorf("wait by span\n got %v\nwant %v", got, want)
	}
	get := "train.py train;queue.py Queue.get;threading.py Condition.wait"
	want = map[string]int64{
		get:            ns(100*ms + 30*ms + 55*ms),
		get + ";[GIL]": ns(1*ms - 5*us),
		"train.py train;model.py Model.forward;cudaMemcpyAsync;[copy d2h]": ns(5 * ms),
		"train.py train;model.py Model.forward;cudaStreamSynchronize":      ns(10 * ms),
	}
	if got := sum(p, 0, names); !maps.Equal(got, want) {
		t.Errorf("wait by stack\n got %v\nwant %v", got, want)
	}
}

// TestGILWithoutItsWait: a GIL wait that follows no wait closely (the
// tail of a write) has no stack but its own frame.
func TestGILWithoutItsWait(t *testing.T) {
	b := New(Config{})
	b.Add(pyWait(101, 1*s, 1*s+ms, getPy))
	b.Add(gil(101, 1*s+2*ms, 1*s+3*ms))
	p := only(t, b.Flush(2*s, true), TypeWait)
	want := map[string]int64{"train.py train;queue.py Queue.get;threading.py Condition.wait": int64(ms), "[GIL]": int64(ms)}
	if got := sum(p, 0, names); !maps.Equal(got, want) {
		t.Errorf("wait by stack %v, want %v", got, want)
	}
}
