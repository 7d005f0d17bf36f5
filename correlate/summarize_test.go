package correlate

import (
	"reflect"
	"testing"
)

// TestSummarizeStepsIsTheRunsSummary: over the steps a correlator cut,
// SummarizeSteps gives what its Summary does from them, and so the same
// verdict.
func TestSummarizeStepsIsTheRunsSummary(t *testing.T) {
	tr := newThread(100, 101, 0)
	for range 40 {
		pytorchStep(t, tr, 4*ms, 6*ms, 50, true)
	}
	c, steps := run(t, Config{}, merge(tr, engine(t, 102, tr.t), engine(t, 103, tr.t)))
	run, got := c.Summary(), SummarizeSteps(steps)
	if got.Steps != len(steps) || got.Steps != run.Steps {
		t.Fatalf("steps: %d, want %d (the run's %d)", got.Steps, len(steps), run.Steps)
	}
	for name, pair := range map[string][2]Dist{
		"wall": {got.WallTime, run.WallTime}, "step": {got.StepTime, run.StepTime},
		"dispatch": {got.DispatchWait, run.DispatchWait}, "data": {got.DataTime, run.DataTime},
		"compute": {got.ComputeTime, run.ComputeTime}, "sync": {got.SyncTime, run.SyncTime},
		"launches": {got.Launches, run.Launches}, "h2d": {got.H2DBytes, run.H2DBytes}, "d2h": {got.D2HBytes, run.D2HBytes},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s: %+v, the run's %+v", name, pair[0], pair[1])
		}
	}
	if got.ComputeSource != run.ComputeSource || got.ComputeSource != ComputeEvents {
		t.Errorf("compute source %q, the run's %q", got.ComputeSource, run.ComputeSource)
	}
	if got.FirstNS != steps[0].StartNS || got.LastNS != steps[len(steps)-1].EndNS {
		t.Errorf("span %d..%d, the steps' %d..%d", got.FirstNS, got.LastNS, steps[0].StartNS, steps[len(steps)-1].EndNS)
	}
	if got.Boundary != nil || got.Threads != nil || got.Events != 0 {
		t.Errorf("what only events say is set: boundary %v, %d threads, %d events", got.Boundary, len(got.Threads), got.Events)
	}
	if v, w := Diagnose(got), Diagnose(run); v.Bottleneck != w.Bottleneck || !reflect.DeepEqual(v.Evidence, w.Evidence) {
		t.Errorf("verdict %+v, the run's %+v", v, w)
	}
}

// TestSummarizeStepsHandMade: medians of made-up steps, and the verdicts
// they give.
func TestSummarizeStepsHandMade(t *testing.T) {
	const wall = 0.010
	step := func(i int, dispatch, data, compute float64) Step {
		return Step{Index: i, StartNS: uint64(i) * 10 * ms, EndNS: uint64(i+1) * 10 * ms, WallTime: wall, StepTime: wall - dispatch,
			WaitsObserved: true, DispatchWait: dispatch, DataMeasured: true, DataTime: data,
			ComputeSource: ComputeEvents, ComputeTime: compute, SyncTime: compute / 2,
			LaunchesCounted: i%2 == 0, Launches: 40, PoolMeasured: true, Pool: i, PoolKind: "queue.Queue"}
	}
	var compute []Step
	for i := range 5 {
		compute = append(compute, step(i, 0, 0.001, 0.006+float64(i)*0.0001))
	}
	s := SummarizeSteps(compute)
	if s.Steps != 5 || s.WallTime.P50 != wall || s.DataTime.P50 != 0.001 || s.ComputeTime.P50 != 0.0062 || s.SyncTime.P50 != 0.0031 {
		t.Errorf("medians: steps %d wall %v data %v compute %v sync %v", s.Steps, s.WallTime.P50, s.DataTime.P50, s.ComputeTime.P50, s.SyncTime.P50)
	}
	if s.Launches.N != 3 || s.Launches.P50 != 40 {
		t.Errorf("launches %+v: want the 3 counted steps' 40", s.Launches)
	}
	if s.Pool.N != 5 || s.Pool.P50 != 2 || s.PoolKind != "queue.Queue" || s.FirstNS != 0 || s.LastNS != 50*ms {
		t.Errorf("pool %+v %q, span %d..%d", s.Pool, s.PoolKind, s.FirstNS, s.LastNS)
	}
	if v := Diagnose(s); v.Bottleneck != "training: GPU compute" {
		t.Errorf("compute-heavy steps: %+v", v)
	}

	var starved []Step
	for i := range 5 {
		starved = append(starved, step(i, 0.006, 0.001, 0.002))
	}
	v := Diagnose(SummarizeSteps(starved))
	if v.Bottleneck != "inference (training is starved)" || v.Evidence[0] != "dispatch_wait median 6.00ms, 60% of a step's 10.00ms" {
		t.Errorf("starved steps: %+v", v)
	}
	if s := SummarizeSteps(nil); s.Steps != 0 || Diagnose(s).Bottleneck != "unknown" {
		t.Errorf("no steps: %+v", s)
	}
}
