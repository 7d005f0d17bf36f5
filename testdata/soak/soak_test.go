// Package soak runs gpuprof attached to a high-event-rate stand-in job for
// a long time (make soak, SOAK_DURATION, 1h by default) and checks that
// its memory stays flat and that every event the job produced is
// accounted for: received, or counted lost. It is in testdata/ so that go
// test ./... (make test) leaves it out: make soak names it.
package soak

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// The soak's settings, from the environment (make soak sets them).
const (
	durationEnv = "GPUPROF_SOAK_DURATION" // how long; unset: the soak skips
	outEnv      = "GPUPROF_SOAK_OUT"      // where the CSV and gpuprof's output go (default: a temporary directory)
	binEnv      = "GPUPROF_SOAK_BIN"      // the gpuprof binary (default: built here)
	rateEnv     = "GPUPROF_SOAK_RATE"     // probed calls a second from the hitloop (default 40000)
)

// sampleEvery is how often gpuprof's RSS is read.
const sampleEvery = 10 * time.Second

// TestSoak runs gpuprof attach on two stand-ins for the whole duration:
// the demo trainer (~90 steps a second, the per-step and per-thread
// state of a long job) and the hitloop making rate event records a
// second straight to the driver, each one probed call, each one event.
// It samples gpuprof's VmRSS to soak.csv, and fails if the last quarter's
// median RSS is more than 10% + 8 MiB above the second quarter's, or if
// the hitloop's calls received plus the events counted lost fall short
// of the calls it made (or exceed them).
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv(durationEnv))
	if err != nil || d <= 0 {
		t.Skipf("%s not set (make soak sets it: SOAK_DURATION=1h)", durationEnv)
	}
	testenv.RequireRoot(t)
	rate := 40000
	if v := os.Getenv(rateEnv); v != "" {
		if rate, err = strconv.Atoi(v); err != nil || rate <= 0 {
			t.Fatalf("%s=%q: want a positive number of calls a second", rateEnv, v)
		}
	}
	out := os.Getenv(outEnv)
	if out == "" {
		out = t.TempDir()
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := os.Getenv(binEnv)
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "gpuprof")
		build := exec.Command("go", "build", "-o", bin, "./cmd/gpuprof")
		build.Dir = testenv.Root()
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build gpuprof: %v\n%s", err, b)
		}
	}
	fix := testenv.Fixtures(t)

	trainer := exec.Command(filepath.Join(fix, "demo-trainer"), "--libdir", fix, "--steps", "1000000000",
		"--data-ms", "5", "--compute-ms", "5", "--truth", filepath.Join(out, "truth.jsonl"))
	if err := trainer.Start(); err != nil {
		t.Fatal(err)
	}
	defer trainer.Process.Kill()
	loop := startHitloop(t, fix)
	defer loop.stop()

	gp := exec.Command(bin, "attach", "-p", strconv.Itoa(trainer.Process.Pid), "-p", strconv.Itoa(loop.pid()),
		"--no-nvml", "--record-sites=false", "--jsonl", filepath.Join(out, "steps.jsonl"))
	summary, err := os.Create(filepath.Join(out, "gpuprof.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer summary.Close()
	gp.Stdout = summary
	stderr, _ := gp.StderrPipe()
	if err := gp.Start(); err != nil {
		t.Fatal(err)
	}
	defer gp.Process.Kill()
	attached := make(chan struct{})
	errLog, err := os.Create(filepath.Join(out, "gpuprof.err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errLog.Close()
	go watchAttach(stderr, errLog, loop.pid(), attached)
	select {
	case <-attached:
	case <-time.After(30 * time.Second):
		t.Fatal("gpuprof did not attach to the hitloop's driver within 30 s")
	}

	csv, err := os.Create(filepath.Join(out, "soak.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer csv.Close()
	fmt.Fprintln(csv, "elapsed_s,rss_kib,produced")
	start := time.Now()
	var rss []uint64
	var samples []sample
	take := func() {
		kib, err := vmRSS(gp.Process.Pid)
		if err != nil {
			t.Fatalf("read gpuprof's RSS: %v", err)
		}
		rss = append(rss, kib)
		samples = append(samples, sample{time.Since(start).Seconds(), kib})
		fmt.Fprintf(csv, "%.0f,%d,%d\n", time.Since(start).Seconds(), kib, loop.produced)
	}
	take()
	// Calls in chunks of chunk, paced to rate by the wall clock: a
	// chunk late (the machine busy) is made up by the next ones.
	const chunk = 1000
	nextSample := start.Add(sampleEvery)
	for time.Since(start) < d {
		due := start.Add(time.Duration(float64(loop.produced+chunk) / float64(rate) * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
		if err := loop.calls(chunk); err != nil {
			t.Fatalf("hitloop: %v", err)
		}
		if time.Now().After(nextSample) {
			take()
			nextSample = nextSample.Add(sampleEvery)
		}
	}
	take()
	elapsed := time.Since(start)
	if svg, err := os.Create(filepath.Join(out, "soak.svg")); err == nil {
		plotSVG(svg, samples, fmt.Sprintf("gpuprof RSS, %d probed calls a second, %v", rate, d))
		svg.Close()
	}
	// The producers end first, so that gpuprof reads what is left in the
	// ring buffer (it waits for two empty reads after the targets exit)
	// and then prints its summary.
	loop.stop()
	trainer.Process.Signal(syscall.SIGTERM)
	trainer.Wait()
	done := make(chan error, 1)
	go func() { done <- gp.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("gpuprof: %v (see %s)", err, errLog.Name())
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("gpuprof did not end within 2 minutes of its targets")
	}
	text, err := os.ReadFile(summary.Name())
	if err != nil {
		t.Fatal(err)
	}
	received, err := threadCalls(string(text), loop.pid())
	if err != nil {
		t.Fatal(err)
	}
	delivered, lost, err := eventTotals(string(text))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v: hitloop made %d calls (%.0f/s), gpuprof received %d of them; all events: %d delivered, %d lost",
		elapsed.Round(time.Second), loop.produced, float64(loop.produced)/elapsed.Seconds(), received, delivered, lost)
	q2, q4 := quarterMedians(rss)
	t.Logf("RSS: start %d KiB, max %d KiB, second-quarter median %d KiB, last-quarter median %d KiB (%d samples, %s)",
		rss[0], slices.Max(rss), q2, q4, len(rss), csv.Name())
	if grew(q2, q4) {
		t.Errorf("gpuprof's RSS grew: last-quarter median %d KiB > second-quarter median %d KiB + 10%% + 8 MiB", q4, q2)
	}
	if received > loop.produced || received+lost < loop.produced {
		t.Errorf("events unaccounted for: the hitloop made %d calls, gpuprof received %d and counted %d lost", loop.produced, received, lost)
	}
}

// grew says whether the last quarter's median RSS (q4) is more than 10%
// + 8 MiB above the second quarter's (q2): the first quarter is warm-up
// (the symbol tables read, the steps learnt).
func grew(q2, q4 uint64) bool { return q4 > q2+q2/10+8<<10 }

// quarterMedians are the medians of the samples' second and last
// quarters.
func quarterMedians(s []uint64) (q2, q4 uint64) {
	n := len(s)
	median := func(part []uint64) uint64 {
		if len(part) == 0 {
			return 0
		}
		c := slices.Clone(part)
		slices.Sort(c)
		return c[len(c)/2]
	}
	return median(s[n/4 : n/2]), median(s[3*n/4:])
}

// vmRSS reads a process's resident set size, in KiB.
func vmRSS(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// watchAttach copies gpuprof's stderr to log and closes attached once it
// says it attached to pid's driver library.
func watchAttach(r io.Reader, log io.Writer, pid int, attached chan struct{}) {
	want := fmt.Sprintf("PID %d: attached", pid)
	sc := bufio.NewScanner(r)
	seen := false
	for sc.Scan() {
		fmt.Fprintln(log, sc.Text())
		if !seen && strings.Contains(sc.Text(), want) && strings.Contains(sc.Text(), "libcuda.so.1") {
			seen = true
			close(attached)
		}
	}
}

// threadCalls is the calls column of pid's rows of the summary's thread
// tables.
func threadCalls(summary string, pid int) (uint64, error) {
	row := regexp.MustCompile(`(?m)^\s+` + strconv.Itoa(pid) + `\s+\d+\s+\d+\s+(\d+)\s`)
	var n uint64
	found := false
	for _, m := range row.FindAllStringSubmatch(summary, -1) {
		v, _ := strconv.ParseUint(m[1], 10, 64)
		n += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no thread row for PID %d in gpuprof's summary", pid)
	}
	return n, nil
}

// eventTotals reads the summary's "events: N delivered, M lost" line.
func eventTotals(summary string) (delivered, lost uint64, err error) {
	m := regexp.MustCompile(`events: (\d+) delivered, (\d+) lost`).FindStringSubmatch(summary)
	if m == nil {
		return 0, 0, fmt.Errorf("no events line in gpuprof's summary")
	}
	delivered, _ = strconv.ParseUint(m[1], 10, 64)
	lost, _ = strconv.ParseUint(m[2], 10, 64)
	return delivered, lost, nil
}

// hitloop is testdata/bench/hitloop calling cuEventRecord: one probed
// call and one event a call.
type hitloop struct {
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Reader
	produced uint64 // calls made since "ready"
	stopped  bool
}

func startHitloop(t *testing.T, fix string) *hitloop {
	cmd := exec.Command(filepath.Join(fix, "hitloop"), fix, "cuEventRecord")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &hitloop{cmd: cmd, in: in, out: bufio.NewReader(out)}
	if line, err := h.out.ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		h.stop()
		t.Fatalf("hitloop: %q %v", line, err)
	}
	return h
}

func (h *hitloop) pid() int { return h.cmd.Process.Pid }

// calls makes n calls and waits for them.
func (h *hitloop) calls(n int) error {
	if _, err := fmt.Fprintf(h.in, "%d\n", n); err != nil {
		return err
	}
	if _, err := h.out.ReadString('\n'); err != nil {
		return err
	}
	h.produced += uint64(n)
	return nil
}

// stop ends the loop (end of input) and waits for it to exit.
func (h *hitloop) stop() {
	if h.stopped {
		return
	}
	h.stopped = true
	h.in.Close()
	h.cmd.Wait()
}
