package metrics

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestPrometheusScrapes runs Debian's Prometheus against an exporter fed
// a recorded two-rank DDP trace a batch a second, as a live run would
// feed it, and reads back through its query API: the step histogram's
// median within a bucket of the steps', counters exactly, the straggler
// queries naming the slow rank, and every dashboard query answering.
func TestPrometheusScrapes(t *testing.T) {
	testenv.RequirePrometheus(t)
	h, items := replayTrace(t, slowRank1)
	steps := stepsOf(items)
	if len(steps) < 500 {
		t.Fatalf("%d steps from %s", len(steps), slowRank1)
	}
	e, err := New(Config{Version: "test", DCGM: true, GPUs: h.GPUs, Hostname: "h200x2", Health: testHealth})
	if err != nil {
		t.Fatal(err)
	}
	addr, err := e.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prom := testenv.StartPrometheus(t, addr)

	// Four batches, more than a scrape apart, so that rates have points.
	const batches = 4
	for i := range batches {
		feed(e, items[i*len(items)/batches:(i+1)*len(items)/batches])
		time.Sleep(1200 * time.Millisecond)
	}
	var h2d float64
	times := make([]float64, len(steps))
	inferKnown := false // the trace's engines are not timed with infer=
	for i, s := range steps {
		h2d += float64(s.H2DBytes)
		times[i] = s.StepTime
		inferKnown = inferKnown || s.InferCapacity > 0
	}
	scalar := func(q string) float64 {
		t.Helper()
		res, err := prom.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 {
			t.Fatalf("%s: %d series, want 1: %v", q, len(res), res)
		}
		return res[0].Value
	}
	// The last batch is scraped within a second of its feeding.
	deadline := time.Now().Add(10 * time.Second)
	for n := 0.0; n != float64(len(steps)); {
		if n = scalar(`sum(gpuprof_steps_total)`); time.Now().After(deadline) {
			t.Fatalf("Prometheus has %v steps, want %d", n, len(steps))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := scalar(`sum(gpuprof_copy_bytes_total{direction="h2d"})`); got != h2d {
		t.Errorf("h2d bytes %v, want %v", got, h2d)
	}

	slices.Sort(times)
	median := times[len(times)/2]
	lo, hi := bucketAround(stepBuckets, median)
	q := scalar(`histogram_quantile(0.5, sum by (le) (gpuprof_step_seconds_bucket))`)
	if q < lo || q > hi {
		t.Errorf("histogram median %.4f s, want the steps' median %.4f s's bucket (%.4f, %.4f]", q, median, lo, hi)
	}
	t.Logf("%d steps: median %.2f ms, from the histogram %.2f ms (bucket %.2f-%.2f ms)", len(steps), median*1e3, q*1e3, lo*1e3, hi*1e3)

	// Every dashboard query is one Prometheus runs and has an answer for.
	byRank := map[string]map[string]float64{} // straggler panel -> rank -> ratio
	for _, dq := range dashboardQueries(t) {
		expr := grafanaVars.Replace(dq.expr)
		if strings.HasPrefix(dq.where, "variable") {
			continue // label_values() is Grafana's, not PromQL; its metric is checked served
		}
		res, err := prom.Query(expr)
		if err != nil {
			t.Errorf("%s: %v", dq.where, err)
			continue
		}
		if len(res) == 0 && (inferKnown || !strings.Contains(expr, "gpuprof_inference_capacity")) {
			t.Errorf("%s: no series for\n%s", dq.where, expr)
		}
		if strings.HasPrefix(dq.where, "panel Straggler") {
			byRank[dq.where] = map[string]float64{}
			for _, s := range res {
				byRank[dq.where][s.Labels["rank"]] = s.Value
			}
		}
	}
	// And so is every query docs/prometheus.md shows.
	for _, q := range docsQueries(t) {
		if res, err := prom.Query(grafanaVars.Replace(q)); err != nil || len(res) == 0 {
			t.Errorf("docs/prometheus.md's\n%s\ngives %v, %v", q, res, err)
		}
	}
	// DDP's ranks wait for each other: their step times match, and the
	// slow rank is the one whose data phase is longer.
	for panel, ranks := range byRank {
		t.Logf("%s: %v", panel, ranks)
		if len(ranks) != 2 {
			t.Errorf("%s: ranks %v, want 0 and 1", panel, ranks)
			continue
		}
		if strings.Contains(panel, "DDP") {
			if ranks["1"] < 1.2 || ranks["0"] > 0.85 {
				t.Errorf("%s: %v, want rank 1 the straggler", panel, ranks)
			}
		} else if math.Abs(ranks["0"]-1) > 0.1 || math.Abs(ranks["1"]-1) > 0.1 {
			t.Errorf("%s: %v, want both near 1 (DDP ranks' steps match)", panel, ranks)
		}
	}
}

// bucketAround is the histogram bucket holding v: (lo, hi].
func bucketAround(bounds []float64, v float64) (lo, hi float64) {
	for _, b := range bounds {
		if v <= b {
			return lo, b
		}
		lo = b
	}
	return lo, math.Inf(1)
}
