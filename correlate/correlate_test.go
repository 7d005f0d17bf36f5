package correlate

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

// pytorchStep writes one step shaped like spec_pipeline's trainer: fetch
// data, copy it in, record, launch forward/backward/optimizer, record,
// loss.item(), read the elapsed time.
func pytorchStep(t testing.TB, th *thread, dataNS, computeNS uint64, launches int, readElapsed bool) {
	th.idle(dataNS / 2)
	for range 4 {
		th.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 4<<20, 1, 0x55)
		th.idle(dataNS / 8)
	}
	th.launch(1, 5*us) // cat
	th.call(t, "cudaEventRecordWithFlags", 3*us, 0xe1, 0x55)
	th.launch(launches, 8*us)
	th.call(t, "cudaEventRecordWithFlags", 3*us, 0xe2, 0x55)
	th.call(t, "cudaMemcpyAsync", 10*us, 0xc000, 0xd000, 4, 2, 0x55)
	// loss.item() waits for the GPU to finish the step's work.
	th.call(t, "cudaStreamSynchronize", computeNS-uint64(launches)*8*us, 0x55)
	if readElapsed {
		th.elapsed(t, float32(computeNS)/1e6, 0xe1, 0xe2)
	}
	th.idle(50 * us) // logging
}

func within(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	if math.Abs(got-want) > rel*want {
		t.Errorf("%s = %.6f, want %.6f ±%.0f%%", what, got, want, rel*100)
	}
}

func TestElapsedReadingsAnchorSteps(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 40 {
		pytorchStep(t, tr, 4*ms, 6*ms, 50, true)
	}
	c, steps := run(t, Config{}, merge(tr, engine(t, 102, tr.t), engine(t, 103, tr.t)))
	a, ok := c.Boundary()
	if !ok || a.TID != 101 || !strings.Contains(a.Calls, "elapsed") {
		t.Fatalf("boundary = %+v, want elapsed reads on 101", a)
	}
	// The first boundary opens step 0, so 40 iterations give 39 steps.
	if len(steps) != 39 {
		t.Fatalf("got %d steps, want 39", len(steps))
	}
	period := float64(tr.t) / 40 / 1e9
	for _, s := range steps[1:] {
		within(t, "step_time", s.StepTime, period, 0.001)
		within(t, "compute_time", s.ComputeTime, 0.006, 0.001)
		if s.ComputeSource != ComputeEvents || s.Launches != 51 || s.H2DBytes != 16<<20 || s.D2HBytes != 4 || s.Syncs != 1 {
			t.Fatalf("step %+v", s)
		}
	}
	for i, s := range steps {
		if s.Index != i || (i > 0 && s.StartNS != steps[i-1].EndNS) {
			t.Fatalf("steps not contiguous at %d: %+v", i, s)
		}
	}
}

func TestEarlierStepsReadingsAreNotBoundaries(t *testing.T) {
	// DistributedDataParallel times its forward and backward with CUDA
	// events on some iterations (the first ten, then every hundredth) and
	// reads them at the next forward, after that step's data is in: those
	// readings time the step before (torch 2.11, DDP's Logger on H200). They neither end a step nor count in
	// its compute_time; the loop's own reading does both.
	tr := newThread(100, 101, 0)
	ddpTimed := func(i int) bool { return i >= 50 && i%25 == 0 } // the boundary found by then
	for i := range 200 {
		ddpIteration(t, tr, i, ddpTimed, 6)
	}
	c, steps := run(t, Config{}, tr.evs)
	if a, _ := c.Boundary(); !strings.Contains(a.Calls, "elapsed") {
		t.Fatalf("boundary %q, want the elapsed-time read", a.Calls)
	}
	if len(steps) != 199 {
		t.Fatalf("%d steps, want 199: the earlier steps' readings cut steps", len(steps))
	}
	for _, s := range steps {
		within(t, fmt.Sprintf("step %d compute_time", s.Index), s.ComputeTime, 0.006, 0.001)
	}
}

