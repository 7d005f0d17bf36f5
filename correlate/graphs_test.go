package correlate

import (
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

// graphLaunch replays exec, as the launch probe reports it: an event of
// its own carrying its count and whatever launches came before it.
func (th *thread) graphLaunch(t testing.TB, exec uint64) {
	e := th.call(t, "cuGraphLaunch", 0, exec, 0x55)
	e.GraphLaunches = 1
}

// capture records n launches into graph and instantiates it as exec, as
// torch.cuda.graph does: begin, the step's kernels, end, instantiate.
func (th *thread) capture(t testing.TB, n int, graph, exec uint64) {
	th.call(t, "cuStreamBeginCapture_v2", 2*us, 0x55, 0)
	th.launch(n, 8*us)
	th.call(t, "cuStreamEndCapture", 5*us, 0x55, 0x7f00).Out = graph
	th.call(t, "cuGraphInstantiateWithFlags", 300*us, 0x7f08, graph, 0).Out = exec
}

// graphStep is a step of a loop replaying CUDA graphs: copy in, the
// step's compute (eager launches, or graph replays), loss.item().
func graphStep(t testing.TB, th *thread, compute func()) {
	th.idle(2 * ms)
	th.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 1<<20, 1, 0x55)
	compute()
	th.call(t, "cudaMemcpyAsync", 10*us, 0xc000, 0xd000, 4, 2, 0x55)
	th.call(t, "cudaStreamSynchronize", 4*ms, 0x55)
}

// graphLoop is torch.cuda.graphs' loop: warm-up steps eager, one step
// capturing its kernels and replaying them, then replays.
func graphLoop(t testing.TB, th *thread, warmup, replays int) {
	for range warmup {
		graphStep(t, th, func() { th.launch(40, 8*us) })
	}
	graphStep(t, th, func() {
		th.capture(t, 40, 0x9000, 0x9100)
		th.graphLaunch(t, 0x9100)
	})
	for range replays {
		graphStep(t, th, func() { th.graphLaunch(t, 0x9100) })
	}
}

func TestGraphReplaysCountTheirKernels(t *testing.T) {
	tr := newThread(100, 101, 0)
	graphLoop(t, tr, 5, 200)
	c, steps := run(t, Config{}, tr.evs)
	if len(steps) < 200 {
		t.Fatalf("%d steps, want ~205", len(steps))
	}
	captured := 0
	for _, s := range steps {
		if !s.LaunchesCounted || !s.GraphKernelsKnown {
			t.Fatalf("step %d: launches counted %v, graph kernels known %v", s.Index, s.LaunchesCounted, s.GraphKernelsKnown)
		}
		switch {
		case s.CapturedLaunches > 0:
			// The capture step: its 40 launches made the graph, and ran
			// through its first replay.
			captured++
			if s.CapturedLaunches != 40 || s.Launches != 0 || s.GraphLaunches != 1 || s.GraphKernels != 40 {
				t.Errorf("capture step %+v", s)
			}
		case s.GraphLaunches > 0:
			if s.Launches != 0 || s.GraphLaunches != 1 || s.GraphKernels != 40 {
				t.Errorf("replay step %d: launches %d, graph launches %d, graph kernels %d", s.Index, s.Launches, s.GraphLaunches, s.GraphKernels)
			}
		default:
			if s.Launches != 40 || s.GraphKernels != 0 {
				t.Errorf("eager step %d: launches %d, graph kernels %d", s.Index, s.Launches, s.GraphKernels)
			}
		}
	}
	if captured != 1 {
		t.Errorf("%d capture steps, want 1", captured)
	}
	sum := c.Summary()
	if sum.GraphKernels.P50 != 40 || sum.GraphUnknown != 0 || sum.CapturedLaunches != 40 || sum.GraphLaunches.N != sum.GraphKernels.N {
		t.Errorf("summary: graph kernels %+v, unknown %d, captured %d", sum.GraphKernels, sum.GraphUnknown, sum.CapturedLaunches)
	}
}

// launchProbes is a launch-probe marker at the thread's clock.
func (th *thread) launchProbes(on bool) {
	m := events.Event{Kind: events.KindLaunchProbes, PID: th.pid, Start: th.t, End: th.t}
	if on {
		m.Out = 1
	}
	th.evs = append(th.evs, m)
}

