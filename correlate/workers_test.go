package correlate

import (
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

// TestWorkers: engines in two processes form one group, a probed infer
// function on three threads another; a function on one thread, or of the
// trainer's roles, is no group.
func TestWorkers(t *testing.T) {
	runs := []ProcessRun{
		{PID: 1, Run: Summary{
			Engines: []Engine{{PID: 1, TID: 11, Iterations: 100, Busy: Dist{P50: 0.010}}},
			UserThreads: []UserTotal{
				{Role: events.RoleInfer, Name: "Engine.generate", PID: 1, TID: 11, Calls: 10, Seconds: 0.10},
				{Role: events.RoleInfer, Name: "Engine.generate", PID: 1, TID: 12, Calls: 10, Seconds: 0.12},
				{Role: events.RoleData, Name: "load", PID: 1, TID: 1, Calls: 50, Seconds: 0.5},
				{Role: events.RoleDispatch, Name: "Queue.get", PID: 1, TID: 1, Calls: 50, Seconds: 0.5},
				{Role: events.RoleDispatch, Name: "Queue.get", PID: 1, TID: 2, Calls: 50, Seconds: 0.5},
			}}},
		{PID: 2, Run: Summary{
			Engines: []Engine{{PID: 2, TID: 21, Iterations: 60, Busy: Dist{P50: 0.016}}},
			UserThreads: []UserTotal{
				{Role: events.RoleInfer, Name: "Engine.generate", PID: 2, TID: 21, Calls: 5, Seconds: 0.10},
			}}},
	}
	gs := Workers(runs)
	if len(gs) != 2 {
		t.Fatalf("%d groups, want engines and Engine.generate: %+v", len(gs), gs)
	}
	// Engine.generate: 10, 12, 20 ms a call; median 12; slowest PID 2.
	g := gs[0]
	if g.What != "Engine.generate (infer)" || len(g.Workers) != 3 || g.Slowest.PID != 2 {
		t.Fatalf("first group %+v", g)
	}
	within(t, "median", g.Median, 0.012, 1e-12)
	within(t, "skew", g.Skew, 0.020/0.012-1, 1e-12)
	// Engines: 10 and 16 ms; median 13; slowest PID 2 by 23%.
	e := gs[1]
	if e.What != "engine GPU loop" || e.Slowest.TID != 21 || e.Slowest.Calls != 60 {
		t.Fatalf("engine group %+v", e)
	}
	within(t, "engine skew", e.Skew, 0.016/0.013-1, 1e-12)
}
