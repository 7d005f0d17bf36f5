package correlate

// Bound is what one step was bound by: a label value for metrics
// (gpuprof_steps_total{verdict}), so a fixed set of short names.
type Bound string

const (
	BoundInference Bound = "inference"    // training waited for samples
	BoundData      Bound = "data_loading" // data phases dominate compute
	BoundCompute   Bound = "gpu_compute"  // compute dominates data
	BoundBalanced  Bound = "balanced"     // neither dominates
	// BoundUnknown: the step's data or compute time was not measured, and
	// it did not wait for samples long enough to be inference-bound.
	BoundUnknown Bound = "unknown"
)

// StepBound applies the seed's rules, as Diagnose does to a run's
// medians, to one step: a dispatch wait of at least inferenceShare of its
// wall time is inference-bound; otherwise data time at least dominates
// times the compute time is data loading, compute at least dominates times
// the data GPU compute, and anything between balanced. Capacities, the
// pool's stock and the near-share "balanced" of Diagnose need a run, not
// a step, so they are left to it: counting steps by this over a window
// shows how a run's verdict is made up, and when it changed.
func StepBound(s Step) Bound {
	if s.WaitsObserved && s.WallTime > 0 && s.DispatchWait >= inferenceShare*s.WallTime {
		return BoundInference
	}
	if !s.DataMeasured || s.ComputeSource == ComputeNone {
		return BoundUnknown
	}
	data, compute := s.DataTime, s.ComputeTime
	switch {
	// Strict on the dominant side, so that two zero phases are balanced,
	// not data loading (0 >= 2*0).
	case data > 0 && data >= dominates*compute:
		return BoundData
	case compute > 0 && compute >= dominates*data:
		return BoundCompute
	}
	return BoundBalanced
}
