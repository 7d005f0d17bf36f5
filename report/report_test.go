package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

func TestLine(t *testing.T) {
	s := correlate.Step{Index: 812, StepTime: 0.0186, ComputeTime: 0.00291, ComputeSource: correlate.ComputeEvents,
		SyncTime: 0.0021, LaunchesCounted: true, Launches: 27, H2DBytes: 16 << 20, D2HBytes: 4}
	got := Line(s, 53.7)
	want := "step 812 | step 18.6ms compute 2.91ms (events) sync 2.10ms | 27 launches h2d 16.0MiB d2h 4B | 53.7 steps/s"
	if got != want {
		t.Errorf("Line =\n%q\nwant\n%q", got, want)
	}
	s.LaunchesCounted, s.ComputeSource = false, correlate.ComputeNone
	if got := Line(s, 0); strings.Contains(got, "launches") || strings.Contains(got, "compute") {
		t.Errorf("uncounted launches or absent compute shown: %q", got)
	}
	// An estimated data time says so.
	s.DataTime, s.DataMeasured, s.DataSource = 0.0151, true, correlate.DataCalibrated
	if got := Line(s, 0); !strings.Contains(got, " data ~15.1ms ") {
		t.Errorf("estimated data time not marked: %q", got)
	}
	s.DataSource = correlate.DataLaunches
	if got := Line(s, 0); !strings.Contains(got, " data 15.1ms ") {
		t.Errorf("measured data time: %q", got)
	}
}

func TestUnits(t *testing.T) {
	for s, want := range map[float64]string{12.3: "12.3s", 1.5: "1.50s", 0.0186: "18.6ms", 0.00291: "2.91ms", 412e-6: "412µs", 3e-8: "30ns", 0: "0"} {
		if got := Duration(s); got != want {
			t.Errorf("Duration(%g) = %s, want %s", s, got, want)
		}
	}
	for n, want := range map[float64]string{4: "4B", 2048: "2.0KiB", 16 << 20: "16.0MiB", 3 << 30: "3.0GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%g) = %s, want %s", n, got, want)
		}
	}
}

func TestJSONLOmitsWhatWasNotMeasured(t *testing.T) {
	path := filepath.Join(t.TempDir(), "steps.jsonl")
	j, err := CreateJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	j.Write(correlate.Step{Index: 0, StepTime: 0.01, ComputeTime: 0.006, ComputeSource: correlate.ComputeEvents, LaunchesCounted: true, Launches: 40})
	j.Write(correlate.Step{Index: 1, StepTime: 0.01, Launches: 0})
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var first, second map[string]any
	json.Unmarshal([]byte(lines[0]), &first)
	json.Unmarshal([]byte(lines[1]), &second)
	if first["compute_time"] != 0.006 || first["launches"] != 40.0 || first["step_time"] != 0.01 {
		t.Errorf("first step %v", first)
	}
	if _, ok := second["compute_time"]; ok {
		t.Errorf("compute_time written though nothing measured it: %v", second)
	}
	if _, ok := second["launches"]; ok {
		t.Errorf("launches written though not counted: %v", second)
	}
}

func TestSummary(t *testing.T) {
	c, _ := correlate.New(correlate.Config{})
	var b bytes.Buffer
	WriteSummary(&b, Summary{Target: "PID 1", Attached: 2, Run: c.Summary(), LaunchSampling: "1 s in every 10 s"})
	WriteLoss(&b, Loss{Delivered: 10, RingbufFull: 2})
	out := b.String()
	if strings.Contains(out, "--step-boundary") || strings.Contains(out, "launches counted") {
		t.Errorf("a process with no CUDA call is told to name a boundary, or of launch sampling:\n%s", out)
	}
	for _, want := range []string{"PID 1", "0 steps", "none: this process made no CUDA call", "2 lost (ring buffer full 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}

	// CUDA calls but no step found: the user can name the boundary.
	sync, _ := cudaapi.ByName("cudaStreamSynchronize")
	e := events.Event{Kind: events.KindCall, API: sync.ID, PID: 1, TID: 1, Start: 1e9, End: 1e9 + 1e6}
	c.Add(&e)
	b.Reset()
	WriteSummary(&b, Summary{Target: "PID 1", Attached: 2, Run: c.Summary()})
	if out := b.String(); !strings.Contains(out, "not found") || !strings.Contains(out, "--step-boundary") {
		t.Errorf("no step found among CUDA calls, and no hint to name the boundary:\n%s", out)
	}
	if strings.Contains(b.String(), "event records") {
		t.Errorf("records said narrowed where they were not:\n%s", b.String())
	}

	// Records probed at their readers' call sites only: the calls counted
	// leave the others out, and the summary says so.
	for sites, want := range map[int]string{1: "event records probed at 1 call site(s)", 0: "event records not probed once steps were found"} {
		b.Reset()
		WriteSummary(&b, Summary{Target: "PID 1", Attached: 2, Run: c.Summary(), RecordsNarrowed: true, RecordSites: sites})
		if !strings.Contains(b.String(), want) {
			t.Errorf("%d sites: summary lacks %q:\n%s", sites, want, b.String())
		}
	}
}

// TestLiveFollowsTraining: with engine processes' steps (none taking
// samples) among a trainer's, the line shows the trainer's, each process
// at its own step rate.
func TestLiveFollowsTraining(t *testing.T) {
	var b bytes.Buffer
	l := NewLive(&b, false)
	l.Interval, l.ShowPID = 0, true
	for i := range 10 {
		at := uint64(i+1) * 20e6
		l.Step(correlate.Step{Index: i, PID: 2, EndNS: at, SamplesMeasured: true})                 // an engine, 50 a second
		l.Step(correlate.Step{Index: i, PID: 1, EndNS: 2 * at, SamplesMeasured: true, Samples: 4}) // the trainer, 25 a second
	}
	out := b.String()
	if n := strings.Count(out, "PID 2 "); n != 1 {
		t.Errorf("%d engine lines, want only the one before the trainer's first step:\n%s", n, out)
	}
	if !strings.Contains(out, "PID 1 step 9 ") || !strings.Contains(out, "25.0 steps/s") {
		t.Errorf("the trainer's line or its own rate missing:\n%s", out)
	}
	if !strings.Contains(out, "I=50.0/s") {
		t.Errorf("no I from the engine process's iterations:\n%s", out)
	}
}

// TestLiveShowsTheLatestStepAtEnd: off a terminal, a line at most each
// Interval; the steps between are formatted only if one is due, and End
// shows the latest of them.
func TestLiveShowsTheLatestStepAtEnd(t *testing.T) {
	var b bytes.Buffer
	l := NewLive(&b, false)
	l.Interval = time.Hour
	for i := range 5 {
		l.Step(correlate.Step{Index: i, PID: 1, EndNS: uint64(i+1) * 1e7})
	}
	if out := b.String(); strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "step 0 ") {
		t.Fatalf("before End: want step 0's line alone:\n%s", out)
	}
	l.End()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "step 4 ") || !strings.HasSuffix(lines[1], "| 100.0 steps/s") {
		t.Errorf("after End: want step 4's line at its rate last:\n%s", b.String())
	}
}

