package correlate

import (
	"fmt"
	"math"
	"strings"
)

// Verdict is the seed's answer to "why is the job slow?", with the numbers
// that led to it and where to look next.
type Verdict struct {
	Bottleneck string   // "inference", "data loading", "GPU compute", "balanced", ...
	Evidence   []string // the numbers, in words
	Next       []string // where to look
}

// Thresholds of the seed's rules (its ">>" made numbers).
const (
	// inferenceShare: dispatch wait at least this share of each step's
	// wall time is "dispatch_wait >> 0": training is starved.
	inferenceShare = 0.3
	// nearShare: below inferenceShare but at least this, training waits
	// for samples a noticeable part of the time: the two sides are close.
	nearShare = 0.05
	// dominates: one phase at least this many times the other is ">>".
	dominates = 2.0
	// capacityTie: I and T within this of each other are "I ≈ T".
	capacityTie = 0.15
)

// Diagnose applies the seed's rules (../shared/seeds/000) to a run:
// dispatch_wait >> 0 means inference-bound; otherwise training-bound, and
// within training data_time >> compute_time means data loading,
// compute_time >> data_time GPU compute. Capacities, when both are known,
// decide between the two sides as I against T.
func Diagnose(s Summary) Verdict {
	v := diagnose(s)
	hardware(&v, s)
	return v
}

func diagnose(s Summary) Verdict {
	var v Verdict
	if s.Steps == 0 {
		v.Bottleneck = "unknown"
		v.Evidence = append(v.Evidence, "no steps were found")
		v.Next = append(v.Next, "name the step's end with --step-boundary or --probe step=LIB:SYMBOL")
		return v
	}
	wall := s.WallTime.P50
	waitKnown := s.DispatchWait.N > 0
	share := 0.0
	if waitKnown && wall > 0 {
		share = s.DispatchWait.P50 / wall
		where := ""
		if share >= nearShare {
			where = waitedOn(s)
		}
		v.Evidence = append(v.Evidence, fmt.Sprintf("dispatch_wait median %s, %.0f%% of a step's %s%s",
			msText(s.DispatchWait.P50), 100*share, msText(wall), where))
		if sharedTensors(s) {
			v.Next = append(v.Next, "the pool passes tensors through a multiprocessing queue: dispatch_wait is the gets' blocking part, "+
				"rebuilding each tensor from shared memory counts as data time; attach times whole gets (--whole-gets, on by default) "+
				"where the process has debug registers left from --probe py: functions")
		}
	}
	if s.Pool.N > 0 {
		v.Evidence = append(v.Evidence, poolText(s))
	}
	capsKnown := s.InferCapacity.N > 0 && s.TrainCapacity.N > 0
	// A pool that never runs dry while training hardly waits is the seed's
	// "pool grows": training-bound, whatever the capacity estimates say. So
	// is one that holds a whole step's samples at nearly every step's end,
	// however long the gets take: the next step's gets find their samples
	// there, and their time is taking them (a multiprocessing get's lock,
	// pipe read and unpickling, timed whole), not waiting for inference.
	// Beside a busy loop on 2 CPUs those came to 17% of a step with the
	// pool full, and read as "training waits for samples".
	holdsAStep := s.Pool.N > 0 && s.Samples.N > 0 && s.Samples.P50 > 0 && s.Pool.P10 >= s.Samples.P50
	stocked := s.Pool.N > 0 && s.Pool.P10 > 0 && (!waitKnown || share < nearShare || holdsAStep)
	if holdsAStep && waitKnown && share >= nearShare {
		v.Evidence = append(v.Evidence, fmt.Sprintf("the pool held a step's %.0f samples at 90%% of step ends: "+
			"dispatch_wait is the gets' own time, not a wait for inference", s.Samples.P50))
		v.Next = append(v.Next, fmt.Sprintf("taking samples that are waiting costs %.0f%% of a step: fewer, larger items a get "+
			"(a batch a put), or take them on a thread that runs ahead of the step", 100*share))
	}
	if capsKnown {
		i, t := s.InferCapacity.P50, s.TrainCapacity.P50
		v.Evidence = append(v.Evidence, fmt.Sprintf("I = %.1f/s (inference capacity), T = %.1f/s (training capacity)", i, t))
	}
	// A loop that never waited for samples is not starved, whatever the
	// capacity estimates say: its verdict must not contradict its own
	// dispatch wait.
	neverWaited := waitKnown && share < nearShare
	if capsKnown && neverWaited && s.InferCapacity.P50 <= (1+capacityTie)*s.TrainCapacity.P50 {
		v.Evidence = append(v.Evidence, fmt.Sprintf("training never waited for samples (dispatch_wait %.0f%% of a step): "+
			"it sets the pace, whatever the I and T estimates say", 100*share))
	}
	if capsKnown && !stocked && !neverWaited {
		i, t := s.InferCapacity.P50, s.TrainCapacity.P50
		switch {
		case math.Abs(i-t) <= capacityTie*math.Max(i, t):
			v.Bottleneck = "balanced (I ≈ T)"
			v.Next = append(v.Next, "neither side dominates: speeding up either alone gains little")
			return v
		case i < t:
			return inferenceBound(v, true)
		}
	} else if waitKnown && share >= inferenceShare && !holdsAStep {
		return inferenceBound(v, s.InferCapacity.N > 0)
	}
	if !waitKnown {
		v.Evidence = append(v.Evidence, "dispatch wait unknown: no Python interpreter's waits were probed")
		v.Next = append(v.Next, "if the loop waits for samples in native code, name that call with --probe dispatch=LIB:SYMBOL")
	}
	if !capsKnown && waitKnown && share >= nearShare && !holdsAStep {
		v.Bottleneck = "balanced (training waits for samples some of the time)"
		v.Next = append(v.Next, "inference and training capacities are close: --batch-size and --probe infer=... measure T and I")
		training(&v, s)
		return v
	}
	training(&v, s)
	return v
}