// TestUnrecordedReadingsAreNotBoundaries: the same DDP loop once gpuprof
// probes only the loop's own records (probes/recordsites.go): DDP's are
// made from the call site of its collectives' records and go unseen, so
// its readings' events have no record. Where the loop's readings have
// theirs, those are still no boundary and no compute.
func TestUnrecordedReadingsAreNotBoundaries(t *testing.T) {
	tr := newThread(100, 101, 0)
	ddpTimed := func(i int) bool { return i >= 50 && i%25 == 0 }
	for i := range 200 {
		ddpIteration(t, tr, i, ddpTimed, 6)
	}
	var kept []events.Event
	for _, e := range tr.evs {
		if h := e.Handle(); e.Desc().Name == "cudaEventRecordWithFlags" && h >= 0xd1 && h <= 0xd3 {
			continue
		}
		kept = append(kept, e)
	}
	_, steps := run(t, Config{}, kept)
	if len(steps) != 199 {
		t.Fatalf("%d steps, want 199: readings of unrecorded events cut steps", len(steps))
	}
	for _, s := range steps {
		within(t, fmt.Sprintf("step %d compute_time", s.Index), s.ComputeTime, 0.006, 0.001)
	}
}

func TestLaggingReadingsStillBoundaries(t *testing.T) {
	// A loop that reads the previous step's timing events (no sync for
	// them in this step): every reading times an earlier step, and each
	// still ends one.
	tr := newThread(100, 101, 0)
	for i := range 100 {
		tr.idle(2 * ms)
		tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 4<<20, 1, 0x55)
		ev := uint64(0xe0 + 2*(i%2)) // two pairs in turn
		tr.call(t, "cudaEventRecordWithFlags", 3*us, ev, 0x55)
		tr.launch(80, 8*us)
		tr.call(t, "cudaEventRecordWithFlags", 3*us, ev+1, 0x55)
		tr.call(t, "cudaMemcpyAsync", 10*us, 0xc000, 0xd000, 4, 2, 0x55)
		tr.call(t, "cudaStreamSynchronize", 3*ms, 0x55)
		if i > 0 {
			prev := uint64(0xe0 + 2*((i-1)%2))
			tr.elapsed(t, 4, prev, prev+1)
		}
	}
	c, steps := run(t, Config{}, tr.evs)
	if a, _ := c.Boundary(); !strings.Contains(a.Calls, "elapsed") {
		t.Fatalf("boundary %q, want the elapsed-time read", a.Calls)
	}
	if len(steps) < 97 {
		t.Fatalf("%d steps of 99", len(steps))
	}
}

func TestDerivedComputeWithoutReadings(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 30 {
		pytorchStep(t, tr, 2*ms, 5*ms, 40, false)
	}
	c, steps := run(t, Config{}, tr.evs)
	a, _ := c.Boundary()
	if !strings.Contains(a.Calls, "stream sync") {
		t.Fatalf("boundary %q, want the stream sync", a.Calls)
	}
	if len(steps) != 29 {
		t.Fatalf("got %d steps", len(steps))
	}
	for _, s := range steps {
		if s.ComputeSource != ComputeDerived {
			t.Fatalf("source %q", s.ComputeSource)
		}
		// From the cat launch to the end of the sync: record, launches,
		// record, the loss copy and the sync.
		within(t, "derived compute", s.ComputeTime, 0.005+0.000021, 0.01)
	}
}

func TestFinestRegularBoundaryWins(t *testing.T) {
	// loss.item() only every 10th step; the input copy happens every step.
	tr := newThread(100, 101, 0)
	for i := range 80 {
		tr.idle(2 * ms)
		tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 1<<20, 1, 0)
		tr.launch(60, 10*us)
		if i%10 == 9 {
			tr.call(t, "cudaMemcpyAsync", 10*us, 0xc000, 0xd000, 4, 2, 0)
			tr.call(t, "cudaStreamSynchronize", 2*ms, 0)
		}
	}
	c, steps := run(t, Config{}, tr.evs)
	a, _ := c.Boundary()
	if a.Calls != "h2d copy" {
		t.Fatalf("boundary %q, want h2d copy", a.Calls)
	}
	if len(steps) < 75 {
		t.Fatalf("got %d steps, want ~79", len(steps))
	}
}

