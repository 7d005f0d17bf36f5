package correlate

import "testing"

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