// TestStragglerNamedOnlyWhenSlow: ranks in lockstep within a few percent of
// each other's own work have no straggler; one 30% over is named.
func TestStragglerNamedOnlyWhenSlow(t *testing.T) {
	j := correlate.Job{Lockstep: true, Slowest: 11, Processes: []correlate.ProcessPace{
		{PID: 10, Rank: 0, Ranked: true}, {PID: 11, Rank: 1, Ranked: true}}}
	for _, c := range []struct {
		skew float64
		want string
	}{
		{0.004, "no straggler: the most work of its own a step (rank 1 (PID 11)) is 0.4% over the others' median, under 5%"},
		{0.30, "straggler: rank 1 (PID 11), 30% more work of its own a step"},
	} {
		j.Skew = c.skew
		var b strings.Builder
		WriteJob(&b, j)
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("skew %.3f:\n%s\nwant %q", c.skew, b.String(), c.want)
		}
	}
}

func TestJSONLGraphKernels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "steps.jsonl")
	j, err := CreateJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	counted := correlate.Step{LaunchesCounted: true, GraphKernelsKnown: true}
	capture, replay, unknown, eager := counted, counted, counted, counted
	capture.GraphLaunches, capture.GraphKernels, capture.CapturedLaunches = 1, 40, 40
	replay.GraphLaunches, replay.GraphKernels = 1, 40
	unknown.GraphLaunches, unknown.GraphKernelsKnown = 1, false
	eager.Launches = 40
	for _, s := range []correlate.Step{capture, replay, unknown, eager} {
		j.Write(s)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(line), &m)
		got = append(got, fmt.Sprintf("%v/%v/%v", m["graph_launches"], m["graph_kernels"], m["captured_launches"]))
	}
	want := []string{"1/40/40", "1/40/<nil>", "1/<nil>/<nil>", "0/<nil>/<nil>"}
	if !slices.Equal(got, want) {
		t.Errorf("graph_launches/graph_kernels/captured_launches = %v, want %v", got, want)
	}
}

func TestSummarySaysWhyGraphKernelsAreUnknown(t *testing.T) {
	run := correlate.SummarizeSteps([]correlate.Step{
		{LaunchesCounted: true, GraphLaunches: 1, GraphKernels: 40, GraphKernelsKnown: true, CapturedLaunches: 40},
		{LaunchesCounted: true, GraphLaunches: 1},
	})
	var b bytes.Buffer
	WriteSummary(&b, Summary{Target: "PID 1", Attached: 2, Run: run})
	for _, want := range []string{"graph kernels/step", "not known in 1 of 2 steps with graph launches: their graphs were captured before attach or while launches were not counted", "captured launches: 40"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

// BenchmarkLiveStep: a step handed to the live view off a terminal (a
// line a second) and under --quiet, at a step's usual fields.
func BenchmarkLiveStep(b *testing.B) {
	step := correlate.Step{Index: 812, PID: 1, StepTime: 0.0186, DataMeasured: true, DataTime: 0.0151,
		ComputeSource: correlate.ComputeEvents, ComputeTime: 0.00291, SyncTime: 0.0021, WaitsObserved: true,
		LaunchesCounted: true, Launches: 51, H2DBytes: 16 << 20, D2HBytes: 4}
	for _, c := range []struct {
		name string
		w    io.Writer
	}{{"log", &bytes.Buffer{}}, {"quiet", io.Discard}} {
		b.Run(c.name, func(b *testing.B) {
			l := NewLive(c.w, false)
			b.ReportAllocs()
			for i := range b.N {
				step.Index, step.EndNS = i, uint64(i+1)*18_600_000
				l.Step(step)
			}
		})
	}
}