func TestNestedReadingsCountOnce(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 20 {
		tr.idle(ms)
		tr.call(t, "cudaEventRecord", 2*us, 0x1, 0)
		tr.launch(20, 10*us)
		tr.call(t, "cudaEventRecord", 2*us, 0x2, 0)
		tr.launch(20, 10*us)
		tr.call(t, "cudaEventRecord", 2*us, 0x3, 0)
		tr.call(t, "cudaStreamSynchronize", 3*ms, 0)
		tr.elapsed(t, 1.5, 0x1, 0x2) // forward
		tr.elapsed(t, 2.0, 0x2, 0x3) // backward
		tr.elapsed(t, 3.5, 0x1, 0x3) // whole step, contains both
	}
	_, steps := run(t, Config{}, tr.evs)
	if len(steps) == 0 {
		t.Fatal("no steps")
	}
	for _, s := range steps {
		if s.Readings != 3 {
			t.Fatalf("readings %d, want the three of one step", s.Readings)
		}
		within(t, "compute_time", s.ComputeTime, 0.0035, 1e-6)
	}
}

func TestTwoItemCallsEndOneStep(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 25 {
		tr.idle(ms)
		tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 1<<20, 1, 0)
		tr.launch(30, 10*us)
		for range 2 { // loss.item(), acc.item()
			tr.call(t, "cudaMemcpyAsync", 5*us, 0xc000, 0xd000, 4, 2, 0)
			tr.call(t, "cudaStreamSynchronize", ms, 0)
		}
	}
	c, steps := run(t, Config{}, tr.evs)
	a, _ := c.Boundary()
	if a.Calls != "stream sync" || len(steps) != 24 {
		t.Fatalf("boundary %q with %d steps, want stream sync with 24", a.Calls, len(steps))
	}
	for _, s := range steps {
		if s.Syncs != 2 {
			t.Fatalf("step has %d syncs, want both", s.Syncs)
		}
	}
}

func TestConfiguredBoundary(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 20 {
		pytorchStep(t, tr, 2*ms, 4*ms, 30, true)
	}
	c, steps := run(t, Config{Boundary: "cuStreamSynchronize"}, tr.evs)
	a, _ := c.Boundary()
	if a.Calls != "stream sync" || len(steps) != 19 {
		t.Fatalf("boundary %q, %d steps", a.Calls, len(steps))
	}
	// The elapsed read after the sync now opens the next step; its reading
	// still gives compute time there.
	if steps[5].ComputeSource != ComputeEvents {
		t.Fatalf("source %q", steps[5].ComputeSource)
	}
	if _, err := New(Config{Boundary: "cuLaunchKernel"}); err == nil {
		t.Error("a launch as boundary was accepted")
	}
	if _, err := New(Config{Boundary: "nonsense"}); err == nil || !strings.Contains(err.Error(), "gpuprof probes") {
		t.Errorf("bad name error = %v", err)
	}
	if _, err := New(Config{Boundary: "cudaMemcpyAsync:sideways"}); err == nil {
		t.Error("bad direction accepted")
	}
	if _, err := New(Config{Boundary: "cudaMemcpyAsync:d2h"}); err != nil {
		t.Error(err)
	}
}

func TestWithoutLaunchCounts(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 20 {
		pytorchStep(t, tr, 2*ms, 4*ms, 30, true)
	}
	for i := range tr.evs {
		tr.evs[i].Launches, tr.evs[i].LaunchFirst, tr.evs[i].LaunchLast = 0, 0, 0
	}
	c, steps := run(t, Config{NoLaunchCounts: true}, tr.evs)
	a, ok := c.Boundary()
	if !ok || !strings.Contains(a.Calls, "elapsed") || len(steps) != 19 {
		t.Fatalf("boundary %+v, %d steps", a, len(steps))
	}
}

