package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

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
