package main

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
	"github.com/gpuprof/gpuprof/validate"
)

// fakeNVMLBin is gpuprof built with -tags nvmlfake: NVML is eight fake
// H200s (nvml/nvmlfake), GPU 0 running the processes named in
// GPUPROF_FAKE_NVML_PIDS.
var fakeNVMLBin string

// TestStepsJoinedWithGPUs runs attach's GPU side end to end on fake GPUs:
// --gpus finds the job from NVML's process list, each step carries its
// GPU's state, the summary has the per-GPU and per-group tables, and the
// verdict weighs SM activity and throttling.
func TestStepsJoinedWithGPUs(t *testing.T) {
	testenv.RequireRoot(t)
	demo := testenv.StartDemo(t, "--steps", "200", "--start-delay", "0.5")
	steps := filepath.Join(t.TempDir(), "steps.jsonl")
	trace := filepath.Join(t.TempDir(), "trace.jsonl.gz")
	cmd := exec.Command(fakeNVMLBin, "attach", "--gpus", "0", "--jsonl", steps, "--record", trace, "--nvml-interval", "20ms",
		"--group", "target=0-4", "--group", "drafter=5-7")
	cmd.Env = append(os.Environ(), "GPUPROF_FAKE_NVML_PIDS="+itoa(demo.PID()), "GPUPROF_FAKE_NVML_XID=3:79")
	r := runCommand(t, cmd)
	if r.code != 0 {
		t.Fatalf("attach --gpus 0: %+v", r)
	}
	demo.Wait(t, 10*time.Second)
	for _, want := range []string{
		"gpuprof: PID " + itoa(demo.PID()) + ",", // found through --gpus
		"gpu util (NVML)", "sm_active (GPM)",
		"GPU while the steps ran (NVML): utilization median 50%, SM activity 0.40, tensor activity 0.60, power 300 W, SM clock 1980 MHz",
		"GPU clocks slowed: software power cap in 100% of steps",
		"GPUs (NVML", itoa(demo.PID()) + " (cuda:0)",
		"GPU groups (--group):", "target", "drafter",
		"gpu 3 (GPU-", "Xid 79",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.stdout)
		}
	}
	b, err := os.ReadFile(steps)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	joined := 0
	for _, ln := range lines {
		var s struct {
			GPU *struct {
				GPUs     []int    `json:"gpus"`
				Util     *float64 `json:"util_pct"`
				SMActive *float64 `json:"sm_active"`
				PowerW   *float64 `json:"power_w"`
				Throttle uint64   `json:"throttle_reasons"`
			} `json:"gpu"`
		}
		if err := json.Unmarshal([]byte(ln), &s); err != nil {
			t.Fatal(err)
		}
		if g := s.GPU; g != nil {
			joined++
			if len(g.GPUs) != 1 || g.GPUs[0] != 0 || g.Util == nil || *g.Util != 50 || g.PowerW == nil || *g.PowerW != 300 || g.Throttle != 0x4 {
				t.Fatalf("step's GPU state %s, want GPU 0 at 50%%, 300 W, power-capped", ln)
			}
		}
	}
	// The first round has no GPM (a rate between rounds) and steps before
	// the first sample have none: most steps, not all.
	if len(lines) < 100 || joined < len(lines)*9/10 {
		t.Errorf("%d of %d steps joined with their GPU's state", joined, len(lines))
	}

	// The GPU rounds are in the trace: a replay joins the same steps with
	// the same GPU state (by the plain binary: no NVML needed to replay).
	replayed := filepath.Join(t.TempDir(), "replayed.jsonl")
	if r := gpuprof(t, "replay", trace, "--jsonl", replayed); r.code != 0 || !strings.Contains(r.stdout, "GPUs (NVML") ||
		!strings.Contains(r.stdout, "Xid 79") {
		t.Fatalf("replay, want the GPUs and the Xid the live run saw: %+v", r)
	}
	if again, _ := os.ReadFile(replayed); string(again) != string(b) {
		t.Error("replay of the recorded trace gave other steps (or GPU state) than the live run")
	}

	oneLine(t, gpuprofFake(t, "attach", "-q", "--gpus", "5", "-d", "1s"), 1, "no process opened a compute context on GPU 5 in 1s")
	oneLine(t, gpuprofFake(t, "attach", "--gpus", "9"), 2, "--gpus")
	oneLine(t, gpuprofFake(t, "attach", "--pid", itoa(os.Getpid()), "--group", "x=0-99"), 2, "--group x")
}

func gpuprofFake(t *testing.T, args ...string) result {
	t.Helper()
	return runCommand(t, exec.Command(fakeNVMLBin, args...))
}