func TestDeterministic(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 30 {
		pytorchStep(t, tr, 3*ms, 5*ms, 45, true)
	}
	evs := merge(tr, engine(t, 102, tr.t), engine(t, 103, tr.t))
	_, a := run(t, Config{}, evs)
	_, b := run(t, Config{}, evs)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same events gave different steps")
	}
}

func TestIrregularStepsMatchLoosely(t *testing.T) {
	// Dynamic shapes: the number of kernels varies ±30% step to step.
	tr := newThread(100, 101, 0)
	for i := range 400 {
		tr.idle(ms)
		tr.launch(70+(i*37)%60, 10*us)
		tr.call(t, "cudaMemcpyAsync", 5*us, 0xc000, 0xd000, 4, 2, 0)
		tr.call(t, "cudaStreamSynchronize", 30*ms, 0)
	}
	c, steps := run(t, Config{}, tr.evs)
	a, ok := c.Boundary()
	if !ok || !strings.Contains(a.Reason, "loosely") {
		t.Fatalf("boundary %+v", a)
	}
	if len(steps) < 390 {
		t.Fatalf("got %d steps", len(steps))
	}
}

func TestNoStepsFromNoise(t *testing.T) {
	// Random-ish calls with no repeating structure never make steps.
	tr := newThread(100, 101, 0)
	names := []string{"cudaStreamSynchronize", "cudaMemcpyAsync", "cudaEventRecord"}
	x := uint64(1)
	for range 500 {
		x = x*6364136223846793005 + 1442695040888963407
		tr.launch(int(x>>60), 10*us)
		tr.call(t, names[(x>>33)%3], 100*us, 0, 0, 64, 1)
		tr.idle((x >> 40) % (3 * ms))
	}
	_, steps := run(t, Config{}, tr.evs)
	if len(steps) != 0 {
		t.Fatalf("noise gave %d steps", len(steps))
	}
}

func TestEnginesWarmUpBeforeTraining(t *testing.T) {
	// Inference engines run alone for 3 s; then the trainer starts, slow at
	// first. The engines' loop is the only loop at first and is reported as
	// such; once the trainer runs, the boundary moves to it and every step
	// of the trainer is reported.
	tr := newThread(100, 101, 3e9)
	tr.launch(200, 20*us) // first step: warm-up kernels, autotuning
	tr.call(t, "cudaStreamSynchronize", 300*ms, 0x55)
	for range 300 {
		pytorchStep(t, tr, 3*ms, 6*ms, 50, true)
	}
	c, steps := run(t, Config{}, merge(tr, engine(t, 102, tr.t), engine(t, 103, tr.t)))
	a, _ := c.Boundary()
	if a.TID != 101 {
		t.Fatalf("boundary on thread %d, want the trainer", a.TID)
	}
	var trainer []Step
	for _, s := range steps {
		if s.TID == 101 {
			trainer = append(trainer, s)
		}
	}
	// Once the trainer has shown a few steps, engine steps stop.
	for _, s := range steps {
		if s.TID != 101 && len(trainer) > 10 && s.EndNS > trainer[10].EndNS {
			t.Fatalf("step %d from thread %d after the trainer's 10th step", s.Index, s.TID)
		}
	}
	// 300 readings bound 299 whole steps.
	if len(trainer) != 299 {
		t.Fatalf("%d trainer steps, want all 299", len(trainer))
	}
	for i := 1; i < len(steps); i++ {
		if steps[i].Index != steps[i-1].Index+1 {
			t.Fatalf("step numbers jump from %d to %d", steps[i-1].Index, steps[i].Index)
		}
	}
	// The engines' launches show as other launches in the trainer's steps.
	if trainer[100].OtherLaunches == 0 {
		t.Error("engine launches not counted as other launches")
	}
}

