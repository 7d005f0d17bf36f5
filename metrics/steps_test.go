package metrics

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/correlate"
)

// The exporter sits beside the live line and --jsonl.
var _ control.Output = (*Exporter)(nil)

// TestStepMetrics feeds steps of two processes, some with their launches
// or wait kinds uncounted and phases unmeasured, and checks each series
// against the steps: histograms' counts and sums, counters summed only
// over the steps that counted them, gauges from the latest step that had
// them, and nothing where nothing was measured.
func TestStepMetrics(t *testing.T) {
	e, err := New(Config{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	var steps []correlate.Step
	for i := range 10 {
		s := fullStep(100, 0)
		s.Index = i
		s.StepTime = 0.010 + 0.001*float64(i)
		s.Pool = i
		if i%2 == 1 { // between launch phases: no launches, no d2d
			s.LaunchesCounted, s.Launches, s.OtherLaunches, s.GraphLaunches, s.D2DBytes = false, 0, 0, 0, 0
		}
		if i >= 7 { // wait kinds go with the launches: unknown here
			s.WaitKindsCounted = false
		}
		steps = append(steps, s)
	}
	// A process without a rank, whose waits, data, compute, pool and
	// capacities are unknown.
	bare := correlate.Step{PID: 200, WallTime: 0.5, StepTime: 0.5, SyncTime: 0.1, H2DBytes: 10}
	steps = append(steps, bare, bare)
	for _, s := range steps {
		e.Step(s)
	}
	fams := gather(t, e)
	p100 := map[string]string{"pid": "100", "rank": "0"}
	p200 := map[string]string{"pid": "200", "rank": ""}
	with := func(base map[string]string, k, v string) map[string]string {
		m := map[string]string{k: v}
		for kk, vv := range base {
			m[kk] = vv
		}
		return m
	}

	var stepSum, wallSum, launches, others, graphs, d2d, lock, countedWall float64
	for _, s := range steps[:10] {
		stepSum += s.StepTime
		wallSum += s.WallTime
		if s.LaunchesCounted {
			launches += float64(s.Launches)
			others += float64(s.OtherLaunches)
			graphs += float64(s.GraphLaunches)
			d2d += float64(s.D2DBytes)
			countedWall += s.WallTime
		}
		if s.WaitKindsCounted {
			lock += s.LockWait
		}
	}
	h := series(fams, "gpuprof_step_seconds", p100).GetHistogram()
	if h.GetSampleCount() != 10 || !near(h.GetSampleSum(), stepSum) {
		t.Errorf("gpuprof_step_seconds pid 100: count %d sum %v, want 10, %v", h.GetSampleCount(), h.GetSampleSum(), stepSum)
	}
	// The bucket counts are cumulative: 0.010-0.019 s lie above 8 ms and
	// at or below 22.6 ms.
	for _, b := range h.GetBucket() {
		le, n := b.GetUpperBound(), b.GetCumulativeCount()
		if le < 0.010 && n != 0 || le >= 0.019 && n != 10 {
			t.Errorf("bucket le=%v: %d steps", le, n)
		}
	}
	if h := series(fams, "gpuprof_step_wall_seconds", p100).GetHistogram(); h.GetSampleCount() != 10 || !near(h.GetSampleSum(), wallSum) {
		t.Errorf("gpuprof_step_wall_seconds: count %d sum %v, want 10, %v", h.GetSampleCount(), h.GetSampleSum(), wallSum)
	}
	for phase, want := range map[string]uint64{"data": 10, "compute": 10, "dispatch_wait": 10, "sync": 10} {
		if n := series(fams, "gpuprof_phase_seconds", with(p100, "phase", phase)).GetHistogram().GetSampleCount(); n != want {
			t.Errorf("phase %s pid 100: %d observations, want %d", phase, n, want)
		}
	}
	// The bare process measured only its sync time.
	for _, phase := range []string{"data", "compute", "dispatch_wait"} {
		if m := series(fams, "gpuprof_phase_seconds", with(p200, "phase", phase)); m != nil {
			t.Errorf("phase %s of a process that never measured it: %v", phase, m)
		}
	}
	if h := series(fams, "gpuprof_phase_seconds", with(p200, "phase", "sync")).GetHistogram(); h.GetSampleCount() != 2 || !near(h.GetSampleSum(), 0.2) {
		t.Errorf("sync phase pid 200: %v", h)
	}

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gpuprof_steps_total", with(p100, "verdict", "gpu_compute"), 10},
		{"gpuprof_steps_total", with(p200, "verdict", "unknown"), 2},
		{"gpuprof_compute_source_steps_total", with(p100, "source", "cuda_events"), 10},
		{"gpuprof_compute_source_steps_total", with(p200, "source", "none"), 2},
		{"gpuprof_kernel_launches_total", with(p100, "thread", "step"), launches},
		{"gpuprof_kernel_launches_total", with(p100, "thread", "other"), others},
		{"gpuprof_graph_launches_total", p100, graphs},
		{"gpuprof_counted_steps_total", with(p100, "counts", "launches"), 5},
		{"gpuprof_counted_wall_seconds_total", with(p100, "counts", "launches"), countedWall},
		{"gpuprof_counted_steps_total", with(p100, "counts", "waits"), 10},
		{"gpuprof_counted_steps_total", with(p100, "counts", "wait_kinds"), 7},
		{"gpuprof_copy_bytes_total", with(p100, "direction", "h2d"), 10 << 20},
		{"gpuprof_copy_bytes_total", with(p100, "direction", "d2h"), 10 * 4096},
		{"gpuprof_copy_bytes_total", with(p100, "direction", "d2d"), d2d},
		{"gpuprof_copy_bytes_total", with(p100, "direction", "other"), 1000},
		{"gpuprof_copy_bytes_total", with(p200, "direction", "h2d"), 20},
		{"gpuprof_wait_seconds_total", with(p100, "kind", "dispatch"), 10 * 0.002},
		{"gpuprof_wait_seconds_total", with(p100, "kind", "lock"), lock},
		{"gpuprof_wait_seconds_total", with(p100, "kind", "gil"), 7 * 0.0003},
		{"gpuprof_pool_takes_total", p100, 10 * 32},
		{"gpuprof_pool_items", p100, 9}, // the latest step's
		{"gpuprof_inference_capacity_samples_per_second", p100, 900},
		{"gpuprof_train_capacity_samples_per_second", p100, 1800},
		{"gpuprof_throughput_samples_per_second", p100, 1600},
	} {
		if got := value(fams, c.name, c.labels); !near(got, c.want) {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Where a process never had a number, there is no series, not a 0.
	for _, name := range []string{"gpuprof_kernel_launches_total", "gpuprof_graph_launches_total", "gpuprof_wait_seconds_total",
		"gpuprof_pool_takes_total", "gpuprof_pool_items", "gpuprof_inference_capacity_samples_per_second",
		"gpuprof_train_capacity_samples_per_second", "gpuprof_throughput_samples_per_second", "gpuprof_counted_steps_total"} {
		if m := series(fams, name, map[string]string{"pid": "200"}); m != nil {
			t.Errorf("%s for a process that never counted it: %v", name, m)
		}
	}
	if got := value(fams, "gpuprof_copy_bytes_total", with(p200, "direction", "d2d")); !math.IsNaN(got) {
		t.Errorf("d2d bytes of a process whose launches were never counted: %v", got)
	}
}

// allowedLabels are the label names gpuprof's own series may carry, each
// with a bounded set of values.
var allowedLabels = map[string]bool{"pid": true, "rank": true, "phase": true, "verdict": true, "source": true, "counts": true,
	"thread": true, "direction": true, "kind": true, "le": true, "reason": true, "type": true, "outcome": true,
	"version": true, "goversion": true}

// TestLabelsBounded: a thousand steps of two processes, each with its own
// index, times and kernels, make no more series than one step of each
// with every label value: nothing is labelled per step.
func TestLabelsBounded(t *testing.T) {
	e, err := New(Config{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		for name, mf := range gather(t, e) {
			if !strings.HasPrefix(name, "gpuprof_") {
				continue
			}
			for _, m := range mf.GetMetric() {
				n++
				for _, l := range m.GetLabel() {
					if !allowedLabels[l.GetName()] {
						t.Fatalf("%s: label %s=%q is not one of the bounded ones", name, l.GetName(), l.GetValue())
					}
				}
			}
		}
		return n
	}
	// Each verdict once per process: every label value a step can give.
	verdicts := []correlate.Step{
		{WallTime: 1, DispatchWait: 0.5, WaitsObserved: true},
		{WallTime: 1, DataTime: 0.5, DataMeasured: true, ComputeTime: 0.1, ComputeSource: correlate.ComputeDerived},
		{WallTime: 1, DataTime: 0.1, DataMeasured: true, ComputeTime: 0.5, ComputeSource: correlate.ComputeProbe},
		{WallTime: 1, DataTime: 0.3, DataMeasured: true, ComputeTime: 0.3, ComputeSource: correlate.ComputeEvents},
		{WallTime: 1},
	}
	for _, pid := range []uint32{1, 2} {
		s := fullStep(pid, int(pid))
		e.Step(s)
		for _, v := range verdicts {
			v.PID, v.Rank = pid, s.Rank
			e.Step(v)
		}
	}
	before := count()
	for i := range 1000 {
		s := fullStep(uint32(1+i%2), 1+i%2)
		s.Index, s.StepTime, s.Launches = i, float64(i)*1e-3, i
		e.Step(s)
	}
	if after := count(); after != before {
		t.Errorf("series grew with steps: %d -> %d", before, after)
	}
	for _, c := range []struct{ label, values string }{
		{"verdict", "balanced data_loading gpu_compute inference unknown"},
		{"phase", "compute data dispatch_wait sync"},
		{"kind", "data dispatch full gil io lock"},
		{"direction", "d2d d2h h2d other"},
		{"source", "cuda_events derived none probe"},
	} {
		seen := map[string]bool{}
		for _, mf := range gather(t, e) {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == c.label {
						seen[l.GetValue()] = true
					}
				}
			}
		}
		got := slices.Sorted(maps.Keys(seen))
		if strings.Join(got, " ") != c.values {
			t.Errorf("label %s takes %q, want %q", c.label, got, c.values)
		}
	}
}
