package main

import (
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/internal/testenv"
	"github.com/gpuprof/gpuprof/validate"
)

// TestReplayRanks replays traces recorded on two H200s
// (testdata/gpuhost/multi_pipeline.py: an engine process feeding one
// trainer, or two DistributedDataParallel ranks, through torch
// multiprocessing queues) and holds each rank's steps to that rank's own
// log: steps one to one, and every field within 5%. DDP reads its own
// sampled timings at the next forward; those must neither cut steps nor
// count as compute. The compute-mode traces were recorded with attach's
// whole gets (get=py:multiprocessing.queues:Queue.get), as the logs time
// them: a tensor rebuilt from shared memory in a get is dispatch wait.
// engine-ddp-two-ranks-sampled (170c7fb, 300 steps) goes past the ranks'
// first switch off: their waits paused with the launch probes, their
// event calls timed by the runtime's probes, NCCL's own records unseen.
// engine-ddp-two-ranks-records-narrowed is 79c2017's `ddp` validation
// run (499 steps) with the event records a session probing only the
// loop's own records' call sites leaves unseen taken out (the callers
// whose records are read 1 in 20 or less, and the call sites' own on the
// ranks' backward threads): DDP's sampled timings are then readings of
// events with no record, which must not cut steps either
// (probes/recordsites.go; with the builder of 79c2017, 513 steps).
// A trace of two ranks must also name the straggler where its name says
// one was slowed on purpose (engine-ddp-two-ranks-slow-rank1, 4f2eb25,
// cut to its first 260 steps: rank 1 burned 8 ms more CPU a step), and
// name none where it does not.
// slowRank finds the rank a trace's name says was slowed on purpose.
var slowRank = regexp.MustCompile(`slow-rank(\d+)`)

func TestReplayRanks(t *testing.T) {
	traces, _ := filepath.Glob(filepath.Join(testenv.Root(), "testdata/traces/h200x2-ranks/*.trace.jsonl.gz"))
	if len(traces) == 0 {
		t.Fatal("no traces under testdata/traces/h200x2-ranks")
	}
	for _, trace := range traces {
		name := strings.TrimSuffix(filepath.Base(trace), ".trace.jsonl.gz")
		truths, _ := filepath.Glob(strings.TrimSuffix(trace, ".trace.jsonl.gz") + ".truth-rank*.jsonl.gz")
		if len(truths) == 0 {
			t.Fatalf("%s: no truth-rank files beside it", name)
		}
		first, err := validate.ReadJSONL(truths[0])
		if err != nil {
			t.Fatal(err)
		}
		capacity, _ := validate.Median(first, "train_capacity", 5)
		stepTime, _ := validate.Median(first, "step_time", 5)
		batch := int(math.Round(capacity * stepTime))
		steps := filepath.Join(t.TempDir(), "steps.jsonl")
		r := gpuprof(t, "replay", trace, "--batch-size", itoa(batch), "--jsonl", steps)
		if r.code != 0 {
			t.Fatalf("%s: replay: %+v", name, r)
		}
		if len(truths) > 1 {
			want := "no straggler:"
			if m := slowRank.FindStringSubmatch(name); m != nil {
				want = "straggler: rank " + m[1] + " ("
			}
			if !strings.Contains(r.stdout, "; "+want) {
				t.Errorf("%s: replay does not say %q:\n%s", name, want, r.stdout)
			}
		}
		ours, err := validate.ReadJSONL(steps)
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range truths {
			rank := strings.TrimSuffix(path[strings.LastIndex(path, "rank")+len("rank"):], ".jsonl.gz")
			t.Run(name+"/rank"+rank, func(t *testing.T) {
				truth, err := validate.ReadJSONL(path)
				if err != nil {
					t.Fatal(err)
				}
				n, err := strconv.Atoi(rank)
				if err != nil {
					t.Fatalf("%s: rank %q", path, rank)
				}
				r := float64(n)
				mine := validate.Only(ours, "rank", r, false)
				res := validate.Compare(validate.Only(truth, "rank", r, true), mine, 5, 0.05,
					[]string{"period", "compute_time", "thru", "pool", "step_time", "dispatch_wait", "data_time", "train_capacity"})
				for _, f := range res.Fields {
					t.Logf("%-15s truth %.6f gpuprof %.6f (%+.2f%%) required=%v", f.Name, f.Truth, f.Ours, 100*(f.Ours-f.Truth)/f.Truth, f.Required)
				}
				// The log's first step ends at gpuprof's first boundary,
				// which opens gpuprof's first step.
				if !res.Pass() || res.Matched < len(truth)-1 {
					t.Errorf("rank %s: %d steps (%d matched of the log's %d, one to one %v) do not match its log within 5%%",
						rank, res.Ours, res.Matched, len(truth), res.OneToOne)
				}
			})
		}
	}
}