func TestSetUpPatternIsNotSteps(t *testing.T) {
	// Model set-up: weights copied and synced one by one, no kernels; then
	// a pause, then training. Steps come from training only.
	tr := newThread(100, 101, 0)
	for range 400 {
		tr.call(t, "cudaMalloc", 10*us, 0x7ff0, 1<<20)
		tr.call(t, "cudaMemcpyAsync", 50*us, 0xa000, 0xb000, 1<<20, 1, 0)
		tr.call(t, "cudaStreamSynchronize", 10*ms, 0)
	}
	tr.idle(5e9)
	setupEnd := tr.t
	for range 200 {
		pytorchStep(t, tr, 2*ms, 5*ms, 40, false)
	}
	_, steps := run(t, Config{}, tr.evs)
	if len(steps) < 195 || len(steps) > 200 {
		t.Fatalf("%d steps, want ~199", len(steps))
	}
	// Every step ends in training; the first one starts where set-up's
	// last sync returned, as no boundary came between.
	if steps[0].EndNS < setupEnd {
		t.Fatalf("first step ends in set-up, at %d < %d", steps[0].EndNS, setupEnd)
	}
}

// sample makes launch counting sampled after `from`: on for `on` of every
// `period`, as probes.Session does once steps are found. Launch counts are
// dropped while off, and marker events are added.
func sample(evs []events.Event, from, period, on uint64) []events.Event {
	var out []events.Event
	next, state := from, true
	for _, e := range evs {
		for e.End >= next {
			state = !state
			m := events.Event{Kind: events.KindLaunchProbes, Start: next, End: next}
			if state {
				m.Out = 1
				next += on
			} else {
				next += period - on
			}
			out = append(out, m)
		}
		if !state {
			e.Launches, e.GraphLaunches, e.LaunchFirst, e.LaunchLast = 0, 0, 0, 0
		}
		out = append(out, e)
	}
	return out
}

func TestSampledLaunchCounts(t *testing.T) {
	// Two loss.item() syncs a step (a copy between them), then launch
	// counting goes to 1 s in 10: boundaries stay right while it is off.
	tr := newThread(100, 101, 0)
	for range 1500 {
		tr.idle(ms)
		tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 1<<20, 1, 0)
		tr.launch(30, 10*us)
		for range 2 {
			tr.call(t, "cudaMemcpyAsync", 5*us, 0xc000, 0xd000, 4, 2, 0)
			tr.call(t, "cudaStreamSynchronize", 5*ms, 0)
		}
	}
	evs := sample(tr.evs, 4e9, 10e9, 1e9)
	c, steps := run(t, Config{}, evs)
	a, _ := c.Boundary()
	if a.Calls != "stream sync" || len(steps) != 1499 {
		t.Fatalf("boundary %q with %d steps, want stream sync with 1499", a.Calls, len(steps))
	}
	counted := 0
	for _, s := range steps {
		if s.Syncs != 2 {
			t.Fatalf("step %d has %d syncs, want both", s.Index, s.Syncs)
		}
		if s.LaunchesCounted {
			counted++
			if s.Launches != 30 {
				t.Fatalf("counted step %d has %d launches", s.Index, s.Launches)
			}
		}
	}
	// Up to 4 s and then 1 s in 10 of a ~16.4 s run: about a third.
	if counted < 300 || counted > 700 {
		t.Fatalf("%d of %d steps with launch counts", counted, len(steps))
	}
}

func TestLearnedWhileLaunchesSampled(t *testing.T) {
	// A process whose launches were sampled before its steps were found
	// (launch counting switched for the whole job when another process
	// found its steps): off at first, on for 1 s in 10. Steps are learned
	// from the counted stretch only, and are cut in the off stretches
	// before and after it: an uncounted stretch makes the whole step look
	// like one cluster of calls.
	tr := newThread(100, 101, 0)
	for range 1200 {
		pytorchStep(t, tr, 4*ms, 20*ms, 170, true)
	}
	evs := sample(tr.evs, 0, 10e9, 1e9) // off at 0, on 9-10 s, off, on 19-20 s...
	if evs[0].Kind != events.KindLaunchProbes || evs[0].Out != 0 {
		t.Fatalf("first event %+v, want launch probes off", evs[0])
	}
	c, steps := run(t, Config{}, evs)
	if a, ok := c.Boundary(); !ok || a.Calls != "event elapsed-time read" {
		t.Fatalf("boundary %+v, want the elapsed-time read", a)
	}
	if len(steps) < 1190 {
		t.Fatalf("%d steps of 1200", len(steps))
	}
	for _, s := range steps {
		if s.StepTime > 0.05 {
			t.Fatalf("step %d lasts %.3fs: steps merged", s.Index, s.StepTime)
		}
	}
}

