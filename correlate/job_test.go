package correlate

import (
	"slices"
	"strings"
	"testing"
)

func TestDiagnoseJob(t *testing.T) {
	fast := Summary{Steps: 100, WallTime: d(0.010), StepTime: d(0.010), DataTime: d(0.002), ComputeTime: d(0.008)}
	slow := Summary{Steps: 80, WallTime: d(0.0125), StepTime: d(0.0125), DataTime: d(0.009), ComputeTime: d(0.0035)}
	j, ok := DiagnoseJob([]ProcessRun{{PID: 20, Run: slow}, {PID: 10, Run: fast}, {PID: 30}})
	if !ok {
		t.Fatal("no job view from two processes with steps")
	}
	if len(j.Processes) != 2 || j.Processes[0].PID != 10 || j.Processes[1].PID != 20 {
		t.Fatalf("processes %+v, want 10 and 20 by PID (30 has no steps)", j.Processes)
	}
	if j.Slowest != 20 || j.Skew < 0.2499 || j.Skew > 0.2501 {
		t.Errorf("slowest %d by %.4f, want 20 by 0.25", j.Slowest, j.Skew)
	}
	if j.Verdict.Bottleneck != "training: data loading / transfer" {
		t.Errorf("job verdict %q, want the slowest process's (data loading)", j.Verdict.Bottleneck)
	}
	if j.Processes[0].StepsPerSec != 100 {
		t.Errorf("steps/s %v, want 100", j.Processes[0].StepsPerSec)
	}
	if _, ok := DiagnoseJob([]ProcessRun{{PID: 10, Run: fast}}); ok {
		t.Error("a job view from one process")
	}
}

// TestDiagnoseJobEngineProcesses: processes whose steps take nothing from
// the pool they share are inference engines: their iterations are the
// job's I, they are no trainer to compare paces with, and the trainer's
// verdict weighs I against T.
func TestDiagnoseJobEngineProcesses(t *testing.T) {
	trainer := Summary{Steps: 100, WallTime: Dist{N: 100, P50: 0.020}, StepTime: Dist{N: 100, P50: 0.004},
		DispatchWait: Dist{N: 100, P50: 0.016}, DataTime: Dist{N: 100, P50: 0.001}, ComputeTime: Dist{N: 100, P50: 0.003},
		Samples: Dist{N: 100, P50: 4, P90: 4}, TrainCapacity: Dist{N: 100, P50: 1000}, Pool: Dist{N: 100, P50: 1}}
	engine := func(iter float64) Summary {
		return Summary{Steps: 50, WallTime: Dist{N: 50, P50: iter}, Samples: Dist{N: 50}}
	}
	runs := []ProcessRun{{PID: 1, Run: trainer}, {PID: 2, Run: engine(0.020)}, {PID: 3, Run: engine(0.025)}}
	if !EngineProcess(runs[1].Run) || EngineProcess(trainer) {
		t.Fatal("engine and trainer told apart wrong")
	}
	j, ok := DiagnoseJob(runs)
	if !ok || len(j.Processes) != 1 || len(j.Engines) != 2 {
		t.Fatalf("ok %v, %d trainers, %d engines", ok, len(j.Processes), len(j.Engines))
	}
	within(t, "I", j.InferCapacity, 1/0.020+1/0.025, 1e-9)
	within(t, "iteration", j.InferBatchTime, 0.0225, 1e-12)
	if !strings.Contains(j.Verdict.Bottleneck, "inference") || !slices.ContainsFunc(j.Verdict.Evidence, func(e string) bool {
		return strings.HasPrefix(e, "I = 90.0/s")
	}) {
		t.Errorf("verdict %+v: want inference-bound with I = 90/s", j.Verdict)
	}
}

// TestDiagnoseJobLockstep: data-parallel ranks step at one pace, the
// straggler's pace; the others wait for it in their syncs. The straggler
// is the rank with the most work of its own (step less sync), whatever
// their wall times say.
func TestDiagnoseJobLockstep(t *testing.T) {
	rank := func(data, sync float64) Summary {
		return Summary{Steps: 100, WallTime: d(0.020), StepTime: d(0.020), DataTime: d(data), ComputeTime: d(0.009),
			SyncTime: d(sync)}
	}
	runs := []ProcessRun{
		{PID: 7, Run: rank(0.002, 0.009), Rank: 1, Ranked: true},
		{PID: 9, Run: rank(0.018, 0.002), Rank: 0, Ranked: true}, // slowed: its data loading
		{PID: 8, Run: rank(0.0021, 0.0089), Rank: 2, Ranked: true},
	}
	runs[1].Run.WallTime = d(0.0201) // the straggler's wall time hardly differs
	j, ok := DiagnoseJob(runs)
	if !ok || !j.Lockstep {
		t.Fatalf("ok %v lockstep %v: want a lockstep job", ok, j.Lockstep)
	}
	if got := []int{j.Processes[0].Rank, j.Processes[1].Rank, j.Processes[2].Rank}; !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("processes in rank order %v", got)
	}
	if j.Slowest != 9 {
		t.Errorf("straggler PID %d, want 9 (rank 0, 18 ms of its own a step against 11)", j.Slowest)
	}
	within(t, "skew", j.Skew, 0.018/0.01105-1, 1e-9)
	if j.Verdict.Bottleneck != "training: data loading / transfer" {
		t.Errorf("job verdict %q, want the straggler's", j.Verdict.Bottleneck)
	}
}