func inferenceBound(v Verdict, inferKnown bool) Verdict {
	v.Bottleneck = "inference (training is starved)"
	v.Next = append(v.Next, "more inference capacity: more engines or larger generate batches")
	if !inferKnown {
		v.Next = append(v.Next, "time the engines' generate calls with --probe infer=LIB:SYMBOL for I and infer_batch_time")
	}
	return v
}

// training decides within training: data against compute.
func training(v *Verdict, s Summary) {
	if s.ComputeTime.N == 0 || s.DataTime.N == 0 {
		if v.Bottleneck == "" {
			v.Bottleneck = "training (data or compute unknown)"
		}
		v.Evidence = append(v.Evidence, "data and compute time not both measured: the loop reads no CUDA event timing and no sync bounds its work")
		return
	}
	data, compute := s.DataTime.P50, s.ComputeTime.P50
	v.Evidence = append(v.Evidence, fmt.Sprintf("data_time median %s, compute_time median %s", msText(data), msText(compute)))
	if s.FetchTime.N > 0 {
		v.Evidence = append(v.Evidence, fmt.Sprintf("of the data time, %s in the store fetch", msText(s.FetchTime.P50)))
	}
	within := ""
	switch {
	case data >= dominates*compute:
		within = "data loading / transfer"
		v.Next = append(v.Next,
			"overlap the next batch's fetch and host-to-device copy with this step's compute (prefetch, pinned memory, non_blocking copies)",
			"more data workers, or a faster store path (fetch_time)")
	case compute >= dominates*data:
		within = "GPU compute"
		v.Next = append(v.Next,
			"the kernels: the summary lists the most launched ones; a profiler such as Nsight Systems shows their time",
			"many short launches a step: CUDA graphs or torch.compile cut launch overhead")
	default:
		within = "data and compute alike"
		v.Next = append(v.Next, "overlapping data loading with compute would gain the most")
	}
	if v.Bottleneck == "" {
		v.Bottleneck = "training: " + within
	} else {
		v.Bottleneck += "; within training: " + within
	}
}

// poolText reads the pool's length at step ends the seed's way: a pool
// that stays stocked says samples wait for training, an empty one that
// training waits for samples.
func poolText(s Summary) string {
	p := s.Pool
	kind := ""
	if s.PoolKind != "" {
		kind = " (" + s.PoolKind + ")"
	}
	what := fmt.Sprintf("pool%s median %.0f at step ends (p10 %.0f, p90 %.0f)", kind, p.P50, p.P10, p.P90)
	switch {
	case p.P10 > 0:
		return what + ": never ran dry, samples wait for training"
	case p.P50 == 0:
		return what + ": empty at most step ends, training takes samples as they come"
	}
	return what
}

func waitedOn(s Summary) string {
	if s.DispatchOn != "" {
		return ", waiting in " + s.DispatchOn
	}
	if s.Boundary == nil {
		return ""
	}
	for _, w := range s.Waits { // longest first
		if w.TID == s.Boundary.TID && w.Kind == WaitDispatch {
			return ", waiting in " + w.What
		}
	}
	return ""
}

// sharedTensors says whether the step thread waited for tensors passed
// through a multiprocessing queue, with no probe timing whole gets (its
// waits would be named after the probe, MODULE:QUALNAME).
func sharedTensors(s Summary) bool {
	if s.Boundary == nil || !strings.HasPrefix(s.DispatchOn, "multiprocessing.") || strings.Contains(s.DispatchOn, ":") {
		return false
	}
	for _, w := range s.Waits {
		if w.TID == s.Boundary.TID && w.What == sharedTensorWait {
			return true
		}
	}
	return false
}

func msText(s float64) string {
	if s >= 1 {
		return fmt.Sprintf("%.2fs", s)
	}
	return fmt.Sprintf("%.2fms", s*1e3)
}
