package validate_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/tracecfg"
	"github.com/gpuprof/gpuprof/validate"
)

// TestReplayRecordedTraces cuts event traces recorded on the GPU host
// (testdata/gpuhost/validate.sh, attached to the workloads' spec_pipeline.py)
// into steps and holds them to the pipeline's own truth: steps one to one;
// compute time, step period, thru and the engines' infer_batch_time and
// infer_capacity within 5% (median after warm-up); dispatch wait where the
// truth shows one, step time and train_capacity where it does not.
func TestReplayRecordedTraces(t *testing.T) {
	traces, _ := filepath.Glob("../testdata/traces/*/*.trace.jsonl.gz")
	if len(traces) == 0 {
		t.Fatal("no traces under testdata/traces")
	}
	for _, trace := range traces {
		name := filepath.Base(filepath.Dir(trace)) + "/" + filepath.Base(trace)
		truthPath := trace[:len(trace)-len(".trace.jsonl.gz")] + ".truth.jsonl.gz"
		if ranks, _ := filepath.Glob(trace[:len(trace)-len(".trace.jsonl.gz")] + ".truth-rank*.jsonl.gz"); len(ranks) > 0 {
			continue // a job of several processes, a log a rank: cmd/gpuprof's TestReplayRanks
		}
		truth, err := validate.ReadJSONL(truthPath)
		if err != nil {
			t.Fatal(err)
		}
		h, evs, unknown, err := events.ReadTrace(trace)
		if err != nil || unknown != 0 {
			t.Fatalf("read trace: %v (%d unknown events)", err, unknown)
		}
		// A trace recorded with launch sampling (gpuprof attach's default)
		// carries its own on/off markers and is replayed as it is; one
		// recorded counting every launch is also replayed sampled.
		modes := []bool{false, true}
		if slices.ContainsFunc(evs, func(e events.Event) bool { return e.Kind == events.KindLaunchProbes }) {
			modes = []bool{false}
		}
		// The loop's batch, as its truth counts train_capacity (samples a
		// step over step_time), as attach --batch-size was given it.
		capacity, _ := validate.Median(truth, "train_capacity", 5)
		stepTime, _ := validate.Median(truth, "step_time", 5)
		batch := int(math.Round(capacity * stepTime))
		for _, sampled := range modes {
			t.Run(fmt.Sprintf("%s/resampled=%v", name, sampled), func(t *testing.T) {
				steps := replay(t, h, evs, sampled, batch)
				checkSteps(t, truth, steps)
			})
		}
	}
}

// replay cuts events into steps. sampled replays them as gpuprof attach
// sees them by default: once the step boundary is found, launch probes are
// attached 1 s in every 10 s, and launches made while they are not go
// uncounted.
func replay(t *testing.T, h events.TraceHeader, evs []events.Event, sampled bool, batch int) []correlate.Step {
	t.Helper()
	cfg, err := tracecfg.Correlate(h) // recorded with NVML: steps joined with their GPUs' state
	if err != nil {
		t.Fatal(err)
	}
	cfg.BatchSize = batch
	c, err := correlate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const period, on = 10e9, 1e9
	var steps []correlate.Step
	var next uint64 // next on/off switch; 0 until the boundary is found
	counting := true
	for _, e := range evs {
		if e.Kind == events.KindGPUSamples {
			cfg.GPUs.Add(e.GPUs)
			continue
		}
		for next != 0 && e.End >= next {
			counting = !counting
			mark := events.Event{Kind: events.KindLaunchProbes, Start: next, End: next}
			if counting {
				mark.Out = 1
				next += on
			} else {
				next += period - on
			}
			steps = append(steps, c.Add(&mark)...)
		}
		if !counting {
			e.Launches, e.GraphLaunches, e.LaunchFirst, e.LaunchLast = 0, 0, 0, 0
		}
		steps = append(steps, c.Add(&e)...)
		if _, ok := c.Boundary(); ok && sampled && next == 0 {
			next = e.End + on
		}
	}
	return append(steps, c.Finish()...)
}

