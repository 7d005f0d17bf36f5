package correlate

import (
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

// loaderWait makes the thread block in a DataLoader's get for ns.
func (th *thread) loaderWait(ns uint64) {
	th.evs = append(th.evs, events.Event{Kind: events.KindPyWait, PID: th.pid, TID: th.tid, Start: th.t, End: th.t + ns,
		Frames: []events.PyFrame{{Func: "Condition.wait", File: "/usr/lib/python3.12/threading.py"},
			{Func: "_MultiProcessingDataLoaderIter._get_data", File: "/x/torch/utils/data/dataloader.py"},
			{Func: "train", File: "train.py"}}})
	th.t += ns
}

type phaseTruth struct{ end, data, compute, wait uint64 }

// syncLoop is a plain supervised loop over a DataLoader: next() (a wait
// of dataNS), the copy in, torch.cuda.synchronize(), the forward pass,
// backward on autograd's thread (more kernels, and a device-to-device
// copy, while the loop's thread waits natively), the optimizer and a
// second synchronize. It returns each step's truth.
func syncLoop(t *testing.T, main, grad *thread, steps int, dataNS uint64) []phaseTruth {
	var out []phaseTruth
	for range steps {
		start := main.t
		main.idle(100 * us)
		main.loaderWait(dataNS)
		main.call(t, "cudaMemcpyAsync", 30*us, 0xa000, 0xb000, 2<<20, 1, 0)
		main.call(t, "cudaDeviceSynchronize", 150*us)
		computeStart := main.t // the loop's t_data, after its sync
		main.idle(40 * us)
		main.launch(12, 10*us)
		grad.t = main.t
		grad.launch(40, 10*us)
		grad.call(t, "cudaMemcpyAsync", 8*us, 0xe000, 0xf000, 1<<20, 3, 0)
		main.t = grad.t + 20*us
		main.launch(8, 10*us)
		main.call(t, "cudaDeviceSynchronize", 3*ms)
		out = append(out, phaseTruth{end: main.t, data: computeStart - start, compute: main.t - computeStart})
	}
	return out
}

// checkPhases holds steps to the loop's truth by their end: every step
// has data_time, within rel of the truth, and its compute_time where
// measured; dispatch_wait where the truth has one.
func checkPhases(t *testing.T, steps []Step, truth []phaseTruth, rel float64) {
	t.Helper()
	byEnd := map[uint64]phaseTruth{}
	for _, tr := range truth {
		byEnd[tr.end] = tr
	}
	estimated := 0
	for _, s := range steps {
		tr, ok := byEnd[s.EndNS]
		if !ok {
			t.Fatalf("step %d ends at %d, at no step end of the loop", s.Index, s.EndNS)
		}
		if !s.DataMeasured {
			t.Fatalf("step %d (launches counted %v) has no data_time", s.Index, s.LaunchesCounted)
		}
		if s.DataSource == DataCalibrated {
			estimated++
		}
		within(t, "data_time", s.DataTime, seconds(tr.data), rel)
		if s.ComputeSource != ComputeNone {
			within(t, "compute_time", s.ComputeTime, seconds(tr.compute), rel)
		}
		if tr.wait > 0 {
			within(t, "dispatch_wait", s.DispatchWait, seconds(tr.wait), rel)
		}
	}
	if len(steps) < len(truth)-2 {
		t.Fatalf("%d steps of %d", len(steps), len(truth))
	}
	t.Logf("%d steps, %d with data_time estimated", len(steps), estimated)
}

// TestStepThreadWaitsForResults: PyTorch's autograd thread launches more
// kernels than the loop's own thread and copies once a step, but never
// waits for the GPU: the loop's thread is the step thread, with the sync
// that ends its compute as the boundary (not the one after its copy in),
// and no engine. With launches sampled, data_time is in every step.
func TestStepThreadWaitsForResults(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dataNS uint64
	}{{"data-bound", 12 * ms}, {"compute-bound", 200 * us}} {
		t.Run(tc.name, func(t *testing.T) {
			main, grad := newThread(100, 101, 0), newThread(100, 102, 0)
			truth := syncLoop(t, main, grad, 1200, tc.dataNS)
			c, steps := runPython(t, sample(merge(main, grad), 4e9, 4e9, 1e9))
			a, _ := c.Boundary()
			if a.TID != 101 || a.Calls != "device sync" {
				t.Fatalf("boundary %q on thread %d, want device sync on 101", a.Calls, a.TID)
			}
			if n := len(c.Engines()); n != 0 {
				t.Errorf("%d engines, want none", n)
			}
			checkPhases(t, steps, truth, 0.03)
		})
	}
}

