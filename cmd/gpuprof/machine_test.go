package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// The machine says no: what gpuprof does where the kernel's settings, its
// file systems, its verifier or NVML get in the way.

const paranoidPath = "/proc/sys/kernel/perf_event_paranoid"

// setParanoid sets kernel.perf_event_paranoid to v until the returned
// function puts the value before back (t.Cleanup does too, where a test
// fails first). The setting is the machine's: held for one attach only.
func setParanoid(t *testing.T, v int) (restore func()) {
	t.Helper()
	old, err := os.ReadFile(paranoidPath)
	if err != nil {
		testenv.Skip(t, "cannot read %s: %v", paranoidPath, err)
	}
	if err := os.WriteFile(paranoidPath, []byte(strconv.Itoa(v)), 0); err != nil {
		testenv.Skip(t, "cannot set perf_event_paranoid to %d: %v", v, err)
	}
	if b, _ := os.ReadFile(paranoidPath); strings.TrimSpace(string(b)) != strconv.Itoa(v) {
		t.Fatalf("perf_event_paranoid reads %q after writing %d", b, v)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			if err := os.WriteFile(paranoidPath, old, 0); err != nil {
				t.Errorf("restore perf_event_paranoid to %s: %v", old, err)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}

// worldDir is a new directory any user may write (t.TempDir's parent is
// root's alone), removed when the test ends.
func worldDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gpuprof-world-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startDemoAs starts the demo trainer as uid (65534: nobody), its log in
// a directory it can write: a job of a user other than root. The trainer
// and its stand-in libraries run from copies there too: the checkout may
// be in a directory only root can search (a clone under /root).
func startDemoAs(t *testing.T, uid int, args ...string) (*exec.Cmd, string) {
	t.Helper()
	build := testenv.Fixtures(t)
	dir := worldDir(t)
	for _, f := range append([]string{"demo-trainer"}, standIns...) {
		copyFile(t, filepath.Join(build, f), filepath.Join(dir, f))
	}
	if !slices.Contains(args, "--libdir") {
		args = append([]string{"--libdir", dir}, args...)
	}
	truth := filepath.Join(dir, "truth.jsonl")
	id := strconv.Itoa(uid)
	cmd := exec.Command("setpriv", append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups",
		filepath.Join(dir, "demo-trainer"), "--truth", truth}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, truth
}

// TestPerfEventParanoid: kernel.perf_event_paranoid 3 and 4 (values
// above 2 are what Debian's and Android's kernels use to forbid perf
// events to unprivileged users; upstream kernels take them as 2) change
// nothing for gpuprof, which needs CAP_PERFMON, past which the setting is
// not looked at: as root, and as a user with only the capabilities gpuprof
// asks for, attached to a job of that user, the steps match the job's log.
func TestPerfEventParanoid(t *testing.T) {
	testenv.RequireRoot(t)
	for _, level := range []int{3, 4} {
		t.Run("root/"+strconv.Itoa(level), func(t *testing.T) {
			demo := testenv.StartDemo(t, "--steps", "150", "--start-delay", "0.4")
			steps := filepath.Join(t.TempDir(), "steps.jsonl")
			restore := setParanoid(t, level)
			r := gpuprof(t, "attach", "--pid", itoa(demo.PID()), "-q", "--jsonl", steps)
			restore()
			demoStepsMatch(t, demo, r, steps, fmt.Sprintf("attach at perf_event_paranoid %d", level))
		})
		t.Run("capabilities/"+strconv.Itoa(level), func(t *testing.T) {
			demo, truth := startDemoAs(t, 65534, "--steps", "150", "--start-delay", "0.4")
			steps := filepath.Join(filepath.Dir(truth), "steps.jsonl")
			restore := setParanoid(t, level)
			caps := "+bpf,+perfmon,+sys_ptrace,+dac_read_search"
			r := runCommand(t, exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
				"--inh-caps="+caps, "--ambient-caps="+caps, gpuprofBin, "attach", "--pid", itoa(demo.Process.Pid), "-q", "--jsonl", steps))
			restore()
			if r.code != 0 {
				t.Fatalf("attach with CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH at perf_event_paranoid %d: %+v", level, r)
			}
			checkAgainstTruth(t, truth, steps)
		})
	}
}

// TestReadOnlyTracefs: tracefs mounted read-only (in a mount namespace of
// the test's own: the machine's mounts stay as they are) is no matter:
// gpuprof's uprobes are uprobe_multi links, which no tracefs file holds.
func TestReadOnlyTracefs(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		testenv.Skip(t, "needs unshare(1) for a private mount namespace")
	}
	demo := testenv.StartDemo(t, "--steps", "200", "--start-delay", "0.4")
	steps := filepath.Join(t.TempDir(), "steps.jsonl")
	// Mounted (where it was not), then made read-only by a bind remount:
	// that changes this namespace's mount alone, not tracefs's one
	// superblock, which a plain remount,ro would for every namespace.
	script := `t=/sys/kernel/tracing
mount -t tracefs nodev $t || exit 98
mount -o remount,bind,ro $t || exit 98
[ -d /sys/kernel/debug/tracing ] && mount -o remount,bind,ro /sys/kernel/debug/tracing 2>/dev/null
[ -e $t/uprobe_events ] || { echo "no uprobe_events in tracefs" >&2; exit 98; }
[ -w $t/uprobe_events ] && { echo "tracefs still writable" >&2; exit 99; }
exec "$0" attach --pid "$1" -q --jsonl "$2"`
	r := runCommand(t, exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script, gpuprofBin, itoa(demo.PID()), steps))
	if r.code == 98 {
		testenv.Skip(t, "cannot mount tracefs read-only in a private mount namespace: %s", r.stderr)
	}
	demoStepsMatch(t, demo, r, steps, "attach with tracefs read-only")
}

