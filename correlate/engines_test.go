package correlate

import (
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

// pyput makes the thread block in a Python queue put on a full pool for ns.
func (th *thread) pyput(ns uint64) {
	th.evs = append(th.evs, events.Event{Kind: events.KindPyWait, PID: th.pid, TID: th.tid, Start: th.t, End: th.t + ns,
		Name: "sem_clockwait", Frames: []events.PyFrame{{Func: "Condition.wait", File: "/usr/lib/python3.12/threading.py"},
			{Func: "Queue.put", File: "/usr/lib/python3.12/queue.py"}, {Func: "run_engine", File: "spec_pipeline.py"}}})
	th.t += ns
}

// TestEngineIterations: two engine threads with iterations of their own
// (one also blocked on a full pool each time) give infer_batch_time and
// infer_capacity with no flag; a thread that launches the trainer's
// backward pass but never waits on the GPU is no engine.
func TestEngineIterations(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 600 { // past the boundary's confirmation: engines learned at commit and fed after
		pytorchStep(t, tr, 2*ms, 5*ms, 40, true)
	}
	// engine() iterates in 7×5 µs + 30 µs + 900 µs + 3 ms = 3.965 ms.
	fast := engine(t, 102, tr.t)
	full := newThread(100, 103, 0)
	for full.t < tr.t {
		full.launch(7, 5*us)
		full.call(t, "cudaMemcpyAsync", 30*us, 0xd000, 0xe000, 4<<20, 2, 0x77)
		full.call(t, "cudaStreamSynchronize", 900*us, 0x77)
		full.idle(2 * ms)
		full.pyput(5 * ms) // waits for room: not engine time
	}
	autograd := newThread(100, 104, 0)
	for autograd.t < tr.t {
		autograd.launch(60, 10*us)
		autograd.call(t, "cudaEventRecord", 5*us, 0x99, 0)
		autograd.idle(4 * ms)
	}
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c.ObserveWaits()
	var steps []Step
	evs := merge(tr, fast, full, autograd)
	for i := range evs {
		steps = append(steps, c.Add(&evs[i])...)
	}
	steps = append(steps, c.Finish()...)
	if a, _ := c.Boundary(); a.TID != 101 {
		t.Fatalf("boundary on %d, want the trainer", a.TID)
	}
	engines := c.Engines()
	if len(engines) != 2 || engines[0].TID != 102 || engines[1].TID != 103 {
		t.Fatalf("engines %+v, want threads 102 and 103", engines)
	}
	within(t, "engine 102 busy", engines[0].Busy.P50, 0.003965, 1e-6)
	within(t, "engine 103 busy", engines[1].Busy.P50, 0.002965, 1e-6)
	if engines[0].FullWait != 0 || engines[1].FullWait < 0.9*0.005*float64(engines[1].Iterations) {
		t.Errorf("full-pool waits: %v, %v", engines[0].FullWait, engines[1].FullWait)
	}
	// Each step (~7.5 ms) sees iterations of both: 2 engines at their mean.
	n := 0
	for _, s := range steps[len(steps)/2:] {
		if s.InferIterations == 0 {
			continue
		}
		n++
		if s.InferEngines != 2 || s.InferBatchTime < 0.002965 || s.InferBatchTime > 0.003965 {
			t.Fatalf("step %d: %d engines, infer_batch_time %v", s.Index, s.InferEngines, s.InferBatchTime)
		}
		within(t, "infer_capacity", s.InferCapacity, 2/s.InferBatchTime, 1e-9)
	}
	if n < len(steps)/4 {
		t.Fatalf("%d of %d steps had engine iterations", n, len(steps)/2)
	}
}
