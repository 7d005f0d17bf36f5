package validate_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/validate"
)

// TestReplayRecordedTraces cuts event traces recorded on the GPU host
// (testdata/gpuhost/validate.sh, attached to the workloads' spec_pipeline.py)
// into steps and holds them to the pipeline's own truth: steps one to one,
// compute time and step period within 5% (median after warm-up), and step
// time too where the truth shows no dispatch wait.
func TestReplayRecordedTraces(t *testing.T) {
	traces, _ := filepath.Glob("../testdata/traces/*/*.trace.jsonl.gz")
	if len(traces) == 0 {
		t.Fatal("no traces under testdata/traces")
	}
	for _, trace := range traces {
		name := filepath.Base(filepath.Dir(trace)) + "/" + filepath.Base(trace)
		t.Run(name, func(t *testing.T) {
			truthPath := trace[:len(trace)-len(".trace.jsonl.gz")] + ".truth.jsonl.gz"
			truth, err := validate.ReadJSONL(truthPath)
			if err != nil {
				t.Fatal(err)
			}
			h, evs, unknown, err := events.ReadTrace(trace)
			if err != nil || unknown != 0 {
				t.Fatalf("read trace: %v (%d unknown events)", err, unknown)
			}
			c, err := correlate.New(correlate.Config{NoLaunchCounts: h.NoLaunchCounts})
			if err != nil {
				t.Fatal(err)
			}
			var steps []correlate.Step
			for i := range evs {
				steps = append(steps, c.Add(&evs[i])...)
			}
			steps = append(steps, c.Finish()...)
			ours := make([]validate.Row, len(steps))
			for i, s := range steps {
				ours[i] = validate.Row{Step: s.Index, Start: s.StartNS, End: s.EndNS,
					Fields: map[string]float64{"step_time": s.StepTime, "compute_time": s.ComputeTime}}
			}
			required := []string{"period", "compute_time"}
			wait, _ := validate.Median(truth, "dispatch_wait", 5)
			stepTime, _ := validate.Median(truth, "step_time", 5)
			if wait <= 0.01*stepTime {
				required = append(required, "step_time")
			}
			res := validate.Compare(truth, ours, 5, 0.05, required)
			for _, f := range res.Fields {
				t.Logf("%-13s truth %.6f gpuprof %.6f (%+.2f%%) required=%v", f.Name, f.Truth, f.Ours, 100*(f.Ours-f.Truth)/f.Truth, f.Required)
			}
			if !res.OneToOne {
				t.Errorf("%d steps, %d matched to the truth's %d: not one to one", res.Ours, res.Matched, len(truth))
			}
			if !res.Pass() {
				t.Errorf("not within 5%%: %s", fmt.Sprint(res.Fields))
			}
		})
	}
}
