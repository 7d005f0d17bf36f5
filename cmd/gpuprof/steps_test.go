package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestStepTimesTold: the stepper tells of a process's step time once four
// steps are in, then only when the median of the latest eight has grown
// by more than a quarter; a single slow step moves nothing.
func TestStepTimesTold(t *testing.T) {
	var told []time.Duration
	s := &stepper{onStepTime: func(pid uint32, step time.Duration) {
		if pid != 7 {
			t.Errorf("told of PID %d", pid)
		}
		told = append(told, step)
	}}
	p := &procSteps{}
	steps := func(walls ...float64) []correlate.Step {
		var out []correlate.Step
		for _, w := range walls {
			out = append(out, correlate.Step{PID: 7, WallTime: w})
		}
		return out
	}
	s.noteStepTimes(7, p, steps(0.1, 0.1, 0.1))
	if len(told) != 0 {
		t.Fatalf("told %v after 3 steps", told)
	}
	s.noteStepTimes(7, p, steps(0.1, 5, 0.11, 0.12))
	if len(told) != 1 || told[0] != 100*time.Millisecond {
		t.Fatalf("told %v; want 100ms once, the 5 s step no median", told)
	}
	s.noteStepTimes(7, p, steps(1.5, 1.5, 1.5, 1.5, 1.5))
	if len(told) != 2 || told[1] != 1500*time.Millisecond {
		t.Fatalf("told %v; want 1.5s once the latest eight are mostly 1.5 s", told)
	}
	s.noteStepTimes(7, p, steps(1.6, 1.7, 1.8, 1.7, 1.6, 1.7, 1.8, 1.7))
	if len(told) != 2 {
		t.Fatalf("told %v; 1.7 s is within a quarter of 1.5 s", told)
	}
	if len(p.walls) != stepTimeWindow {
		t.Errorf("%d wall times kept, want %d", len(p.walls), stepTimeWindow)
	}
}

// TestLaunchPhasesHoldLongSteps: a loop of ~1.2 s steps, its launches
// counted half of the time, has steps counted after its first switch
// off too. With 1 s phases, as the phases began, none could be: a step is
// counted only where the probes were on all through it.
func TestLaunchPhasesHoldLongSteps(t *testing.T) {
	testenv.RequireRoot(t)
	dir := testenv.Fixtures(t)
	tmp := t.TempDir()
	steps := filepath.Join(tmp, "steps.jsonl")
	cmd := exec.Command(gpuprofBin, "run", "-q", "--launch-duty", "0.5", "--jsonl", steps, "--",
		filepath.Join(dir, "demo-trainer"), "--steps", "24", "--data-ms", "500", "--compute-ms", "700",
		"--truth", filepath.Join(tmp, "truth.jsonl"))
	cmd.Env = append(os.Environ(), "GPUPROF_LOG=debug")
	r := runCommand(t, cmd)
	if r.code != 0 {
		t.Fatalf("run: %+v", r)
	}
	data, err := os.ReadFile(steps)
	if err != nil {
		t.Fatal(err)
	}
	var counted []bool
	for line := range strings.Lines(string(data)) {
		var st struct {
			LaunchesCounted bool `json:"launches_counted"`
		}
		if err := json.Unmarshal([]byte(line), &st); err != nil {
			t.Fatal(err)
		}
		counted = append(counted, st.LaunchesCounted)
	}
	off := slices.Index(counted, false)
	if off < 0 {
		t.Fatalf("%d steps, every one counted: launch counting never switched off; gpuprof said:\n%s", len(counted), r.stderr)
	}
	// The last step is left out: the trainer's exit ends it, and with
	// 1 s phases it was counted too.
	if !slices.Contains(counted[off:len(counted)-1], true) {
		t.Errorf("steps counted %v: none after the first uncounted one but the last; gpuprof said:\n%s", counted, r.stderr)
	}
}