var verifierFault struct {
	once sync.Once
	bin  string
	err  error
	out  []byte
}

// verifierFaultBin is gpuprof built with -tags verifierfault (one of its
// programs broken so that the kernel's verifier rejects it: bpf's
// breakForTest), built once, for the tests that need it.
func verifierFaultBin(t *testing.T) string {
	t.Helper()
	verifierFault.once.Do(func() {
		verifierFault.bin = filepath.Join(filepath.Dir(gpuprofBin), "gpuprof-verifierfault")
		verifierFault.out, verifierFault.err = exec.Command("go", "build", "-tags", "verifierfault", "-o", verifierFault.bin, ".").CombinedOutput()
	})
	if verifierFault.err != nil {
		t.Fatalf("build gpuprof -tags verifierfault: %v\n%s", verifierFault.err, verifierFault.out)
	}
	return verifierFault.bin
}

// TestVerifierRejection: the kernel's verifier rejecting a program (the
// real verifier, on a program broken for the test) ends gpuprof with one
// line that names a file holding the verifier's whole log, status 1, and
// the target untouched.
func TestVerifierRejection(t *testing.T) {
	testenv.RequireRoot(t)
	bin := verifierFaultBin(t)
	demo := testenv.StartDemo(t, "--steps", "100000", "--start-delay", "0.2")
	r := runCommand(t, exec.Command(bin, "attach", "--pid", itoa(demo.PID()), "-q"))
	oneLine(t, r, 1, "rejected a BPF program")
	m := regexp.MustCompile(`the verifier's whole log is in (\S+): `).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no log file named: %q", r.stderr)
	}
	t.Cleanup(func() { os.Remove(m[1]) })
	log, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.Count(log, []byte("\n"))
	if !bytes.Contains(log, []byte("R0 invalid mem access 'scalar'")) || !bytes.Contains(log, []byte("api_entry")) || n < 10 {
		t.Errorf("the log file (%d lines) does not hold the verifier's log:\n%s", n, log)
	}
	t.Logf("%s\n%d lines in %s", strings.TrimSpace(r.stderr), n, m[1])
	checkAsItWas(t, demo.PID(), "after the rejection")
}

// fakeNVMLRun attaches the gpuprof of fake GPUs (-tags nvmlfake) to a
// demo on GPU 0 with env's faults, its steps in steps.
func fakeNVMLRun(t *testing.T, pid int, steps string, env ...string) result {
	t.Helper()
	cmd := exec.Command(fakeNVMLBin, "attach", "--pid", itoa(pid), "-q", "--jsonl", steps, "--nvml-interval", "20ms")
	cmd.Env = append(append(os.Environ(), "GPUPROF_FAKE_NVML_PIDS="+itoa(pid)), env...)
	return runCommand(t, cmd)
}

