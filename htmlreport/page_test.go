package htmlreport

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/replaytest"
)

const (
	dataBound = "../testdata/traces/h200-spec-pipeline/data.trace.jsonl.gz"
	slowRank1 = "../testdata/traces/h200x2-ranks/engine-ddp-two-ranks-slow-rank1.trace.jsonl.gz"
)

// mark is a plotted element that carries its data.
type mark struct {
	elem  string
	attrs map[string]string
}

func (m mark) int(k string) int {
	v, err := strconv.Atoi(m.attrs[k])
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", k, m.attrs[k], err))
	}
	return v
}

func (m mark) float(k string) float64 {
	v, err := strconv.ParseFloat(m.attrs[k], 64)
	if err != nil {
		panic(fmt.Sprintf("%s=%q: %v", k, m.attrs[k], err))
	}
	return v
}

var nanOrInf = regexp.MustCompile(`\b(NaN|[+-]?Inf)\b`)

var plotStart = regexp.MustCompile(`<svg class="(plot|shares)[^"]*"`)

// plotMarks parses each plot of the page as XML (SVG drawn here is well
// formed) and returns its marks, keyed by the plot's figure id.
func plotMarks(t *testing.T, page string) map[string][]mark {
	t.Helper()
	out := map[string][]mark{}
	for _, loc := range plotStart.FindAllStringIndex(page, -1) {
		end := strings.Index(page[loc[0]:], "</svg>")
		if end < 0 {
			t.Fatalf("a plot at %d is not closed", loc[0])
		}
		frag := page[loc[0] : loc[0]+end+len("</svg>")]
		id := "shares"
		if fig := strings.LastIndex(page[:loc[0]], `<figure class="chart" id="`); fig >= 0 && !strings.HasPrefix(frag, `<svg class="shares`) {
			rest := page[fig+len(`<figure class="chart" id="`):]
			id = rest[:strings.IndexByte(rest, '"')]
		}
		if strings.HasPrefix(frag, `<svg class="plot ranks"`) {
			id = "ranks"
		}
		d := xml.NewDecoder(strings.NewReader(frag))
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("plot %s is not well-formed SVG: %v", id, err)
			}
			se, ok := tok.(xml.StartElement)
			if !ok {
				continue
			}
			m := mark{elem: se.Name.Local, attrs: map[string]string{}}
			for _, a := range se.Attr {
				m.attrs[a.Name.Local] = a.Value
			}
			if _, ok := m.attrs["data-field"]; ok {
				out[id] = append(out[id], m)
			}
		}
	}
	return out
}

// stepValue is a step's value of a plotted field, from the step's own
// fields (not the collector's).
func stepValue(st *correlate.Step, field string) (float64, bool) {
	for _, p := range []correlate.Phase{correlate.PhaseCompute, correlate.PhaseSync, correlate.PhaseData, correlate.PhaseOther} {
		if field == string(p) {
			return st.PhaseTime(p), true
		}
	}
	switch field {
	case "dispatch wait":
		return st.PhaseTime(correlate.PhaseDispatchWait), true
	case "pool":
		return float64(st.Pool), st.PoolMeasured
	case "samples":
		return float64(st.Samples), st.SamplesMeasured
	case "train_capacity":
		return st.TrainCapacity, st.TrainCapacity > 0
	case "infer_capacity":
		return st.InferCapacity, st.InferCapacity > 0
	case "thru":
		return st.Thru, st.Thru > 0
	}
	bound := map[string]correlate.Bound{"GPU compute": correlate.BoundCompute, "data loading": correlate.BoundData,
		"inference": correlate.BoundInference, "balanced": correlate.BoundBalanced}
	if b, ok := bound[field]; ok {
		if correlate.StepBound(*st) == b {
			return 1, true
		}
		return 0, true
	}
	panic("no field " + field)
}

