package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/internal/testenv"
	"github.com/gpuprof/gpuprof/validate"
)

// TestGraphReplaysCountTheirKernels runs the demo trainer's --graph loop
// under gpuprof from its start (torch.cuda.graphs' shape: three eager
// warm-up steps, a step that captures its 40 kernels into a graph and
// replays it, replays after) with launches counted half the time: every
// counted step that replays the graph has graph_kernels the trainer's
// own (40), the capture step's 40 launches are captured_launches, not
// launches, and a replay of the recorded trace gives the same steps.
func TestGraphReplaysCountTheirKernels(t *testing.T) {
	testenv.RequireRoot(t)
	dir := testenv.Fixtures(t)
	tmp := t.TempDir()
	truth, steps, trace := filepath.Join(tmp, "truth.jsonl"), filepath.Join(tmp, "steps.jsonl"), filepath.Join(tmp, "trace.jsonl.gz")
	keepOnFailure(t, truth, steps, trace)
	cmd := exec.Command(gpuprofBin, "run", "-q", "--launch-duty", "0.25", "--jsonl", steps, "--record", trace, "--",
		filepath.Join(dir, "demo-trainer"), "--graph", "--steps", "600", "--truth", truth, "--start-delay", "0.3")
	r := runCommand(t, cmd)
	if r.code != 0 {
		t.Fatalf("run: %+v", r)
	}
	checkAgainstTruth(t, truth, steps)
	if !strings.Contains(r.stdout, "graph kernels/step") {
		t.Errorf("the summary has no graph kernels:\n%s", r.stdout)
	}
	truthRows, ours := readTruthAndSteps(t, truth, steps)
	replays, captures, uncounted := 0, 0, 0
	for _, m := range validate.Align(truthRows, ours) {
		want, got := m.Truth.Fields, m.Ours.Fields
		if _, counted := got["launches"]; !counted {
			uncounted++
			continue
		}
		if got["launches"] != want["launches"] {
			t.Errorf("step %d: launches %v, the trainer's %v", m.Truth.Step, got["launches"], want["launches"])
		}
		if want["graph_kernels"] == 0 {
			continue
		}
		replays++
		if k, ok := got["graph_kernels"]; !ok || k != want["graph_kernels"] {
			t.Errorf("step %d: graph_kernels %v (given %v), the trainer's %v", m.Truth.Step, k, ok, want["graph_kernels"])
		}
		if c, ok := got["captured_launches"]; ok {
			captures++
			if c != 40 {
				t.Errorf("step %d: captured_launches %v, want 40", m.Truth.Step, c)
			}
		}
	}
	t.Logf("%d counted replay steps matched, %d capturing, %d steps not counted", replays, captures, uncounted)
	if uncounted == 0 {
		t.Errorf("every step's launches were counted: the launch probes never went")
	}
	if replays < 50 || captures != 1 {
		t.Errorf("%d counted replay steps matched, want 50 or more; %d capture steps, want 1", replays, captures)
	}

	replayed := filepath.Join(tmp, "replayed.jsonl")
	if rr := gpuprof(t, "replay", trace, "--jsonl", replayed); rr.code != 0 {
		t.Fatalf("replay: %+v", rr)
	}
	again, err := validate.ReadJSONL(replayed)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(ours) {
		t.Fatalf("replay: %d steps, live %d", len(again), len(ours))
	}
	for i := range ours {
		for _, f := range []string{"launches", "graph_launches", "graph_kernels", "captured_launches"} {
			a, aok := ours[i].Fields[f]
			b, bok := again[i].Fields[f]
			if a != b || aok != bok {
				t.Errorf("step %d: %s live %v (%v), replayed %v (%v)", ours[i].Step, f, a, aok, b, bok)
			}
		}
	}
}