func TestGraphCapturedUncountedIsUnknown(t *testing.T) {
	for _, c := range []struct {
		name string
		// around the capture: launch counting as it begins, and whether
		// it goes off and on again inside it
		before, gap bool
	}{
		{"launches off", false, false},
		{"launches off inside", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := newThread(100, 101, 0)
			for range 5 {
				graphStep(t, tr, func() { tr.launch(40, 8*us) })
			}
			graphStep(t, tr, func() {
				if !c.before {
					tr.launchProbes(false)
				}
				tr.call(t, "cuStreamBeginCapture_v2", 2*us, 0x55, 0)
				if c.gap {
					tr.launch(20, 8*us)
					tr.call(t, "cuEventRecord", 0, 0xe1, 0x55) // launch counts ride on a call
					tr.launchProbes(false)
					tr.idle(100 * us) // 20 launches not seen
					tr.launchProbes(true)
					tr.launch(10, 8*us)
				}
				tr.call(t, "cuStreamEndCapture", 5*us, 0x55, 0x7f00).Out = 0x9000
				tr.call(t, "cuGraphInstantiateWithFlags", 300*us, 0x7f08, 0x9000, 0).Out = 0x9100
				if !c.before {
					tr.launchProbes(true)
				}
				tr.graphLaunch(t, 0x9100)
			})
			for range 200 {
				graphStep(t, tr, func() { tr.graphLaunch(t, 0x9100) })
			}
			cr, steps := run(t, Config{}, tr.evs)
			replays := 0
			for _, s := range steps {
				if s.GraphLaunches > 0 && s.LaunchesCounted {
					replays++
					if s.GraphKernelsKnown {
						t.Fatalf("step %d: graph kernels %d known, though its graph's capture was not counted all through", s.Index, s.GraphKernels)
					}
				}
			}
			if replays < 190 {
				t.Fatalf("%d counted replay steps, want ~200", replays)
			}
			if sum := cr.Summary(); sum.GraphUnknown != replays || sum.GraphKernels.N != 0 {
				t.Errorf("summary: %d unknown, %d known, want %d unknown", sum.GraphUnknown, sum.GraphKernels.N, replays)
			}
		})
	}
}

func TestGraphExecsMapToTheirGraphs(t *testing.T) {
	// Two graphs captured on one thread (forward and backward, say), each
	// instantiated; a step replays both, then one made before attach.
	tr := newThread(100, 101, 0)
	graphStep(t, tr, func() {
		tr.capture(t, 30, 0x9000, 0x9100)
		tr.capture(t, 12, 0x9001, 0x9101)
		// Instantiating a graph of unknown kernels (captured before
		// attach) gives an unknown exec.
		tr.call(t, "cuGraphInstantiateWithParams", 300*us, 0x7f08, 0x9002, 0).Out = 0x9102
	})
	for i := range 300 {
		graphStep(t, tr, func() {
			tr.graphLaunch(t, 0x9100)
			tr.graphLaunch(t, 0x9101)
			if i >= 200 {
				tr.graphLaunch(t, 0x9102)
			}
		})
	}
	_, steps := run(t, Config{}, tr.evs)
	known, unknown := 0, 0
	for _, s := range steps {
		switch {
		case s.GraphLaunches == 2:
			known++
			if !s.GraphKernelsKnown || s.GraphKernels != 42 {
				t.Errorf("step %d: graph kernels %d (known %v), want 42", s.Index, s.GraphKernels, s.GraphKernelsKnown)
			}
		case s.GraphLaunches == 3:
			unknown++
			if s.GraphKernelsKnown {
				t.Errorf("step %d: graph kernels known though one exec's graph was not captured while attached", s.Index)
			}
		}
	}
	if known < 150 || unknown < 90 {
		t.Errorf("%d steps of two known graphs, %d with an unknown one", known, unknown)
	}
}

func TestCaptureOnAnotherThreadLeavesLaunches(t *testing.T) {
	// A capture on one thread takes no launch of another.
	tr, other := newThread(100, 101, 0), newThread(100, 102, 0)
	for i := range 200 {
		graphStep(t, tr, func() { tr.launch(40, 8*us) })
		if i == 100 {
			other.t = tr.t
			other.capture(t, 5, 0x9000, 0x9100)
		}
	}
	_, steps := run(t, Config{}, merge(tr, other))
	for _, s := range steps {
		if s.Launches != 40 || s.CapturedLaunches != 0 {
			t.Fatalf("step %d: launches %d, captured %d", s.Index, s.Launches, s.CapturedLaunches)
		}
	}
}