func TestDispatchWaitAndDataTime(t *testing.T) {
	// spec_pipeline's infer mode: each of 4 samples is waited for (queue
	// get), fetched and copied in; then the measured compute.
	tr := newThread(100, 101, 0)
	type truth struct{ wait, data uint64 }
	var want []truth
	for i := range 40 {
		wait := uint64(10+i%5) * ms
		start := tr.t
		var waited uint64
		for range 4 {
			tr.pywait(wait / 4)
			waited += wait / 4
			tr.idle(100 * us) // store.take
			tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 4<<20, 1, 0x55)
		}
		tr.launch(1, 5*us) // cat
		dataEnd := tr.t
		tr.timedCompute(t)
		want = append(want, truth{waited, dataEnd - start - waited})
	}
	c, steps := runPython(t, tr.evs)
	if len(steps) != 39 {
		t.Fatalf("%d steps", len(steps))
	}
	for i, s := range steps {
		w := want[i+1] // step 0 is the loop's second iteration
		if s.DispatchWait != seconds(w.wait) || s.WaitedOn != "queue.Queue.get" {
			t.Fatalf("step %d: dispatch wait %v on %q, want %v", i, s.DispatchWait, s.WaitedOn, seconds(w.wait))
		}
		// The step starts where the previous elapsed read returned, so the
		// data phase also holds the ~2 µs between it and the next wait.
		within(t, "data_time", s.DataTime, seconds(w.data), 0.01)
		within(t, "step_time", s.StepTime, s.WallTime-s.DispatchWait, 1e-9)
		if !s.DataMeasured {
			t.Fatal("data time not measured")
		}
	}
	sum := c.Summary()
	if len(sum.Waits) != 1 || sum.Waits[0].What != "queue.Queue.get" || sum.Waits[0].Count != 160 {
		t.Fatalf("wait totals %+v", sum.Waits)
	}
}

// TestLoggingIsLeadIn: a loop that logs each step it finished (a write)
// before fetching the next: the logging is lead-in, neither data nor step
// time; a write in the middle of the data phase changes nothing.
func TestLoggingIsLeadIn(t *testing.T) {
	tr := newThread(100, 101, 0)
	write := func() {
		tr.evs = append(tr.evs, events.Event{Kind: events.KindWrite, PID: 100, TID: 101, Start: tr.t, End: tr.t})
	}
	var want []uint64 // data time
	for range 40 {
		tr.idle(240 * us) // json.dumps of the last step
		write()
		tr.idle(10 * us)
		start := tr.t
		tr.idle(2 * ms) // the fetch, on the CPU
		tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 4<<20, 1, 0x55)
		write() // a debug print
		tr.idle(300 * us)
		tr.launch(1, 5*us)
		want = append(want, tr.t-start)
		tr.timedCompute(t)
	}
	_, steps := runPython(t, tr.evs)
	if len(steps) != 39 {
		t.Fatalf("%d steps", len(steps))
	}
	for i, s := range steps {
		within(t, "lead_in", s.LeadIn, 240e-6, 1e-9)
		within(t, "data_time", s.DataTime, seconds(want[i+1])+10e-6, 1e-9)
		within(t, "step_time", s.StepTime, s.WallTime-s.LeadIn, 1e-9)
	}
}

