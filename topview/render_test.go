package topview

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// demoLike is one process stepping like the demo trainer (2 ms data,
// 6 ms compute, 2 ms sync), on a GPU NVML samples, with notes.
func demoLike() *Model {
	m := fixed()
	trainer(m, 4242, nil, 30, 0, 6*ms)
	m.Targets([]int{4242})
	m.Processes(1)
	m.Event(&events.Event{Kind: events.KindGPUSamples, GPUs: []events.GPUSample{gpuSample(0)}})
	m.GPUs([]events.GPU{{Index: 0, Name: "NVIDIA H200"}})
	m.Note("PID 4242: attached 40 probes to libcudart.so (runtime)")
	m.Note("step boundary found")
	return m
}

// twoRanks is ranks 0 and 1, rank 1's compute 8 ms a step to rank 0's 6.
func twoRanks() *Model {
	m := fixed()
	zero, one := 0, 1
	trainer(m, 4242, &zero, 30, 0, 6*ms)
	trainer(m, 4243, &one, 30, 0, 8*ms)
	m.Targets([]int{4243, 4242})
	m.Processes(2)
	m.Lost(12)
	m.Event(&events.Event{Kind: events.KindGPUSamples, GPUs: []events.GPUSample{gpuSample(0), gpuSample(1)}})
	m.Note("first note")
	m.Note("second note")
	return m
}

// render checks the screen fits and returns its text.
func render(t *testing.T, m *Model, width, height int) []string {
	t.Helper()
	lines := m.Render(width, height)
	if len(lines) > height {
		t.Fatalf("%dx%d: %d lines", width, height, len(lines))
	}
	var out []string
	for _, l := range lines {
		if n := utf8.RuneCountInString(l.Text); n > width {
			t.Fatalf("%dx%d: line of %d runes: %q", width, height, n, l.Text)
		}
		out = append(out, l.Text)
	}
	return out
}

// find is the first line holding s, -1 if none.
func find(lines []string, s string) int {
	return slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, s) })
}

func wantLines(t *testing.T, lines []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if find(lines, w) < 0 {
			t.Errorf("no line holds %q:\n%s", w, strings.Join(lines, "\n"))
		}
	}
}

func noLines(t *testing.T, lines []string, not ...string) {
	t.Helper()
	for _, w := range not {
		if i := find(lines, w); i >= 0 {
			t.Errorf("line %d holds %q, want none:\n%s", i, w, strings.Join(lines, "\n"))
		}
	}
}

// stepRows are the step numbers of the steps table's rows.
func stepRows(t *testing.T, lines []string) []int {
	t.Helper()
	i := find(lines, "LAST STEPS")
	if i < 0 || i+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "step") {
		t.Fatalf("no steps table:\n%s", strings.Join(lines, "\n"))
	}
	var steps []int
	for _, l := range lines[i+2:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			break
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			break
		}
		steps = append(steps, n)
	}
	return steps
}

var bar = regexp.MustCompile(`^\s*\[(D+)(C+)(S+)\]$`)

