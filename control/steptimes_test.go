package control

import (
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
)

// TestStepTimesTold: a process's step time is told once four steps are
// in, then only when the median of the latest eight has grown by more
// than a quarter; a single slow step moves nothing.
func TestStepTimesTold(t *testing.T) {
	cfg := DefaultConfig().StepTimes
	var c stepClock
	var told []time.Duration
	note := func(walls ...float64) {
		var steps []correlate.Step
		for _, w := range walls {
			steps = append(steps, correlate.Step{PID: 7, WallTime: w})
		}
		if d, ok := c.note(cfg, steps); ok {
			told = append(told, d)
		}
	}
	note(0.1, 0.1, 0.1)
	if len(told) != 0 {
		t.Fatalf("told %v after 3 steps", told)
	}
	note(0.1, 5, 0.11, 0.12)
	if len(told) != 1 || told[0] != 100*time.Millisecond {
		t.Fatalf("told %v; want 100ms once, the 5 s step no median", told)
	}
	note(1.5, 1.5, 1.5, 1.5, 1.5)
	if len(told) != 2 || told[1] != 1500*time.Millisecond {
		t.Fatalf("told %v; want 1.5s once the latest eight are mostly 1.5 s", told)
	}
	note(1.6, 1.7, 1.8, 1.7, 1.6, 1.7, 1.8, 1.7)
	if len(told) != 2 {
		t.Fatalf("told %v; 1.7 s is within a quarter of 1.5 s", told)
	}
	if len(c.walls) != cfg.Window {
		t.Errorf("%d wall times kept, want %d", len(c.walls), cfg.Window)
	}
}