// checkStepMarks holds each step mark to the mean of its steps' values.
func checkStepMarks(t *testing.T, id string, marks []mark, steps []correlate.Step) int {
	t.Helper()
	checked := 0
	for _, m := range marks {
		pid, field := uint32(m.int("data-pid")), m.attrs["data-field"]
		first, last := m.int("data-first"), m.int("data-last")
		sum, n, items := 0.0, 0, 0
		for i := range steps {
			st := &steps[i]
			if st.PID != pid || st.Index < first || st.Index > last {
				continue
			}
			items++
			if v, ok := stepValue(st, field); ok {
				sum, n = sum+v, n+1
			}
		}
		if items != m.int("data-n") {
			t.Fatalf("%s: a %s mark says steps %d-%d of PID %d are %s, the trace has %d", id, field, first, last, pid, m.attrs["data-n"], items)
		}
		want := sum / float64(n)
		if got := m.float("data-mean"); n == 0 || math.Abs(got-want) > 1e-9+1e-6*math.Abs(want) {
			t.Fatalf("%s: %s of PID %d steps %d-%d plotted as %v, the steps' mean is %v (%d of them)", id, field, pid, first, last, got, want, n)
		}
		checked++
	}
	return checked
}

func renderTrace(t *testing.T, path string) (string, []correlate.Step, []events.GPUSample) {
	t.Helper()
	c := NewCollector()
	var samples []events.GPUSample
	_, steps, loop := replaytest.Run(t, path, func(e *events.Event) {
		c.Event(e)
		if e.Kind == events.KindGPUSamples {
			samples = append(samples, e.GPUs...)
		}
	}, c)
	r := Report{Title: "test", Source: path, Version: "test"}
	for _, run := range loop.Runs() {
		r.Processes = append(r.Processes, Process{PID: run.PID, Rank: run.Rank, Ranked: run.Ranked, Run: run.Run,
			Engine: correlate.EngineProcess(run.Run)})
	}
	var b bytes.Buffer
	if err := Write(&b, r, c); err != nil {
		t.Fatal(err)
	}
	return b.String(), steps, samples
}

// The page of a recorded data-bound run plots its steps as they were: each
// column the mean of the steps it names, phase by phase; its verdict is the
// run's.
func TestPageHoldsTheSteps(t *testing.T) {
	page, steps, samples := renderTrace(t, dataBound)
	if len(steps) < 100 {
		t.Fatalf("%d steps replayed", len(steps))
	}
	if nanOrInf.MatchString(page) {
		t.Error("the page holds a NaN or Inf")
	}
	marks := plotMarks(t, page)
	pid := steps[0].PID
	total := 0
	for id, ms := range marks {
		switch {
		case strings.HasPrefix(id, "gpu-"):
			total += checkGPUMarks(t, id, ms, samples)
		case id == "shares":
		default:
			total += checkStepMarks(t, id, ms, steps)
		}
	}
	breakdown := marks[fmt.Sprintf("breakdown-pid%d", pid)]
	if len(breakdown) < len(steps) {
		// Fewer steps than maxBins: a column a step, each phase it had.
		t.Errorf("%d marks in the step breakdown of %d steps", len(breakdown), len(steps))
	}
	for _, id := range []string{"bound-pid%d", "pool-pid%d"} {
		if len(marks[fmt.Sprintf(id, pid)]) == 0 {
			t.Errorf("no %s plot", fmt.Sprintf(id, pid))
		}
	}
	t.Logf("%d marks checked against %d steps and %d GPU samples; page %d bytes", total, len(steps), len(samples), len(page))

	// The share bar is the steps' phases over their wall time.
	var wall float64
	byPhase := map[string]float64{}
	for i := range steps {
		if steps[i].PID != pid {
			continue
		}
		wall += steps[i].WallTime
		for _, p := range steps[i].Phases {
			byPhase[string(p.Phase)] += float64(p.EndNS-p.StartNS) / 1e9
		}
	}
	sum := 0.0
	for _, m := range marks["shares"] {
		name := m.attrs["data-field"]
		if name == "dispatch wait" {
			name = string(correlate.PhaseDispatchWait)
		}
		want := byPhase[name] / wall
		if got := m.float("data-share"); math.Abs(got-want) > 1e-4 {
			t.Errorf("share of %s %v, want %v", name, got, want)
		}
		sum += m.float("data-share")
	}
	if math.Abs(sum-1) > 1e-3 {
		t.Errorf("shares sum to %v", sum)
	}
	if !strings.Contains(page, "Bottleneck:</span> training: data loading") {
		t.Errorf("the headline does not say data loading: %s", headlineOf(page))
	}
}