func TestRender80x24(t *testing.T) {
	lines := render(t, demoLike(), 80, 24)
	if len(lines) != 24 {
		t.Errorf("%d lines, want the 24 rows filled", len(lines))
	}
	if !strings.HasPrefix(lines[0], "gpuprof top  PID 4242  attached 1m5s  30 steps") || !strings.HasSuffix(lines[0], "q quits") {
		t.Errorf("header %q", lines[0])
	}
	wantLines(t, lines, "bottleneck: training: GPU compute",
		"  because  dispatch_wait median 0.00ms, 0% of a step's 10.00ms",
		"over the last 30 steps, each step bound by: gpu_compute 100%",
		"PID 4242 step 29  10.0ms:  data 2.00ms 20%  compute 6.00ms 60%  sync 2.00ms 20%",
		"note: step boundary found")
	// The bar: 2, 6 and 2 ms of 10 in 76 cells.
	i := slices.IndexFunc(lines, bar.MatchString)
	if i < 0 {
		t.Fatalf("no phase bar:\n%s", strings.Join(lines, "\n"))
	}
	m := bar.FindStringSubmatch(lines[i])
	if d, c, s := len(m[1]), len(m[2]), len(m[3]); d+c+s != 76 || c < 45 || c > 46 || d < 15 || d > 16 || s < 15 || s > 16 {
		t.Errorf("bar %q: %d data, %d compute, %d sync cells, want 76 in 20/60/20", lines[i], d, c, s)
	}
	if got, want := stepRows(t, lines), []int{20, 21, 22, 23, 24, 25, 26, 27, 28, 29}; !slices.Equal(got, want) {
		t.Errorf("steps table rows %v, want %v", got, want)
	}
	cols := strings.Fields(lines[find(lines, "LAST STEPS")+1])
	if want := []string{"step", "wall", "step_time", "dispatch_wait", "data", "compute", "sync", "bound"}; !slices.Equal(cols, want) {
		t.Errorf("80 columns: steps table columns %v, want %v", cols, want)
	}
	wantLines(t, lines, "    20  10.0ms     10.0ms              0  2.00ms   6.00ms  2.00ms  gpu_compute")
	// The GPU: what NVML read, SM activity not read ("-", not 0).
	g := find(lines, "GPUS (NVML")
	if g < 0 || g+2 >= len(lines) {
		t.Fatalf("no GPU table:\n%s", strings.Join(lines, "\n"))
	}
	if got := strings.Fields(lines[g+2]); !slices.Equal(got, []string{"0", "50%", "-", "300/700", "W", "70.0GiB/140.0GiB", "64C", "software", "power", "cap"}) {
		t.Errorf("GPU row %q", lines[g+2])
	}
}

func TestRender120x40(t *testing.T) {
	lines := render(t, twoRanks(), 120, 40)
	if !strings.HasPrefix(lines[0], "gpuprof top  PID 4242, 4243  attached 1m5s  60 steps  2 processes  12 events lost") {
		t.Errorf("header %q", lines[0])
	}
	wantLines(t, lines,
		"bottleneck: training: GPU compute (the slowest's: rank 1, 20% longer a step than the fastest)",
		"over the last 60 steps, each step bound by: gpu_compute 100%",
		"rank 0 step 29  10.0ms:  data 2.00ms 20%  compute 6.00ms 60%  sync 2.00ms 20%",
		"rank 1 step 29  12.0ms:  data 2.00ms 17%  compute 8.00ms 67%  sync 2.00ms 17%",
		"PROCESSES",
		"  rank 0  4242     30    100.0     10.0ms              0  2.00ms   6.00ms  2.00ms  training: GPU compute",
		"  rank 1  4243     30     83.3     12.0ms              0  2.00ms   8.00ms  2.00ms  training: GPU compute",
		"    1  -      50%          -    300/700 W   70.0GiB/140.0GiB   64C  1980 MHz  software power cap",
		"note: first note", "note: second note")
	for _, r := range []string{"rank 0 [", "rank 1 ["} {
		if i := find(lines, r); i < 0 || !bar.MatchString(strings.TrimPrefix(lines[i], r[:len(r)-1])) {
			t.Errorf("no bar for %s:\n%s", r, strings.Join(lines, "\n"))
		}
	}
	cols := strings.Fields(lines[find(lines, "LAST STEPS")+1])
	if want := []string{"step", "proc", "wall", "step_time", "dispatch_wait", "data", "compute", "sync", "launches", "pool", "bound"}; !slices.Equal(cols, want) {
		t.Errorf("120 columns: steps table columns %v, want all, %v", cols, want)
	}
	if n := len(stepRows(t, lines)); n != lastSteps {
		t.Errorf("%d step rows, want %d", n, lastSteps)
	}
	if find(lines, "") < 0 {
		t.Errorf("no blank line between sections at 40 rows:\n%s", strings.Join(lines, "\n"))
	}
}

