package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/pyroquery"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// The Pyroscope type IDs gpuprof's profiles are filed under.
const (
	cpuType      = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
	waitType     = "wait:wait:nanoseconds:wait:nanoseconds"
	gpuTimeType  = "gpu_time:gpu_time:nanoseconds:gpu_time:nanoseconds"
	launchesType = "gpu_time:kernel_launches:count:gpu_time:nanoseconds"
)

// TestProfilesAndMetrics runs the stand-in pipeline (engines feeding a
// trainer, infer mode: the trainer waits for samples, syncs once a step)
// under gpuprof with --pyroscope and --metrics-addr, a real Pyroscope and
// a real Prometheus taking what it sends, and reads both back through
// their query APIs:
//   - all three profile types are there, with phase labels;
//   - the wait profile's dispatch_wait and sync phases hold the steps'
//     dispatch wait and sync time, in the same shares within 5%;
//   - the GPU profile's time sums to the steps' compute time within 5%,
//     all of it in the compute phase;
//   - the stacks name the pipeline's own Python functions and native
//     frames (the stand-in runtime's functions);
//   - Prometheus's median of the step histogram is the steps' median
//     within one bucket.
func TestProfilesAndMetrics(t *testing.T) {
	testenv.RequireRoot(t)
	python := testenv.EndToEndPython(t)
	dir := testenv.Fixtures(t)
	pyro := testenv.StartPyroscope(t)
	testenv.RequirePrometheus(t)
	began := time.Now()
	tmp := t.TempDir()
	steps, truth, trace := filepath.Join(tmp, "steps.jsonl"), filepath.Join(tmp, "truth.jsonl"), filepath.Join(tmp, "trace.jsonl.gz")
	addr := freeAddr(t)
	cmd := exec.Command(gpuprofBin, "run", "-q", "--launch-duty", "1", "--jsonl", steps, "--record", trace,
		"--pyroscope", pyro.URL, "--pyroscope-service", "e2e", "--pyroscope-interval", "2s", "--metrics-addr", addr,
		"--", python, filepath.Join(testenv.Root(), "testdata", "python", "pipeline.py"), dir,
		"--mode", "infer", "--steps", "250", "--truth", truth, "--start-delay", "2")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListening(t, addr, 10*time.Second)
	prom := testenv.StartPrometheus(t, addr)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gpuprof run: %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	summary := stdout.String()
	if !strings.Contains(summary, "0 failed, 0 dropped") {
		t.Errorf("summary: uploads not all sent:\n%s", summary)
	}
	st := readStepSums(t, steps)
	if st.n < 200 {
		t.Fatalf("%d steps, want ~249", st.n)
	}

	// Pyroscope: read until the last window's profiles are in.
	ctx := context.Background()
	c := pyroquery.New(pyro.URL)
	from, until := began.Add(-time.Minute), time.Now().Add(time.Minute)
	sel := `{service_name="e2e"}`
	totals := func(typ, label string) map[string]float64 {
		t.Helper()
		series, err := c.SelectSeries(ctx, typ, sel, []string{label}, from, until)
		if err != nil {
			t.Fatalf("SelectSeries %s by %s: %v", typ, label, err)
		}
		return pyroquery.TotalsBy(series, label)
	}
	var gpu map[string]float64
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		gpu = totals(gpuTimeType, "phase")
		if within(sum(gpu), st.computeNS, 0.05) || time.Now().After(deadline) {
			break
		}
	}
	types, err := c.ProfileTypes(ctx, from, until)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{cpuType, waitType, gpuTimeType, launchesType} {
		if !slices.ContainsFunc(types, func(p pyroquery.ProfileType) bool { return p.ID == want }) {
			t.Errorf("profile type %s not on the server (%v)", want, types)
		}
	}
	t.Logf("GPU time by phase %v, steps' compute %.0f ns", gpu, st.computeNS)
	if !within(sum(gpu), st.computeNS, 0.05) {
		t.Errorf("GPU time by stack %.0f ns, the steps' compute time %.0f ns: not within 5%%", sum(gpu), st.computeNS)
	}
	if share := gpu["compute"] / sum(gpu); share < 0.95 {
		t.Errorf("%.1f%% of the GPU time in the compute phase, want all (the steps' GPU time is their compute)", 100*share)
	}
	wait := totals(waitType, "phase")
	t.Logf("wait by phase %v; steps' dispatch wait %.0f ns, sync %.0f ns", wait, st.dispatchNS, st.syncNS)
	for phase, want := range map[string]float64{"dispatch_wait": st.dispatchNS, "sync": st.syncNS} {
		if !within(wait[phase], want, 0.05) {
			t.Errorf("wait profile's %s %.0f ns, the steps' %.0f ns: not within 5%%", phase, wait[phase], want)
		}
	}
	gotShare := wait["dispatch_wait"] / (wait["dispatch_wait"] + wait["sync"])
	wantShare := st.dispatchNS / (st.dispatchNS + st.syncNS)
	if !within(gotShare, wantShare, 0.05) {
		t.Errorf("dispatch_wait %.3f of the step thread's dispatch and sync waits, the steps say %.3f", gotShare, wantShare)
	}
	if cpu := totals(cpuType, "phase"); cpu["data"] == 0 || sum(cpu) == 0 {
		t.Errorf("on-CPU profile by phase %v: no data phase (the trainer's sample fetches)", cpu)
	}
	// The step thread's time by phase: its waits, and its time on CPU
	// outside them (on CPU inside a wait is that wait's time too).
	selAll := sel
	sel = `{service_name="e2e",wait_kind=""}`
	cpuOut := totals(cpuType, "phase")
	sel = selAll
	wall := map[string]float64{}
	for _, ph := range []string{"dispatch_wait", "data", "sync", "compute"} {
		wall[ph] = wait[ph] + cpuOut[ph]
	}
	// step_time leaves out dispatch_wait (and the lead-in, phase other).
	stepPhases := map[string]float64{"dispatch_wait": st.dispatchNS, "data": st.dataNS, "sync": st.syncNS,
		"compute": st.stepNS - st.dataNS - st.syncNS}
	t.Logf("the step thread's wait + CPU outside waits by phase %v, the steps' %v", wall, stepPhases)
	for ph, want := range stepPhases {
		if got := wall[ph] / sum(wall); math.Abs(got-want/sum(stepPhases)) > 0.05 {
			t.Errorf("phase %s: %.1f%% of the step thread's wait + CPU outside waits, %.1f%% of the steps' time: not within 5 points",
				ph, 100*got, 100*want/sum(stepPhases))
		}
	}
	for typ, names := range map[string][]string{
		gpuTimeType: {"pipeline.py launch", "pipeline.py <module>"},
		waitType:    {"pipeline.py <module>", "queue.py Queue.get", "[copy d2h]"},
		cpuType:     {"pipeline.py load_sample", "pipeline.py run_engine"},
	} {
		fg, err := c.SelectMergeStacktraces(ctx, typ, sel, from, until)
		if err != nil {
			t.Fatal(err)
		}
		byName, err := fg.TotalByFunction()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if byName[n] == 0 {
				t.Errorf("%s: no frame %q among %d names", typ, n, len(byName))
			}
		}
		// Native frames: the stand-in runtime's functions, named from
		// its symbols (cudaStreamSynchronize's stack, the launches').
		if typ != cpuType && !slices.ContainsFunc(keys(byName), func(n string) bool { return strings.HasPrefix(n, "cuda") || strings.HasPrefix(n, "cu") }) {
			t.Errorf("%s: no native CUDA frame among %v", typ, keys(byName))
		}
	}

	// The recorded trace, replayed to the server shifted to now, gives
	// the same profiles.
	if r := gpuprof(t, "replay", trace, "--pyroscope", pyro.URL, "--pyroscope-service", "e2e-replay", "--pyroscope-interval", "2s"); r.code != 0 {
		t.Fatalf("replay: %+v", r)
	}
	replayed := `{service_name="e2e-replay"}`
	var again float64
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		series, err := c.SelectSeries(ctx, gpuTimeType, replayed, []string{"phase"}, from, time.Now().Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if again = sum(pyroquery.TotalsBy(series, "phase")); within(again, sum(gpu), 0.001) || time.Now().After(deadline) {
			break
		}
	}
	if !within(again, sum(gpu), 0.001) {
		t.Errorf("replayed trace's GPU time by stack %.0f ns, the live run's %.0f", again, sum(gpu))
	}

	// Prometheus: the step histogram's median, the steps' within a bucket,
	// as last scraped (gpuprof has exited: the series are stale now).
	q, err := prom.Query(`histogram_quantile(0.5, sum by (le) (last_over_time(gpuprof_step_seconds_bucket{job="gpuprof"}[5m])))`)
	if err != nil || len(q) != 1 {
		t.Fatalf("median query: %v %v", q, err)
	}
	buckets, err := prom.Query(`sum by (le) (last_over_time(gpuprof_step_seconds_bucket{job="gpuprof"}[5m]))`)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := bucketOf(buckets, st.median)
	t.Logf("Prometheus median %.6f s; the steps' %.6f s, in bucket (%g, %g]", q[0].Value, st.median, lo, hi)
	width := hi - lo
	if math.Abs(q[0].Value-st.median) > width {
		t.Errorf("Prometheus's median %.6f s is more than a bucket (%g s) from the steps' %.6f s", q[0].Value, width, st.median)
	}
}

