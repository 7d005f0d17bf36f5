package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// chromium finds Debian's headless browser, or skips loudly.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Skip(t, "no chromium to render the report in (apt-get install chromium)")
	return ""
}

// renderDOM loads a page in headless Chromium, lets its scripts run, and
// returns the DOM they leave (OUTPUTS.md: --dump-dom).
func renderDOM(t *testing.T, page string) *html.Node {
	t.Helper()
	bin := chromium(t)
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=2000",
		"--user-data-dir="+t.TempDir(), "--dump-dom", "file://"+page)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, errb.String())
	}
	t.Logf("chromium rendered %s in %v", filepath.Base(page), time.Since(start).Round(time.Millisecond))
	doc, err := html.Parse(&out)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func walk(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, f)
	}
}

// jsonStep is a line of --jsonl, the fields the report plots.
type jsonStep struct {
	Step          int                `json:"step"`
	PID           uint32             `json:"pid"`
	WallTime      float64            `json:"wall_time"`
	Phases        map[string]float64 `json:"phases"`
	Pool          *float64           `json:"pool"`
	Samples       *float64           `json:"samples"`
	TrainCapacity float64            `json:"train_capacity"`
	Thru          float64            `json:"thru"`
	InferCapacity float64            `json:"infer_capacity"`
}

func readJSONL(t *testing.T, path string) []jsonStep {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []jsonStep
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s jsonStep
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// value is a JSON line's value of a plotted step field.
func (s *jsonStep) value(field string) (float64, bool) {
	switch field {
	case "compute", "sync", "data", "other":
		return s.Phases[field], true
	case "dispatch wait":
		return s.Phases["dispatch_wait"], true
	case "pool":
		if s.Pool == nil {
			return 0, false
		}
		return *s.Pool, true
	case "samples":
		if s.Samples == nil {
			return 0, false
		}
		return *s.Samples, true
	case "train_capacity":
		return s.TrainCapacity, s.TrainCapacity > 0
	case "thru":
		return s.Thru, s.Thru > 0
	case "infer_capacity":
		return s.InferCapacity, s.InferCapacity > 0
	}
	return 0, false
}

// A recorded trace's report, rendered by Chromium, runs its script with
// no error and plots the steps that gpuprof replay writes as JSON lines:
// every column and point is the mean of the steps it names.
func TestReportInChromium(t *testing.T) {
	chromium(t)
	for _, trace := range []string{
		"../../testdata/traces/h200-pictures/data.trace.jsonl.gz",
		"../../testdata/traces/h200-pictures/compute.trace.jsonl.gz",
		"../../testdata/traces/h200x2-ranks/engine-ddp-two-ranks-slow-rank1.trace.jsonl.gz",
	} {
		t.Run(filepath.Base(filepath.Dir(trace))+"/"+filepath.Base(trace), func(t *testing.T) {
			dir := t.TempDir()
			page, steps := filepath.Join(dir, "report.html"), filepath.Join(dir, "steps.jsonl")
			if r := gpuprof(t, "replay", trace, "--jsonl", steps, "--html", page); r.code != 0 || !strings.Contains(r.stdout, "report: "+page) {
				t.Fatalf("replay --html: %+v", r)
			}
			keepOnFailure(t, page, steps)
			lines := readJSONL(t, steps)
			doc := renderDOM(t, page)
			checked, plotted := 0, map[string]bool{}
			walk(doc, func(n *html.Node) {
				if n.Type != html.ElementNode {
					return
				}
				if n.Data == "body" {
					if errs, _ := attr(n, "data-errors"); errs != "[]" {
						t.Errorf("script errors in the page: %q", errs)
					}
				}
				field, ok := attr(n, "data-field")
				first, _ := attr(n, "data-first")
				if !ok || first == "" || first == "all" {
					return
				}
				fig := figureOf(n)
				if strings.HasPrefix(fig, "gpu-") || strings.HasPrefix(fig, "bound-") {
					return // NVML samples, step bounds: held to theirs in htmlreport's tests
				}
				if checkMark(t, n, field, lines) {
					checked++
					plotted[fig] = true
				}
			})
			if checked < len(lines) {
				t.Errorf("%d marks checked against %d steps", checked, len(lines))
			}
			t.Logf("%d marks in %d plots match the %d JSON lines", checked, len(plotted), len(lines))
		})
	}
}

// figureOf is the id of the plot a mark is in.
func figureOf(n *html.Node) string {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && p.Data == "figure" {
			id, _ := attr(p, "id")
			return id
		}
	}
	return ""
}