// TestWithoutNVML: where the driver's NVML is missing (CI has no GPU),
// profiling goes on with one warning, and what needs NVML says so in one
// line.
func TestWithoutNVML(t *testing.T) {
	testenv.RequireRoot(t)
	if r := gpuprof(t, "gpus"); r.code == 0 {
		t.Skip("NVML is present on this machine: nothing to test of its absence")
	}
	oneLine(t, gpuprof(t, "gpus"), 1, "NVML not available (libnvidia-ml.so.1 not found)")
	oneLine(t, gpuprof(t, "attach", "--gpus", "all"), 1, "--gpus needs NVML")
	oneLine(t, gpuprof(t, "attach", "--pid", itoa(os.Getpid()), "--nvml-interval", "0s"), 2, "--nvml-interval")
	demo := testenv.StartDemo(t, "--steps", "100", "--start-delay", "0.5")
	steps := filepath.Join(t.TempDir(), "steps.jsonl")
	r := gpuprof(t, "attach", "--pid", itoa(demo.PID()), "--jsonl", steps)
	demo.Wait(t, 10*time.Second)
	if r.code != 0 || strings.Count(r.stderr, "GPU hardware state left out") != 1 {
		t.Fatalf("attach without NVML: want one warning and exit 0: %+v", r)
	}
	if b, _ := os.ReadFile(steps); len(b) == 0 || strings.Contains(string(b), `"gpu"`) {
		t.Errorf("steps without NVML: want steps and no GPU state:\n%.300s", b)
	}
	if strings.Contains(r.stdout, "GPUs (NVML") {
		t.Errorf("summary has a GPU table without NVML:\n%s", r.stdout)
	}
}

// TestBinaryLinksOnlyLibc: the binary make build writes runs on a GPU host
// with no Go toolchain and on one without the NVIDIA driver: cgo links the
// C library alone, and NVML is opened with dlopen when gpuprof starts.
func TestBinaryLinksOnlyLibc(t *testing.T) {
	f, err := elf.Open(gpuprofBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range libs {
		if l != "libc.so.6" {
			t.Errorf("gpuprof needs %s (all it needs: %v); only libc.so.6 is on every GPU host", l, libs)
		}
	}
	syms, _ := f.ImportedSymbols()
	newest := ""
	for _, s := range syms {
		if v, ok := strings.CutPrefix(s.Version, "GLIBC_"); ok && versionLess(newest, v) {
			newest = v
		}
	}
	t.Logf("links %v; needs glibc %s or newer", libs, newest)
	if newest == "" {
		t.Error("no versioned glibc symbol imported: not a cgo build?")
	}
}

// versionLess compares dotted versions ("2.34" < "2.36").
func versionLess(a, b string) bool {
	if a == "" {
		return true
	}
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}

// TestGPUsFollowsLateProcesses: attach --gpus started before the job
// waits for its first process to open a context on those GPUs; a process
// that opens one later (a rank that loads its model late) is attached to
// as well, and each has its steps.
func TestGPUsFollowsLateProcesses(t *testing.T) {
	testenv.RequireRoot(t)
	pidsFile := filepath.Join(t.TempDir(), "pids")
	if err := os.WriteFile(pidsFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	steps := filepath.Join(t.TempDir(), "steps.jsonl")
	cmd := exec.Command(fakeNVMLBin, "attach", "-q", "--gpus", "0", "--jsonl", steps)
	cmd.Env = append(os.Environ(), "GPUPROF_FAKE_NVML_PIDS_FILE="+pidsFile)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // attach is waiting, and nothing ends it
	if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid)); strings.Contains(string(stat), ") Z ") {
		cmd.Wait()
		t.Fatalf("attach --gpus with no process yet ended: %s", errb.String())
	}
	first := testenv.StartDemo(t, "--steps", "100000", "--start-delay", "0.3")
	if err := os.WriteFile(pidsFile, []byte(itoa(first.PID())), 0o644); err != nil {
		t.Fatal(err)
	}
	// The late one starts once gpuprof has the first's steps (its jsonl
	// has lines), not after a fixed wait, and the first runs until the
	// late one has ended: gpuprof, which ends when all its targets have,
	// must find the late one while the first runs, whatever the machine's
	// load (a first of 500 steps, ~5 s, ended before it on a loaded dev
	// VM). The late one is found only at gpuprof's next look at the GPUs'
	// processes, then learned: 200 steps leave room over the floor below
	// (120 gave 37 and 48 on a loaded machine).
	if n := testenv.WaitForLines(steps, 1, 10*time.Second, nil); n == 0 {
		t.Fatalf("no step of the first process in 10 s:\n%s", errb.String())
	}
	late := testenv.StartDemo(t, "--steps", "200", "--start-delay", "0.3")
	if err := os.WriteFile(pidsFile, []byte(itoa(first.PID())+","+itoa(late.PID())), 0o644); err != nil {
		t.Fatal(err)
	}
	late.Wait(t, 10*time.Second)
	first.Stop(t)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("attach: %v\n%s", err, errb.String())
	}
	rows, err := validate.ReadJSONL(steps)
	if err != nil {
		t.Fatal(err)
	}
	perPID := map[int]int{}
	for _, r := range rows {
		perPID[int(r.Fields["pid"])]++
	}
	if perPID[first.PID()] < 100 || perPID[late.PID()] < 50 {
		t.Errorf("steps per process %v: want the first (%d) and the late one (%d) both\n%s", perPID, first.PID(), late.PID(), out.String())
	}
}
