package correlate

import (
	"cmp"
	"math"
	"slices"
)

// A job of several processes (torchrun ranks, trainers a launcher
// started) is seen as one: each process's pace, the slowest one and by how
// much, and its verdict. Ranks that step together (data parallel) all move
// at the slowest one's pace, so its bottleneck is the job's.
//
// Inference engines that are processes of their own have a loop too, and
// so "steps". A process whose steps take nothing from the sample pool it
// shares with the trainer (its samples counted, and zero) is such an
// engine: its iterations give the job's inference capacity, and it is no
// trainer to compare paces with.

// ProcessRun is one process's run, for the job view, with its rank in a
// distributed job (torchrun's RANK) where it has one.
type ProcessRun struct {
	PID    uint32
	Run    Summary
	Rank   int
	Ranked bool
}

// ProcessPace is a process's medians.
type ProcessPace struct {
	PID          uint32
	Rank         int
	Ranked       bool
	Steps        int
	StepsPerSec  float64 // 1 / median wall time
	StepTime     float64
	DispatchWait float64
	WaitKnown    bool // Python waits were probed in the process
	DataTime     float64
	ComputeTime  float64
	SyncTime     float64
	// Own is the step less the time blocked in syncs: the work that is the
	// process's own. Ranks in lockstep wait for the slowest one in their
	// syncs (a collective completes when the last rank joins it), so the
	// straggler is the one with the most of its own.
	Own        float64
	GPUs       []int   // its GPUs (NVML indexes), where sampled
	SMActive   float64 // its GPU's SM activity while its steps ran; NaN unknown
	Samples    float64 // items taken from its pool a step; 0 where not counted
	Bottleneck string
}

// Job is the processes with steps, by PID, and the straggler.
type Job struct {
	Processes []ProcessPace // the trainers
	Slowest   uint32        // the straggler: the process the others wait for
	Skew      float64       // how much longer it takes (see Lockstep), less 1
	Verdict   Verdict       // the slowest process's
	// Lockstep: the trainers step at one pace (their median wall times
	// within lockstepTie), as data-parallel ranks do, waiting for each
	// other. The straggler is then the one with the most work of its own
	// (Own), and Skew is its Own over the median of the others'.
	// Otherwise it is the one with the longest median wall time, and Skew
	// is that over the fastest one's.
	Lockstep bool
	// Engines are the engine processes (EngineProcess); InferCapacity is
	// their iterations a second, all together, and InferBatchTime their
	// median iteration.
	Engines        []ProcessPace
	InferCapacity  float64
	InferBatchTime float64
}

// EngineProcess says whether a process's steps are an inference engine's
// iterations: it shares the sample pool and takes nothing from it.
func EngineProcess(s Summary) bool {
	return s.Steps > 0 && s.Samples.N > 0 && s.Samples.P90 == 0
}

// DiagnoseJob compares the processes that have steps, engines apart; ok
// is false when fewer than two have steps, or none of them is a trainer.
func DiagnoseJob(runs []ProcessRun) (Job, bool) {
	var j Job
	verdicts := map[uint32]Verdict{}
	var slow, fast float64
	var iterations []float64
	for _, r := range runs {
		if s := r.Run; EngineProcess(s) && s.WallTime.P50 > 0 {
			j.Engines = append(j.Engines, ProcessPace{PID: r.PID, Steps: s.Steps, StepsPerSec: 1 / s.WallTime.P50,
				StepTime: s.WallTime.P50, Bottleneck: "inference engine"})
			j.InferCapacity += 1 / s.WallTime.P50
			iterations = append(iterations, s.WallTime.P50)
		}
	}
	if len(iterations) > 0 {
		j.InferBatchTime = median(iterations)
	}
	for _, r := range runs {
		s := r.Run
		if s.Steps == 0 || s.WallTime.P50 <= 0 || EngineProcess(s) {
			continue
		}
		if j.InferCapacity > 0 && s.InferCapacity.N == 0 {
			// The trainer's verdict with the engines' capacity.
			s.InferCapacity = Dist{N: s.Steps, Mean: j.InferCapacity, P10: j.InferCapacity, P50: j.InferCapacity, P90: j.InferCapacity}
		}
		v := Diagnose(s)
		p := ProcessPace{PID: r.PID, Rank: r.Rank, Ranked: r.Ranked, Steps: s.Steps, StepsPerSec: 1 / s.WallTime.P50,
			StepTime: s.StepTime.P50, DispatchWait: s.DispatchWait.P50, WaitKnown: s.DispatchWait.N > 0, DataTime: s.DataTime.P50,
			ComputeTime: s.ComputeTime.P50, SyncTime: s.SyncTime.P50, Own: max(0, s.StepTime.P50-s.SyncTime.P50),
			SMActive: math.NaN(), GPUs: s.GPU.GPUs, Samples: s.Samples.P50, Bottleneck: v.Bottleneck}
		if s.GPU.SMActive.N > 0 {
			p.SMActive = s.GPU.SMActive.P50
		}
		j.Processes = append(j.Processes, p)
		verdicts[r.PID] = v
		if wall := s.WallTime.P50; slow == 0 || wall > slow {
			slow, j.Slowest = wall, r.PID
		}
		if wall := s.WallTime.P50; fast == 0 || wall < fast {
			fast = wall
		}
	}
	if len(j.Processes) == 0 || len(j.Processes)+len(j.Engines) < 2 {
		return Job{}, false
	}
	slices.SortFunc(j.Processes, func(a, b ProcessPace) int {
		if a.Ranked != b.Ranked || a.Rank == b.Rank {
			return int(a.PID) - int(b.PID)
		}
		return a.Rank - b.Rank
	})
	j.Skew = slow/fast - 1
	if len(j.Processes) > 1 && j.Skew <= lockstepTie {
		j.Lockstep = true
		j.Slowest, j.Skew = ownStraggler(j.Processes)
	}
	j.Verdict = verdicts[j.Slowest]
	return j, true
}

// lockstepTie: trainers whose median wall times are within this of each
// other step together.
const lockstepTie = 0.05

// StragglerSkew is the least Skew that names a straggler: below it the
// ranks are balanced, and the one with the most work (a step's own time
// varies by a few percent from rank to rank) is no finding.
const StragglerSkew = 0.05

// Straggler says whether the slowest process is slow enough to name.
func (j Job) Straggler() bool { return j.Skew >= StragglerSkew }

// ownStraggler is, of processes in lockstep, the one with the most work of
// its own a step, and that over the median of the others'.
func ownStraggler(ps []ProcessPace) (uint32, float64) {
	top := slices.MaxFunc(ps, func(a, b ProcessPace) int { return cmp.Compare(a.Own, b.Own) })
	var others []float64
	for _, p := range ps {
		if p.PID != top.PID {
			others = append(others, p.Own)
		}
	}
	m := median(others)
	if m <= 0 {
		return top.PID, 0
	}
	return top.PID, top.Own/m - 1
}