// TestLoggingGILTailIsLeadIn: a write lets the GIL go, and on a busy GIL
// the loop takes it back only later: that is still its logging. A GIL wait
// that does not follow a write (or a wait) closely is nobody's tail.
func TestLoggingGILTailIsLeadIn(t *testing.T) {
	tr := newThread(100, 101, 0)
	gil := func(d uint64) {
		tr.evs = append(tr.evs, events.Event{Kind: events.KindPyGIL, PID: 100, TID: 101, Start: tr.t, End: tr.t + d})
		tr.t += d
	}
	var leadIn, data []uint64
	for i := range 40 {
		tr.idle(240 * us)
		tr.evs = append(tr.evs, events.Event{Kind: events.KindWrite, PID: 100, TID: 101, Start: tr.t, End: tr.t})
		lead := 240 * us
		if tr.idle(8 * us); i%2 == 0 {
			gil(900 * us)
			lead += 8*us + 900*us
		}
		tr.idle(10 * us)
		start := tr.t
		tr.idle(2 * ms)
		tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 4<<20, 1, 0x55)
		tr.idle(300 * us)
		gil(200 * us) // long after any write: data time
		tr.launch(1, 5*us)
		leadIn, data = append(leadIn, lead), append(data, tr.t-start)
		tr.timedCompute(t)
	}
	_, steps := runPython(t, tr.evs)
	if len(steps) != 39 {
		t.Fatalf("%d steps", len(steps))
	}
	for i, s := range steps {
		// the step begins once the GIL is back, else at the write
		wantData := seconds(data[i+1]) + 10e-6
		if leadIn[i+1] == 240*us {
			wantData += 8e-6
		}
		within(t, "lead_in", s.LeadIn, seconds(leadIn[i+1]), 1e-9)
		within(t, "data_time", s.DataTime, wantData, 1e-9)
	}
}

func TestOnlyWaitsNoSteps(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 300 {
		tr.pywait(10 * ms)
		tr.idle(ms)
	}
	_, steps := run(t, Config{}, tr.evs)
	if len(steps) != 0 {
		t.Fatalf("%d steps from waits alone", len(steps))
	}
}

func TestGILTailJoinsTheWait(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 30 {
		tr.pywait(5 * ms)
		// Taking the GIL back: 5 µs later, 300 µs long; then a ctypes call
		// and a second GIL wait 200 µs after, which is not the wait's tail.
		tr.evs = append(tr.evs, events.Event{Kind: events.KindPyGIL, PID: 100, TID: 101, Start: tr.t + 5*us, End: tr.t + 305*us})
		tr.idle(505 * us)
		tr.evs = append(tr.evs, events.Event{Kind: events.KindPyGIL, PID: 100, TID: 101, Start: tr.t, End: tr.t + 50*us})
		tr.idle(50 * us)
		tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 1<<20, 1, 0)
		tr.launch(30, 10*us)
		tr.call(t, "cudaStreamSynchronize", ms, 0)
	}
	_, steps := runPython(t, tr.evs)
	if len(steps) != 29 {
		t.Fatalf("%d steps", len(steps))
	}
	for _, s := range steps {
		within(t, "dispatch_wait", s.DispatchWait, 0.005305, 1e-6)
		within(t, "gil_wait", s.GILWait, 0.000305, 1e-6)
	}
}

// TestTimedGetHoldsItsWait: with the queue's get timed as a whole
// (--probe dispatch=py:queue:Queue.get), the semaphore wait inside it is
// part of it, counted once; a get that did not block is dispatch wait too.
func TestTimedGetHoldsItsWait(t *testing.T) {
	const get = 0x8000
	tr := newThread(100, 101, 0)
	for i := range 40 {
		start := tr.t
		tr.idle(30 * us) // get's Python before it blocks
		if i%2 == 0 {
			tr.pywait(4 * ms)
		}
		tr.idle(40 * us) // and after: the item out of the deque
		tr.evs = append(tr.evs, events.Event{Kind: events.KindCall, API: get, PID: 100, TID: 101, Start: start, End: tr.t})
		tr.idle(300 * us)
		tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 1<<20, 1, 0)
		tr.launch(30, 10*us)
		tr.call(t, "cudaStreamSynchronize", ms, 0)
	}
	cfg := Config{User: map[uint16]UserProbe{get: {Role: events.RoleDispatch, Name: "queue:Queue.get"}}}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.ObserveWaits()
	var steps []Step
	for i := range tr.evs {
		steps = append(steps, c.Add(&tr.evs[i])...)
	}
	steps = append(steps, c.Finish()...)
	if len(steps) != 39 {
		t.Fatalf("%d steps", len(steps))
	}
	for _, s := range steps {
		want := 70e-6
		if s.Index%2 == 1 { // the step after a blocking get
			want += 4e-3
		}
		within(t, "dispatch_wait", s.DispatchWait, want, 1e-9)
	}
}