// TestMicroBatchDataPhases: gradient accumulation over two micro-batches,
// each taking its samples from a queue, collating and copying them in,
// and timing its forward/backward with events: data_time is both data
// phases, dispatch_wait both gets' waits.
func TestMicroBatchDataPhases(t *testing.T) {
	tr := newThread(100, 101, 0)
	var truth []phaseTruth
	for i := range 1500 {
		var data, wait uint64
		for mb := range 2 {
			m0 := tr.t
			w := uint64(300+200*((i+mb)%3)) * us
			tr.pywait(w)
			tr.call(t, "cudaMemcpyAsync", 40*us, 0xa000, 0xb000, 1<<20, 1, 0)
			tr.idle(900 * us) // collation
			data += tr.t - m0 - w
			wait += w
			tr.call(t, "cudaEventRecordWithFlags", 3*us, uint64(0xe1+2*mb), 0)
			tr.launch(30, 10*us)
			tr.call(t, "cudaEventRecordWithFlags", 3*us, uint64(0xe2+2*mb), 0)
		}
		tr.call(t, "cudaMemcpyAsync", 10*us, 0xc000, 0xd000, 4, 2, 0)
		tr.call(t, "cudaStreamSynchronize", 2*ms, 0)
		tr.elapsed(t, 1.2, 0xe1, 0xe2)
		tr.elapsed(t, 1.3, 0xe3, 0xe4)
		truth = append(truth, phaseTruth{end: tr.t, data: data, compute: 2500 * us, wait: wait})
	}
	c, steps := runPython(t, sample(tr.evs, 4e9, 4e9, 1e9))
	if a, _ := c.Boundary(); a.Calls != "event elapsed-time read" {
		t.Fatalf("boundary %q, want the elapsed-time reads", a.Calls)
	}
	checkPhases(t, steps, truth, 0.03)
}

// TestLastSyncBeforeTheFetch: the Hugging Face Trainer's step reads five
// values with .item() (a D2H copy and a sync each), kernels launched
// between them, then copies its next batch in (a sync after each copy)
// and waits for the one after from its DataLoader. No cluster of syncs
// comes once a step; the last sync before each fetch does, and the copy
// in and the wait open the next step.
func TestLastSyncBeforeTheFetch(t *testing.T) {
	tr := newThread(100, 101, 0)
	var truth []phaseTruth
	for i := range 900 {
		for range 2 {
			tr.call(t, "cudaMemcpyAsync", 15*us, 0xa000, 0xb000, 8192, 1, 0)
			tr.call(t, "cudaStreamSynchronize", 10*us, 0)
		}
		tr.loaderWait(uint64(1+i%3) * ms)
		tr.idle(50 * us)
		for _, n := range []int{17, 81, 2, 16, 1} {
			tr.launch(n, 20*us)
			tr.call(t, "cudaMemcpyAsync", 10*us, 0xc000, 0xd000, 4, 2, 0)
			tr.call(t, "cudaStreamSynchronize", 200*us, 0)
		}
		truth = append(truth, phaseTruth{end: tr.t})
		tr.idle(300 * us) // logging
	}
	c, steps := runPython(t, sample(tr.evs, 4e9, 4e9, 1e9))
	a, _ := c.Boundary()
	if a.Calls != "stream sync" || !a.m.cut {
		t.Fatalf("boundary %q (%s), want the last stream sync before each fetch", a.Calls, a.Reason)
	}
	byEnd := map[uint64]bool{}
	for _, tr := range truth {
		byEnd[tr.end] = true
	}
	for _, s := range steps {
		if !byEnd[s.EndNS] {
			t.Fatalf("step %d ends at %d, at no step end of the loop", s.Index, s.EndNS)
		}
		if !s.DataMeasured || s.DataTime < 1e-3 {
			t.Fatalf("step %d (launches counted %v): data_time %v (measured %v), want its copies and wait", s.Index, s.LaunchesCounted, s.DataTime, s.DataMeasured)
		}
	}
	if len(steps) < len(truth)-3 {
		t.Fatalf("%d steps of %d", len(steps), len(truth))
	}
}

// TestPollingBetweenSleepsIsDispatch: a controller polling its pool's
// qsize() every 2 ms waits all the time it polls, the checks between its
// sleeps too.
func TestPollingBetweenSleepsIsDispatch(t *testing.T) {
	tr := newThread(100, 101, 0)
	sleep := func(ns uint64) {
		tr.evs = append(tr.evs, events.Event{Kind: events.KindPyWait, Name: "clock_nanosleep", PID: 100, TID: 101, Start: tr.t, End: tr.t + ns,
			Frames: []events.PyFrame{{Func: "controller", File: "train.py"}}})
		tr.t += ns
	}
	for range 300 {
		for range 5 {
			sleep(2 * ms)
			tr.idle(40 * us) // q.qsize()
		}
		pytorchStep(t, tr, ms, 3*ms, 30, true)
	}
	_, steps := runPython(t, tr.evs)
	for _, s := range steps[5:] {
		// Five sleeps and the four checks between them; the last check
		// found the batch and is the step's.
		within(t, "dispatch_wait", s.DispatchWait, seconds(5*2*ms+4*40*us), 1e-6)
	}
}