func TestRender40x10(t *testing.T) {
	lines := render(t, twoRanks(), 40, 10)
	if len(lines) != 10 || !strings.HasPrefix(lines[0], "gpuprof top  PID 4242, 4243") {
		t.Fatalf("%d lines, header %q", len(lines), lines[0])
	}
	// Kept: the bottleneck, each rank's bar, the last steps; dropped:
	// the tables of processes and GPUs, the notes.
	wantLines(t, lines, "bottleneck: training: GPU compute", "rank 0 [D", "rank 1 [D", "LAST STEPS")
	noLines(t, lines, "PROCESSES", "GPUS", "note:")
	if got := stepRows(t, lines); len(got) < minSteps {
		t.Errorf("step rows %v, want at least %d", got, minSteps)
	}
	cols := strings.Fields(lines[find(lines, "LAST STEPS")+1])
	if want := []string{"step", "proc", "wall", "step_time"}; !slices.Equal(cols, want) {
		t.Errorf("40 columns: steps table columns %v, want %v", cols, want)
	}
}

func TestRender1x1(t *testing.T) {
	for _, m := range []*Model{demoLike(), twoRanks(), fixed()} {
		if got := render(t, m, 1, 1); !slices.Equal(got, []string{"g"}) {
			t.Errorf("1x1: %q", got)
		}
		if got := m.Render(0, 0); got != nil {
			t.Errorf("0x0: %v", got)
		}
	}
}

// TestRenderAnySize: no size breaks the layout.
func TestRenderAnySize(t *testing.T) {
	for _, m := range []*Model{demoLike(), twoRanks(), fixed()} {
		for w := 1; w <= 130; w += 3 {
			for h := 1; h <= 45; h += 2 {
				lines := render(t, m, w, h)
				if len(lines) == 0 || !strings.HasPrefix("gpuprof top", lines[0][:min(len(lines[0]), 11)]) {
					t.Fatalf("%dx%d: first line %q, want the header", w, h, lines)
				}
			}
		}
	}
}

func TestRenderBeforeSteps(t *testing.T) {
	m := fixed()
	m.Note("waiting for PID 4242 to load a CUDA library (libcudart.so or libcuda.so.1); Ctrl-C to stop")
	lines := render(t, m, 80, 24)
	wantLines(t, lines, "gpuprof top  attached 1m5s  0 steps", "no steps yet", "note: waiting for PID 4242 to load a CUDA library")
	noLines(t, lines, "bottleneck", "LAST STEPS", "GPUS")
	// On a short terminal the note outlives the rest: it says what
	// gpuprof waits for.
	if lines := render(t, m, 80, 2); !strings.HasPrefix(lines[1], "note: waiting") {
		t.Errorf("80x2: %q", lines)
	}
}

// TestStepsTableUnknowns: what a step did not measure is "-", never 0;
// a calibrated data time is marked "~".
func TestStepsTableUnknowns(t *testing.T) {
	m := fixed()
	s := step(9, nil, 1, 10*ms, 2*ms, 6*ms, 2*ms)
	s.WaitsObserved, s.LaunchesCounted, s.PoolMeasured = false, false, false
	s.DataSource = "calibrated"
	m.Step(s)
	s = step(9, nil, 2, 20*ms, 2*ms, 6*ms, 2*ms)
	s.DataMeasured, s.ComputeSource = false, ""
	m.Step(s)
	lines := render(t, m, 120, 40)
	wantLines(t, lines, "     1  PID 9  10.0ms     10.0ms              -  ~2.00ms   6.00ms  2.00ms         -     -  gpu_compute",
		"     2  PID 9  10.0ms     10.0ms              0        -        -  2.00ms        40     3  unknown")
}

func TestLaunchesTextCountsGraphKernels(t *testing.T) {
	for _, c := range []struct {
		s    correlate.Step
		want string
	}{
		{correlate.Step{LaunchesCounted: true, Launches: 40}, "40"},
		{correlate.Step{LaunchesCounted: true, GraphLaunches: 1, GraphKernels: 40, GraphKernelsKnown: true}, "40"},
		{correlate.Step{LaunchesCounted: true, Launches: 2, GraphLaunches: 1}, "2+1g"},
		{correlate.Step{LaunchesCounted: true, GraphLaunches: 3}, "3g"},
		{correlate.Step{Launches: 40}, "-"},
	} {
		if got := launchesText(c.s); got != c.want {
			t.Errorf("launchesText(%+v) = %q, want %q", c.s, got, c.want)
		}
	}
}
