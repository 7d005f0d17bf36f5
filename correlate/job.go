package correlate

import "slices"

// A job of several processes (torchrun ranks, trainers a launcher
// started) is seen as one: each process's pace, the slowest one and by how
// much, and its verdict. Ranks that step together (data parallel) all move
// at the slowest one's pace, so its bottleneck is the job's.

// ProcessRun is one process's run, for the job view.
type ProcessRun struct {
	PID uint32
	Run Summary
}

// ProcessPace is a process's medians.
type ProcessPace struct {
	PID          uint32
	Steps        int
	StepsPerSec  float64 // 1 / median wall time
	StepTime     float64
	DispatchWait float64
	WaitKnown    bool // Python waits were probed in the process
	DataTime     float64
	ComputeTime  float64
	Samples      float64 // items taken from its pool a step; 0 where not counted
	Bottleneck   string
}

// Job is the processes with steps, by PID, and the straggler.
type Job struct {
	Processes []ProcessPace
	Slowest   uint32  // the process with the longest median wall time a step
	Skew      float64 // its median wall time over the fastest one's, less 1
	Verdict   Verdict // the slowest process's
}

// DiagnoseJob compares the processes that have steps; ok is false when
// fewer than two do.
func DiagnoseJob(runs []ProcessRun) (Job, bool) {
	var j Job
	var slow, fast float64
	for _, r := range runs {
		s := r.Run
		if s.Steps == 0 || s.WallTime.P50 <= 0 {
			continue
		}
		v := Diagnose(s)
		p := ProcessPace{PID: r.PID, Steps: s.Steps, StepsPerSec: 1 / s.WallTime.P50, StepTime: s.StepTime.P50,
			DispatchWait: s.DispatchWait.P50, WaitKnown: s.DispatchWait.N > 0, DataTime: s.DataTime.P50, ComputeTime: s.ComputeTime.P50, Samples: s.Samples.P50, Bottleneck: v.Bottleneck}
		j.Processes = append(j.Processes, p)
		if wall := s.WallTime.P50; slow == 0 || wall > slow {
			slow, j.Slowest, j.Verdict = wall, r.PID, v
		}
		if wall := s.WallTime.P50; fast == 0 || wall < fast {
			fast = wall
		}
	}
	if len(j.Processes) < 2 {
		return Job{}, false
	}
	slices.SortFunc(j.Processes, func(a, b ProcessPace) int { return int(a.PID) - int(b.PID) })
	j.Skew = slow/fast - 1
	return j, true
}