// checkMark holds a mark to the mean of its steps' JSON lines.
func checkMark(t *testing.T, n *html.Node, field string, lines []jsonStep) bool {
	t.Helper()
	num := func(k string) float64 {
		v, _ := attr(n, k)
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("mark %s: %s=%q", field, k, v)
		}
		return f
	}
	pid, first, last, count, mean := uint32(num("data-pid")), int(num("data-first")), int(num("data-last")), int(num("data-n")), num("data-mean")
	sum, k, items := 0.0, 0, 0
	for i := range lines {
		s := &lines[i]
		if s.PID != pid || s.Step < first || s.Step > last {
			continue
		}
		items++
		if v, ok := s.value(field); ok {
			sum, k = sum+v, k+1
		}
	}
	if items != count || k == 0 {
		t.Fatalf("a %s mark names %d steps (%d-%d of PID %d), the JSON lines have %d, %d with the field", field, count, first, last, pid, items, k)
	}
	if want := sum / float64(k); math.Abs(mean-want) > 1e-6*math.Max(1, math.Abs(want)) {
		t.Fatalf("%s of PID %d steps %d-%d plotted as %v, the JSON lines' mean is %v", field, pid, first, last, mean, want)
	}
	return true
}

// report draws a trace as a page without printing the summaries; a bad
// call is a one-line error.
func TestReportCommand(t *testing.T) {
	trace := "../../testdata/traces/h200-dataloader/data.trace.jsonl.gz"
	page := filepath.Join(t.TempDir(), "r.html")
	r := gpuprof(t, "report", trace, "--html", page)
	if r.code != 0 || r.stdout != "report: "+page+"\n" {
		t.Fatalf("report: %+v", r)
	}
	b, err := os.ReadFile(page)
	if err != nil || !bytes.Contains(b, []byte("Bottleneck:</span> training: data loading")) {
		t.Fatalf("the page does not lead with the verdict (%v)", err)
	}
	oneLine(t, gpuprof(t, "report", trace), 2, "report needs --html OUT")
	oneLine(t, gpuprof(t, "report", trace, "--html", t.TempDir()), 2, "is a directory")
	oneLine(t, gpuprof(t, "report", trace, "--html", "/no/such/dir/r.html"), 2, "does not exist")
	oneLine(t, gpuprof(t, "report", trace, "--html", page, "--trace", "/no/such/dir/t.json"), 2, "does not exist")
	oneLine(t, gpuprof(t, "report", trace, "--html", page, "--trace", page), 2, "give them different files")
	oneLine(t, gpuprof(t, "report", trace, "--html", page, "--trace-max-mb", "0"), 2, "give a positive size")
	timeline := filepath.Join(t.TempDir(), "t.json")
	if r := gpuprof(t, "report", trace, "--html", page, "--trace", timeline); r.code != 0 || !strings.Contains(r.stdout, "timeline: "+timeline+" (399 steps") {
		t.Fatalf("report --trace: %+v", r)
	}
	var tl struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if b, err := os.ReadFile(timeline); err != nil || json.Unmarshal(b, &tl) != nil || len(tl.TraceEvents) < 399*3 {
		t.Fatalf("the timeline is not a trace of the steps (%v, %d events)", err, len(tl.TraceEvents))
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl.gz")
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	fmt.Fprintln(w, "not a trace")
	w.Close()
	os.WriteFile(bad, gz.Bytes(), 0o644)
	if r := gpuprof(t, "report", bad, "--html", page); r.code == 0 {
		t.Errorf("a file that is no trace gave a report: %+v", r)
	}
	if b2, _ := os.ReadFile(page); !bytes.Equal(b, b2) {
		t.Error("a failed report changed the page already there")
	}
}