type stepSums struct {
	n                             int
	dispatchNS, syncNS, computeNS float64
	dataNS, stepNS                float64
	median                        float64 // of step_time, seconds
}

func readStepSums(t *testing.T, path string) stepSums {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var s stepSums
	var times []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		num := func(k string) float64 { v, _ := raw[k].(float64); return v }
		s.n++
		s.dispatchNS += num("dispatch_wait") * 1e9
		s.syncNS += num("sync_time") * 1e9
		s.computeNS += num("compute_time") * 1e9
		s.dataNS += num("data_time") * 1e9
		s.stepNS += num("step_time") * 1e9
		times = append(times, num("step_time"))
	}
	slices.Sort(times)
	if len(times) > 0 {
		s.median = times[len(times)/2]
	}
	return s
}

// bucketOf is the histogram bucket (lower, upper bound] holding v.
func bucketOf(buckets []testenv.Sample, v float64) (lo, hi float64) {
	var les []float64
	for _, b := range buckets {
		if le, err := strconv.ParseFloat(b.Labels["le"], 64); err == nil && !math.IsInf(le, 1) {
			les = append(les, le)
		}
	}
	slices.Sort(les)
	for _, le := range les {
		if v <= le {
			return lo, le
		}
		lo = le
	}
	return lo, math.Inf(1)
}

func within(got, want, frac float64) bool {
	return want > 0 && math.Abs(got-want) <= frac*want
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitListening waits until something accepts connections at addr.
func waitListening(t *testing.T, addr string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing listens at %s after %v", addr, within)
}
