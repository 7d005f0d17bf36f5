package correlate

import (
	"strings"
	"testing"
)

// TestStepBound: one step's verdict by the seed's rules, at and around
// the thresholds Diagnose uses (inferenceShare, dominates).
func TestStepBound(t *testing.T) {
	measured := func(wall, dispatch, data, compute float64) Step {
		return Step{WallTime: wall, DispatchWait: dispatch, WaitsObserved: true, DataTime: data, DataMeasured: true,
			ComputeTime: compute, ComputeSource: ComputeEvents}
	}
	for _, tc := range []struct {
		name string
		s    Step
		want Bound
	}{
		{"dispatch wait at the share", measured(0.010, inferenceShare*0.010, 0.001, 0.006), BoundInference},
		{"dispatch wait just under it", measured(0.010, 0.0029, 0.001, 0.006), BoundCompute},
		{"inference needs no data or compute", Step{WallTime: 0.05, DispatchWait: 0.045, WaitsObserved: true}, BoundInference},
		{"dispatch wait not observed", Step{WallTime: 0.05, DispatchWait: 0.045, DataTime: 0.001, DataMeasured: true,
			ComputeTime: 0.004, ComputeSource: ComputeDerived}, BoundCompute},
		{"data twice compute", measured(0.010, 0, 0.006, 0.003), BoundData},
		{"data under twice compute", measured(0.010, 0, 0.0059, 0.003), BoundBalanced},
		{"compute twice data", measured(0.010, 0, 0.002, 0.004), BoundCompute},
		{"compute with no data time", measured(0.010, 0, 0, 0.004), BoundCompute},
		{"both zero", measured(0.010, 0, 0, 0), BoundBalanced},
		{"data not measured", Step{WallTime: 0.01, WaitsObserved: true, ComputeTime: 0.004, ComputeSource: ComputeEvents}, BoundUnknown},
		{"compute not measured", Step{WallTime: 0.01, WaitsObserved: true, DataTime: 0.004, DataMeasured: true}, BoundUnknown},
		{"zero wall time", Step{WaitsObserved: true}, BoundUnknown},
	} {
		if got := StepBound(tc.s); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestStepBoundAgreesWithDiagnose: a run of identical steps gets the
// verdict its medians get from Diagnose, on the spec_pipeline modes of
// TestDiagnose.
func TestStepBoundAgreesWithDiagnose(t *testing.T) {
	for _, tc := range []struct {
		run     Summary
		want    Bound
		verdict string // in the run's Bottleneck
	}{
		{Summary{Steps: 1, WallTime: d(0.0535), DispatchWait: d(0.0479), DataTime: d(0.0009), ComputeTime: d(0.0044)}, BoundInference, "inference"},
		{Summary{Steps: 1, WallTime: d(0.0171), DispatchWait: d(0.0001), DataTime: d(0.0141), ComputeTime: d(0.0029)}, BoundData, "data loading"},
		{Summary{Steps: 1, WallTime: d(0.0181), DispatchWait: d(0), DataTime: d(0.0008), ComputeTime: d(0.0154)}, BoundCompute, "GPU compute"},
	} {
		s := Step{WallTime: tc.run.WallTime.P50, DispatchWait: tc.run.DispatchWait.P50, WaitsObserved: true,
			DataTime: tc.run.DataTime.P50, DataMeasured: true, ComputeTime: tc.run.ComputeTime.P50, ComputeSource: ComputeEvents}
		run := Diagnose(tc.run).Bottleneck
		if got := StepBound(s); got != tc.want || !strings.Contains(run, tc.verdict) {
			t.Errorf("%+v: step bound %q, want %q; run verdict %q, want %q in it", s, got, tc.want, run, tc.verdict)
		}
	}
}