func TestUserProbeRoles(t *testing.T) {
	const fetch, get, generate, step = 0x8000, 0x8001, 0x8002, 0x8003
	user := func(th *thread, id uint16, dur uint64) {
		th.evs = append(th.evs, events.Event{Kind: events.KindCall, API: id, PID: th.pid, TID: th.tid, Start: th.t, End: th.t + dur})
		th.t += dur
	}
	tr := newThread(100, 101, 0)
	eng := newThread(100, 102, 0)
	for range 60 {
		user(tr, get, 3*ms)   // dispatch: a Ray get
		user(tr, fetch, 2*ms) // fetch: a Mooncake get
		tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 1<<20, 1, 0)
		tr.launch(30, 10*us)
		tr.call(t, "cudaStreamSynchronize", 2*ms, 0)
		user(tr, step, 10*us) // the user's step function returns
	}
	for eng.t < tr.t {
		user(eng, generate, 4*ms)
		eng.idle(ms)
	}
	cfg := Config{BatchSize: 8, User: map[uint16]UserProbe{
		fetch: {Role: events.RoleFetch, Name: "RealClient::batch_get_into"}, get: {Role: events.RoleDispatch, Name: "CoreWorker::Get"},
		generate: {Role: events.RoleInfer, Name: "Engine::generate"}, step: {Role: events.RoleStep, Name: "train_step"}}}
	c, steps := run(t, cfg, merge(tr, eng))
	a, _ := c.Boundary()
	if a.Calls != "user probe" || len(steps) != 59 {
		t.Fatalf("boundary %q, %d steps", a.Calls, len(steps))
	}
	for _, s := range steps[1:] {
		within(t, "dispatch_wait", s.DispatchWait, 0.003, 1e-9)
		within(t, "fetch_time", s.FetchTime, 0.002, 1e-9)
		within(t, "infer_batch_time", s.InferBatchTime, 0.004, 1e-9)
		if s.InferCalls == 0 {
			t.Fatalf("step %d: no infer calls; %+v", s.Index, s)
		}
		within(t, "infer_capacity", s.InferCapacity, 250, 1e-9) // one engine, 4 ms a call
		within(t, "train_capacity", s.TrainCapacity, 8/s.StepTime, 1e-9)
		if s.WaitedOn != "CoreWorker::Get" {
			t.Fatalf("waited on %q", s.WaitedOn)
		}
	}
	if _, err := New(Config{Boundary: "cudaStreamSynchronize", User: cfg.User}); err == nil {
		t.Error("two step boundaries accepted")
	}
}

func TestLearnedAcrossShortStretches(t *testing.T) {
	// Launches counted 0.5 s of every 2 s from the start (a launch-heavy
	// process's learning phases), in steps of ~150 ms: no stretch holds
	// the steps the boundary needs, several together do. No interval
	// spans the uncounted time between them.
	tr := newThread(100, 101, 0)
	for range 200 {
		pytorchStep(t, tr, 30*ms, 120*ms, 170, true)
	}
	evs := sample(tr.evs, 500e6, 2e9, 500e6)
	c, steps := run(t, Config{}, evs)
	a, ok := c.Boundary()
	if !ok || a.Calls != "event elapsed-time read" {
		t.Fatalf("boundary %+v, want the elapsed-time read", a)
	}
	if len(steps) < 198 {
		t.Fatalf("%d steps of 200", len(steps))
	}
	full, _ := run(t, Config{}, tr.evs)
	fa, _ := full.Boundary()
	apart := regexp.MustCompile(`~\d+ kernel launches apart`)
	if got, want := apart.FindString(a.Reason), apart.FindString(fa.Reason); got == "" || got != want {
		t.Errorf("boundary %q, with every launch counted %q: the work between its calls differs", a.Reason, fa.Reason)
	}
}
