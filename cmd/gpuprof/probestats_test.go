package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/probes"
)

// TestProbeStatsCost: --probe-stats prices each program's runs with
// their traps, and says what they all cost the job a second.
func TestProbeStatsCost(t *testing.T) {
	stats := []probes.ProgramStat{
		// 10,000 launches a second for 2 s: 20,000 × 670 ns + 2 ms of runs.
		{Name: "launch_entry", Runs: 20000, Runtime: 2 * time.Millisecond, Trap: bpf.TrapEntry},
		// 1,000 returns: 1,000 × 350 ns + 0.5 ms.
		{Name: "api_return", Runs: 1000, Runtime: 500 * time.Microsecond, Trap: bpf.TrapReturn},
		// A tracepoint's runs cost no trap.
		{Name: "offcpu_leave", Runs: 4000, Runtime: 400 * time.Microsecond},
	}
	var b strings.Builder
	writeProbeStats(&b, stats, 2*time.Second)
	out := b.String()
	// (13.4 + 2) + (0.35 + 0.5) + 0.4 = 16.65 ms over 2 s.
	for _, want := range []string{
		"launch_entry         20000      10000/s      100 ns     7.70 ms/s",
		"api_return            1000        500/s      500 ns     0.42 ms/s",
		"offcpu_leave          4000       2000/s      100 ns     0.20 ms/s",
		"in all: 8.32 ms a second of the job's threads at least (17 ms over 2s)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
