package correlate

import (
	"strings"
	"testing"
)

func d(p50 float64) Dist { return Dist{N: 100, P50: p50, Mean: p50, P10: p50, P90: p50} }

// The seed's rules on the medians of the four spec_pipeline modes as the
// H200 truth files give them (README's table), and on capacities.
func TestDiagnose(t *testing.T) {
	boundary := &Boundary{TID: 7}
	for _, tc := range []struct {
		name string
		s    Summary
		want string
	}{
		{"infer mode", Summary{Steps: 300, Boundary: boundary, WallTime: d(0.0535), DispatchWait: d(0.0479), DataTime: d(0.0009), ComputeTime: d(0.0044),
			Waits: []WaitTotal{{TID: 7, Kind: WaitDispatch, What: "queue.Queue.get"}}}, "inference"},
		{"data mode", Summary{Steps: 700, WallTime: d(0.0171), DispatchWait: d(0.0001), DataTime: d(0.0141), ComputeTime: d(0.0029)}, "training: data loading"},
		{"compute mode", Summary{Steps: 700, WallTime: d(0.0181), DispatchWait: d(0), DataTime: d(0.0008), ComputeTime: d(0.0154)}, "training: GPU compute"},
		{"balanced mode", Summary{Steps: 700, WallTime: d(0.0136), DispatchWait: d(0.0027), DataTime: d(0.0060), ComputeTime: d(0.0050)}, "balanced"},
		{"capacities: I < T", Summary{Steps: 10, WallTime: d(0.02), DispatchWait: d(0.001), InferCapacity: d(50), TrainCapacity: d(600),
			DataTime: d(0.001), ComputeTime: d(0.003)}, "inference"},
		{"capacities: I ≈ T", Summary{Steps: 10, WallTime: d(0.02), DispatchWait: d(0.001), InferCapacity: d(280), TrainCapacity: d(300)}, "balanced (I ≈ T)"},
		{"capacities: I > T", Summary{Steps: 10, WallTime: d(0.02), DispatchWait: d(0), InferCapacity: d(2000), TrainCapacity: d(240),
			DataTime: d(0.001), ComputeTime: d(0.015)}, "training: GPU compute"},
		{"capacities: I < T, never waited", Summary{Steps: 10, WallTime: d(0.02), DispatchWait: d(0), InferCapacity: d(50), TrainCapacity: d(600),
			DataTime: d(0.001), ComputeTime: d(0.015)}, "training: GPU compute"},
		{"no python waits", Summary{Steps: 10, WallTime: d(0.02), DataTime: d(0.001), ComputeTime: d(0.015)}, "training: GPU compute"},
		{"no steps", Summary{}, "unknown"},
	} {
		v := Diagnose(tc.s)
		if !strings.HasPrefix(v.Bottleneck, tc.want) {
			t.Errorf("%s: %q, want %q (evidence %q)", tc.name, v.Bottleneck, tc.want, v.Evidence)
		}
		if len(v.Evidence) == 0 || len(v.Next) == 0 {
			t.Errorf("%s: no evidence or next step: %+v", tc.name, v)
		}
	}
	v := Diagnose(Summary{Steps: 300, Boundary: boundary, WallTime: d(0.0535), DispatchWait: d(0.0479),
		Waits: []WaitTotal{{TID: 7, Kind: WaitDispatch, What: "queue.Queue.get"}}})
	if !strings.Contains(v.Evidence[0], "90% of a step") || !strings.Contains(v.Evidence[0], "queue.Queue.get") {
		t.Errorf("evidence %q", v.Evidence)
	}
}

// TestDispatchOnIsTheLoopsWait: the verdict names what the steps waited
// in, not the thread's longest wait overall (a sleep before training).
func TestDispatchOnIsTheLoopsWait(t *testing.T) {
	c, _ := New(Config{})
	c.sum.waits[waitKey{pid: 1, tid: 2, what: "time.sleep in train.py:<module>"}] =
		&WaitTotal{PID: 1, TID: 2, Kind: WaitDispatch, What: "time.sleep in train.py:<module>", Count: 1, Seconds: 4}
	for range 10 {
		c.sum.addStep(&Step{TID: 2, WallTime: 0.01, StepTime: 0.006, DispatchWait: 0.004, WaitedOn: "queue.Queue.get", WaitsObserved: true})
	}
	s := c.Summary()
	s.Boundary = &Boundary{PID: 1, TID: 2}
	v := Diagnose(s)
	if got := strings.Join(v.Evidence, "; "); !strings.Contains(got, "waiting in queue.Queue.get") {
		t.Errorf("evidence %q: want the steps' queue.Queue.get", got)
	}
}