func headlineOf(page string) string {
	i := strings.Index(page, "<h1>")
	if i < 0 {
		return "(no h1)"
	}
	return page[i:min(len(page), i+300)]
}

// checkGPUMarks holds each GPU point to the mean of its samples.
func checkGPUMarks(t *testing.T, id string, marks []mark, samples []events.GPUSample) int {
	t.Helper()
	value := map[string]func(s *events.GPUSample) float64{
		"gpu_util":  func(s *events.GPUSample) float64 { return s.GPUUtil },
		"sm_active": func(s *events.GPUSample) float64 { return 100 * s.SMActive },
		"power":     func(s *events.GPUSample) float64 { return s.PowerW },
	}
	for _, m := range marks {
		gpu, field := m.int("data-pid"), m.attrs["data-field"]
		first, last := m.int("data-first"), m.int("data-last")
		k, sum, n := 0, 0.0, 0
		for i := range samples {
			s := &samples[i]
			if s.GPU != gpu {
				continue
			}
			if k >= first && k <= last {
				if v := value[field](s); events.Has(v) {
					sum, n = sum+v, n+1
				}
			}
			k++
		}
		if got, want := m.float("data-mean"), sum/float64(n); n == 0 || math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Fatalf("%s: GPU %d samples %d-%d plotted as %v, their mean is %v", id, gpu, first, last, got, want)
		}
	}
	return len(marks)
}

// The page of a two-rank job leads with its straggler, and compares the
// ranks side by side.
func TestPageOfAJob(t *testing.T) {
	page, steps, samples := renderTrace(t, slowRank1)
	marks := plotMarks(t, page)
	if len(marks["gpu-gpu_util"]) == 0 || len(marks["gpu-power"]) == 0 || len(marks["gpu-sm_active"]) == 0 {
		t.Errorf("no GPU plots: %d samples in the trace", len(samples))
	}
	for _, id := range []string{"gpu-gpu_util", "gpu-power", "gpu-sm_active"} {
		checkGPUMarks(t, id, marks[id], samples)
	}
	if n := checkStepMarks(t, "step plots", append(marks["breakdown-pid1043"], marks["breakdown-pid1042"]...), steps); n == 0 {
		t.Error("no step breakdown for the ranks")
	}
	if !strings.Contains(page, `<p class="straggler">rank 1 (PID 1043)`) {
		t.Errorf("the straggler is not named first: %s", headlineOf(page))
	}
	ranks := marks["ranks"]
	pids := map[string]bool{}
	for _, m := range ranks {
		pids[m.attrs["data-pid"]] = true
		// A rank's bar is the mean over all its steps.
		pid := uint32(m.int("data-pid"))
		sum, n := 0.0, 0
		for i := range steps {
			if steps[i].PID == pid {
				v, _ := stepValue(&steps[i], m.attrs["data-field"])
				sum, n = sum+v, n+1
			}
		}
		if got := m.float("data-mean"); n != m.int("data-n") || math.Abs(got-sum/float64(n)) > 1e-9 {
			t.Errorf("rank bar %s of PID %d: %v over %s steps, want %v over %d", m.attrs["data-field"], pid, got, m.attrs["data-n"], sum/float64(n), n)
		}
	}
	if !pids["1042"] || !pids["1043"] {
		t.Errorf("the ranks' bars are for %v, want PIDs 1042 and 1043", pids)
	}
	if strings.Count(page, `<tr class="slowest">`) != 1 {
		t.Error("the ranks' table does not mark one straggler")
	}
}

// With no steps the page says so, and what to do.
func TestPageWithoutSteps(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, Report{Title: "nothing", Source: "a test"}, nil); err != nil {
		t.Fatal(err)
	}
	if page := b.String(); !strings.Contains(page, "no training steps found") || !strings.Contains(page, "--step-boundary") {
		t.Errorf("a page without steps does not say so: %s", headlineOf(page))
	}
}
