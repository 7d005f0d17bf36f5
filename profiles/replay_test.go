package profiles

import (
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/tracecfg"
)

// The traces recorded on the GPU hosts (testdata/traces) replayed through
// the control loop, a Builder taking its steps and the events: their
// Python waits and GIL tails as recorded, and, as the traces hold no stack
// samples yet, a call stack for every sync and copy and a launch stack
// for every call that carried counted launches, synthesized from the calls.

// output passes the loop's steps to the builder and keeps them.
type output struct {
	b     *Builder
	steps []correlate.Step
}

func (o *output) Step(s correlate.Step) { o.b.Step(s); o.steps = append(o.steps, s) }
func (o *output) Note(string)           {}
func (o *output) Processes(int)         {}

// loopConfig configures the loop as gpuprof replay does from the header.
func loopConfig(t *testing.T, h events.TraceHeader) control.Config {
	t.Helper()
	cfg := control.DefaultConfig()
	cfg.Log = slog.New(slog.DiscardHandler)
	var err error
	if cfg.Correlate, err = tracecfg.Correlate(h); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// synthesized are the stack samples a call stands for.
func synthesized(e *events.Event) []events.Event {
	if e.Kind != events.KindCall || e.API >= cudaapi.UserBase {
		return nil
	}
	py := []events.PyFrame{{Func: "train", File: "/job/train.py"}}
	var out []events.Event
	if n := e.Launches + e.GraphLaunches; n > 0 {
		out = append(out, events.Event{Kind: events.KindLaunchStack, PID: e.PID, TID: e.TID, End: e.LaunchLast,
			Args: [5]uint64{uint64(e.TID), uint64(n)}, Frames: py, Native: []events.NativeFrame{{Func: "cuLaunchKernel", Module: "libcuda.so.1"}}})
	}
	if c := e.Desc().Class; c == cudaapi.ClassSync || c == cudaapi.ClassCopy {
		cs := *e
		cs.Kind, cs.Frames, cs.Native = events.KindCallStack, py, []events.NativeFrame{{Func: e.Desc().Name, Module: "libcudart.so.12"}}
		out = append(out, cs)
	}
	return out
}

type replayed struct {
	profiles []Profile
	steps    []correlate.Step
	launches map[uint32][]uint64 // by process, the launch stacks' times
	stats    Stats
	// wholeGets: user probes time gets (or dispatch calls) as a whole.
	wholeGets bool
}

func replayTrace(t *testing.T, path string) replayed {
	t.Helper()
	h, evs, unknown, err := events.ReadTrace(path)
	if err != nil || unknown != 0 {
		t.Fatalf("%s: %v (%d unknown)", path, err, unknown)
	}
	b := New(Config{KernelName: func(pid uint32, h uint64) (string, bool) { return fmt.Sprintf("_Z8thread%dv", h), true }})
	out := &output{b: b}
	loop, err := control.New(loopConfig(t, h), nil, out)
	if err != nil {
		t.Fatal(err)
	}
	r := replayed{launches: map[uint32][]uint64{}}
	for _, spec := range h.UserProbes {
		r.wholeGets = r.wholeGets || strings.HasPrefix(spec, "get=") || strings.HasPrefix(spec, "dispatch=")
	}
	for i := range evs {
		e := &evs[i]
		for _, st := range synthesized(e) {
			if st.Kind == events.KindLaunchStack {
				r.launches[st.PID] = append(r.launches[st.PID], st.End)
			}
			b.Add(&st)
		}
		b.Add(e) // before the loop, which may cut a step on it
		loop.Add(e)
		if i%4096 == 0 {
			r.profiles = append(r.profiles, b.Flush(e.End, false)...)
		}
	}
	loop.Finish()
	r.profiles = append(r.profiles, b.Flush(evs[len(evs)-1].End, true)...)
	r.steps, r.stats = out.steps, b.Stats()
	for _, ts := range r.launches {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	}
	return r
}

// TestReplayedProfiles: over every committed trace, the GPU profile's time
// is the GPU time of the steps in which launches were sampled, to the
// nanosecond. The wait profile's time in each phase of each step is
// within what the step spent in it (the step thread waits once at a
// time), its CUDA syncs in the sync phase are the step's sync phases
// exactly, and its dispatch waits are the steps' dispatch wait where
// Python waits were probed all through the step and no whole get times
// it. A whole get (--probe get=, attach's preset for multiprocessing
// queues) is dispatch wait all through, its own work too (reading and
// unpickling the batch): the cpu profile has that part, in the
// dispatch_wait phase.
func TestReplayedProfiles(t *testing.T) {
	paths, _ := filepath.Glob("../testdata/traces/*/*.trace.jsonl.gz")
	if len(paths) == 0 {
		t.Fatal("no traces under testdata/traces")
	}
	for _, path := range paths {
		name := filepath.Base(filepath.Dir(path)) + "/" + strings.TrimSuffix(filepath.Base(path), ".trace.jsonl.gz")
		t.Run(name, func(t *testing.T) {
			r := replayTrace(t, path)
			if len(r.steps) == 0 {
				t.Fatal("no steps")
			}
			var gotGPU int64
			type at struct {
				pid   uint32
				span  string
				phase string
			}
			wait, syncs := map[at]int64{}, map[at]int64{}
			for _, p := range r.profiles {
				switch p.Type {
				case TypeGPU:
					gotGPU += total(p.Prof, 1)
				case TypeWait:
					for _, s := range p.Prof.Sample {
						k := at{p.PID, label(LabelSpanID)(s), label(LabelPhase)(s)}
						wait[k] += s.Value[0]
						if label(LabelWaitKind)(s) == kindCUDASync {
							syncs[k] += s.Value[0]
						}
					}
				}
			}
			var wantGPU uint64 // every step's with a GPU time: covered, carried or left out
			for _, s := range r.steps {
				if s.ComputeSource != correlate.ComputeNone {
					wantGPU += uint64(math.Round(s.ComputeTime * 1e9))
				}
			}
			var dispatch, dispatchWant int64 // in the steps whose dispatch wait the waits time
			for _, s := range r.steps {
				for _, p := range phases[:4] {
					k := at{s.PID, SpanID(s.Index), string(p)}
					if got, want := wait[k], phaseNS(&s, p); got > want {
						t.Fatalf("step %d of PID %d: %d ns of waits in %s, more than its %d", s.Index, s.PID, got, p, want)
					}
				}
				k := at{s.PID, SpanID(s.Index), string(correlate.PhaseSync)}
				if got, want := syncs[k], phaseNS(&s, correlate.PhaseSync); got != want {
					t.Fatalf("step %d of PID %d: CUDA syncs in its sync phase %d ns, its sync phases %d", s.Index, s.PID, got, want)
				}
				if s.WaitKindsCounted && !r.wholeGets {
					dispatch += wait[at{s.PID, SpanID(s.Index), string(correlate.PhaseDispatchWait)}]
					dispatchWant += phaseNS(&s, correlate.PhaseDispatchWait)
				}
			}
			st := r.stats
			if gotGPU != int64(st.GPUCoveredNS) || st.GPUCoveredNS+st.GPUNoStacksNS != wantGPU ||
				st.StepsCovered+st.StepsCarried+st.StepsNoStacks+st.StepsNoGPUTime != len(r.steps) {
				t.Errorf("gpu_time %d ns, covered %d ns in %d steps (stats %+v); want covered and not %d ns in %d steps",
					gotGPU, st.GPUCoveredNS, st.StepsCovered, st, wantGPU, len(r.steps))
			}
			// The gaps between a polling loop's sleeps are the steps'
			// dispatch wait too, and no wait event's.
			if float64(dispatch) < 0.95*float64(dispatchWant) {
				t.Errorf("dispatch waits %d ns, under 95%% of the steps' %d", dispatch, dispatchWant)
			}
			t.Logf("%d steps, %d with launch stacks and %d carried (%.3f of %.3f s of GPU time), %d profiles; dispatch waits %.3f s of %.3f where they time it (whole gets %v)",
				len(r.steps), st.StepsCovered, st.StepsCarried, float64(st.GPUCoveredNS)/1e9, float64(wantGPU)/1e9, len(r.profiles), float64(dispatch)/1e9, float64(dispatchWant)/1e9, r.wholeGets)
		})
	}
}

// phaseNS is the step's time in phase p.
func phaseNS(s *correlate.Step, p correlate.Phase) int64 {
	var ns int64
	for _, sp := range s.Phases {
		if sp.Phase == p {
			ns += int64(sp.EndNS - sp.StartNS)
		}
	}
	return ns
}

var phases = []correlate.Phase{correlate.PhaseDispatchWait, correlate.PhaseData, correlate.PhaseSync, correlate.PhaseCompute, correlate.PhaseOther}