// TestSharedTensorsHint: a loop taking tensors from a multiprocessing
// queue is told that rebuilding them counts as data time, and what times
// whole gets; not once a probe (attach's own, or the user's) times them.
func TestSharedTensorsHint(t *testing.T) {
	for _, tc := range []struct {
		on   string
		hint bool
	}{
		{sharedTensorWait, true},
		{"multiprocessing.Queue.get", true},
		{"multiprocessing.queues:Queue.get", false}, // attach --whole-gets, or --probe dispatch=py:...
	} {
		c, _ := New(Config{})
		c.sum.waits[waitKey{pid: 1, tid: 2, what: sharedTensorWait}] =
			&WaitTotal{PID: 1, TID: 2, Kind: WaitDispatch, What: sharedTensorWait, Count: 10, Seconds: 0.02}
		for range 10 {
			c.sum.addStep(&Step{TID: 2, WallTime: 0.03, StepTime: 0.02, DispatchWait: 0.01, WaitedOn: tc.on, WaitsObserved: true})
		}
		s := c.Summary()
		s.Boundary = &Boundary{PID: 1, TID: 2}
		got := strings.Contains(strings.Join(Diagnose(s).Next, "; "), "attach times whole gets (--whole-gets")
		if got != tc.hint {
			t.Errorf("waiting in %q: hint %v, want %v", tc.on, got, tc.hint)
		}
	}
}

// TestStockedPoolIsTrainingBound: a pool that never runs dry while
// training does not wait is training-bound, even when the capacity
// estimates come out close.
func TestStockedPoolIsTrainingBound(t *testing.T) {
	s := Summary{Steps: 100, WallTime: d(0.0144), StepTime: d(0.0143), DispatchWait: d(0), DataTime: d(0.0122),
		ComputeTime: d(0.00103), InferCapacity: d(390), TrainCapacity: d(344), Pool: d(256), PoolKind: "queue.Queue"}
	if v := Diagnose(s); v.Bottleneck != "training: data loading / transfer" {
		t.Errorf("bottleneck %q, want training: data loading", v.Bottleneck)
	}
	// Gets that take 17% of a step from a pool that holds a step's samples
	// at 90% of step ends: their time is taking the samples, not waiting
	// for inference (a multiprocessing queue kept full, on a loaded host).
	full := Summary{Steps: 100, WallTime: d(0.0196), StepTime: d(0.0163), DispatchWait: d(0.0033), DataTime: d(0.0151),
		ComputeTime: d(0.00101), Pool: d(64), PoolKind: "multiprocessing.Queue", Samples: d(4)}
	if v := Diagnose(full); v.Bottleneck != "training: data loading / transfer" || !strings.Contains(strings.Join(v.Evidence, "\n"), "gets' own time") ||
		!strings.Contains(strings.Join(v.Next, "\n"), "costs 17% of a step") {
		t.Errorf("full pool, long gets: bottleneck %q (evidence %q, next %q), want training: data loading, the gets' own time and their cost",
			v.Bottleneck, v.Evidence, v.Next)
	}
	// The same gets from a pool that holds less than a step's samples at
	// some step ends: the step's later gets may wait for the engines.
	full.Pool = Dist{N: 100, P10: 2, P50: 5, P90: 9}
	if v := Diagnose(full); !strings.HasPrefix(v.Bottleneck, "balanced") {
		t.Errorf("a pool short of a step's samples, long gets: bottleneck %q, want balanced", v.Bottleneck)
	}
	// The same capacities with a pool that runs dry, training never
	// waiting: still training-bound (issue 25: "balanced (I ≈ T)" there
	// contradicted the dispatch wait); with training waiting a tenth of
	// its steps, I ≈ T.
	s.Pool = Dist{N: 100, P10: 0, P50: 1, P90: 3}
	if v := Diagnose(s); v.Bottleneck != "training: data loading / transfer" || !strings.Contains(strings.Join(v.Evidence, "\n"), "never waited") {
		t.Errorf("bottleneck %q (evidence %q) with a pool that runs dry and no wait, want training: data loading, never waited", v.Bottleneck, v.Evidence)
	}
	s.DispatchWait = d(0.00144)
	if v := Diagnose(s); v.Bottleneck != "balanced (I ≈ T)" {
		t.Errorf("bottleneck %q with a pool that runs dry and waits, want balanced (I ≈ T)", v.Bottleneck)
	}
}