// stepsWithGPU counts the --jsonl steps joined with a GPU's state.
func stepsWithGPU(t *testing.T, steps string) (all, joined int) {
	t.Helper()
	rows, err := os.ReadFile(steps)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(rows)), "\n") {
		all++
		if strings.Contains(l, `"gpu":{`) {
			joined++
		}
	}
	return all, joined
}

// TestNVMLFaults: NVML that hangs in a query (a GPU's power read a second
// into the run never returns) costs one warning naming the call and the GPU and no more GPU
// state, and gpuprof's exit does not wait on it; a GPU that falls off the
// bus is named once and the others are still read; NVML whose Init hangs
// is given up after its 30 s bound, with the profile going on without it.
// In each the steps match the job's log.
func TestNVMLFaults(t *testing.T) {
	testenv.RequireRoot(t)
	t.Run("query hangs", func(t *testing.T) {
		demo := testenv.StartDemo(t, "--steps", "250", "--start-delay", "0.4")
		steps := filepath.Join(t.TempDir(), "steps.jsonl")
		start := time.Now()
		r := fakeNVMLRun(t, demo.PID(), steps, "GPUPROF_FAKE_NVML_HANG=0")
		if r.code != 0 || strings.Count(r.stderr, "level=WARN") != 1 || !strings.Contains(r.stderr, `msg="NVML call did not return in time`) ||
			!strings.Contains(r.stderr, "call=GetPowerUsage gpu=0 ") {
			t.Fatalf("want exit 0 and one warning naming GetPowerUsage on GPU 0: %+v", r)
		}
		demo.Wait(t, 10*time.Second)
		if d := time.Since(start); d > 8*time.Second {
			t.Errorf("gpuprof took %v for a 2.5 s job: its exit waited on the hung call", d)
		}
		checkAgainstTruth(t, demo.Truth, steps)
		if all, joined := stepsWithGPU(t, steps); joined == 0 || joined == all {
			t.Errorf("%d of %d steps with GPU state: want those before the hang, and only those", joined, all)
		}
	})
	t.Run("GPU lost", func(t *testing.T) {
		demo := testenv.StartDemo(t, "--steps", "250", "--start-delay", "0.4")
		steps := filepath.Join(t.TempDir(), "steps.jsonl")
		// GPU 3 is lost; the job's GPU 0 is read on.
		r := fakeNVMLRun(t, demo.PID(), steps, "GPUPROF_FAKE_NVML_LOST=3")
		if r.code != 0 || strings.Count(r.stderr, "level=WARN") != 1 || !strings.Contains(r.stderr, `msg="GPU lost: no longer sampled" gpu=3 `) {
			t.Fatalf("want exit 0 and one warning naming GPU 3: %+v", r)
		}
		demo.Wait(t, 10*time.Second)
		checkAgainstTruth(t, demo.Truth, steps)
		if all, joined := stepsWithGPU(t, steps); joined < all*9/10 {
			t.Errorf("%d of %d steps with GPU 0's state after GPU 3 was lost", joined, all)
		}
		if !strings.Contains(r.stdout, "GPUs (NVML") {
			t.Errorf("no GPU table:\n%s", r.stdout)
		}
	})
	t.Run("Init hangs", func(t *testing.T) {
		// The job loads CUDA after gpuprof has given NVML up (30 s):
		// all its steps are seen.
		demo := testenv.StartDemo(t, "--steps", "150", "--load-delay", "33")
		steps := filepath.Join(t.TempDir(), "steps.jsonl")
		start := time.Now()
		r := fakeNVMLRun(t, demo.PID(), steps, "GPUPROF_FAKE_NVML_HANG=Init")
		t.Logf("attach with a hung NVML Init: %v", time.Since(start).Round(time.Millisecond))
		if r.code != 0 || !strings.Contains(r.stderr, `msg="GPU hardware state left out" err="NVML Init: NVML call did not return in time`) {
			t.Fatalf("want exit 0 and NVML left out: %+v", r)
		}
		demo.Wait(t, 10*time.Second)
		checkAgainstTruth(t, demo.Truth, steps)
		if _, joined := stepsWithGPU(t, steps); joined != 0 {
			t.Errorf("%d steps with GPU state from an NVML that never started", joined)
		}
	})
}