// checkSteps holds steps to the truth as TestReplayRecordedTraces says.
func checkSteps(t *testing.T, truth []validate.Row, steps []correlate.Step) {
	t.Helper()
	ours := make([]validate.Row, len(steps))
	counted := 0
	for i, s := range steps {
		ours[i] = validate.Row{Step: s.Index, Start: s.StartNS, End: s.EndNS,
			Fields: map[string]float64{"step_time": s.StepTime, "compute_time": s.ComputeTime, "dispatch_wait": s.DispatchWait,
				"thru": s.Thru, "train_capacity": s.TrainCapacity, "infer_batch_time": s.InferBatchTime,
				"infer_capacity": s.InferCapacity}}
		if s.DataMeasured {
			ours[i].Fields["data_time"] = s.DataTime
		}
		if s.PoolMeasured {
			ours[i].Fields["pool"] = float64(s.Pool)
		}
		if s.LaunchesCounted {
			counted++
		}
	}
	required := []string{"period", "compute_time", "thru", "infer_batch_time", "infer_capacity", "data_time", "pool"}
	wait, _ := validate.Median(truth, "dispatch_wait", 5)
	stepTime, _ := validate.Median(truth, "step_time", 5)
	if wait <= 0.01*stepTime {
		required = append(required, "step_time", "train_capacity")
	} else {
		required = append(required, "dispatch_wait")
	}
	// What the loop logs (a DataLoader loop has no engines and no pool of
	// its own), with period, which is the truth's steps' starts.
	required = slices.DeleteFunc(required, func(f string) bool {
		_, logged := validate.Median(truth, f, 5)
		return f != "period" && !logged
	})
	res := validate.Compare(truth, ours, 5, 0.05, required)
	t.Logf("%d steps, %d with launch counts", len(steps), counted)
	for _, f := range res.Fields {
		t.Logf("%-13s truth %.6f gpuprof %.6f (%+.2f%%) required=%v", f.Name, f.Truth, f.Ours, 100*(f.Ours-f.Truth)/f.Truth, f.Required)
	}
	if !res.OneToOne {
		t.Errorf("%d steps, %d matched to the truth's %d: not one to one", res.Ours, res.Matched, len(truth))
	}
	if !res.Pass() {
		t.Errorf("not within 5%%: %s", fmt.Sprint(res.Fields))
	}
}

// TestLoaderBatchesAreNoSamples replays the DataLoader loops recorded on
// the H200 (the HF Trainer, Lightning, a plain sync loop) with no batch
// size: a get from a DataLoader takes a whole batch of a size gpuprof
// does not read, so no step may carry a train_capacity or thru counted
// from its gets, also where a step carries the last counted step's takes
// while the wait probes are off (the HF Trainer's compute trace: 209 of
// its 300 steps did, at 1 "sample" a batch of 8).
func TestLoaderBatchesAreNoSamples(t *testing.T) {
	traces, _ := filepath.Glob("../testdata/traces/h200-shapes/*.trace.jsonl.gz")
	loops := 0
	for _, trace := range traces {
		name := filepath.Base(trace)
		if !strings.HasPrefix(name, "hf-") && !strings.HasPrefix(name, "lightning-") && !strings.HasPrefix(name, "sync-") {
			continue
		}
		loops++
		h, evs, _, err := events.ReadTrace(trace)
		if err != nil {
			t.Fatal(err)
		}
		steps := replay(t, h, evs, false, 0)
		withCapacity := 0
		for _, s := range steps {
			if s.TrainCapacity != 0 || s.Thru != 0 {
				withCapacity++
			}
		}
		t.Logf("%s: %d steps, %d with train_capacity or thru", name, len(steps), withCapacity)
		if len(steps) < 100 || withCapacity > 0 {
			t.Errorf("%s: %d of %d steps carry a train_capacity or thru from a DataLoader's batches, want none of 100 or more",
				name, withCapacity, len(steps))
		}
	}
	if loops < 6 {
		t.Fatalf("%d DataLoader traces under testdata/traces/h200-shapes, want the six recorded", loops)
	}
}
