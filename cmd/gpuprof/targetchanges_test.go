package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// The target changes under gpuprof: it exits while gpuprof attaches, execs
// into the job, lives in namespaces of its own, has its CUDA libraries
// deleted or replaced while it maps them, runs on libraries stripped to
// .dynsym, or has the CUDA runtime linked into its executable. (Elsewhere:
// libraries loaded after the attach, probes' TestLibraryLoadedAfterAttach
// and TestNVMLFaults/Init_hangs end to end; worker processes,
// TestChildrenEachWithTheirSteps.)

// standIns are the stand-in CUDA libraries the demo dlopens.
var standIns = []string{"libcudart.so.13", "libcuda.so.1"}

// copyFile copies src to dst, mode 0755.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// copyStandIns copies the stand-in libraries into a new directory.
func copyStandIns(t *testing.T) string {
	t.Helper()
	build, dir := testenv.Fixtures(t), t.TempDir()
	for _, lib := range standIns {
		copyFile(t, filepath.Join(build, lib), filepath.Join(dir, lib))
	}
	return dir
}

// waitMapped waits until pid maps a file whose maps line contains each of
// names.
func waitMapped(t *testing.T, pid int, names ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		all := true
		for _, n := range names {
			all = all && bytes.Contains(b, []byte(n))
		}
		if all {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("PID %d did not map %q within 10 s:\n%s", pid, names, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTargetExitsWhileAttaching: a job that ends as gpuprof starts. Gone
// before gpuprof looks: "no process", one line, status 1. Gone between the
// look and the attach: said so in one line, status 0 (exited but not yet
// reaped when gpuprof looked: a zombie, refused in one line, status 1). Gone while (or just
// after) gpuprof attaches: "PID N exited", the summary of what was seen,
// status 0. Jobs of 10 to 60 steps of ~10 ms, gpuprof started with them,
// land in each; the last must be seen at least once.
func TestTargetExitsWhileAttaching(t *testing.T) {
	testenv.RequireRoot(t)
	seen := map[string]int{}
	for _, n := range []int{10, 20, 30, 40, 60} {
		demo := testenv.StartDemo(t, "--steps", itoa(n))
		r := gpuprof(t, "attach", "--pid", itoa(demo.PID()), "-q")
		demo.Wait(t, 10*time.Second)
		pid := itoa(demo.PID())
		if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
			t.Fatalf("a job of %d steps: gpuprof crashed: %s", n, r.stderr)
		}
		switch {
		case r.code == 1 && strings.Contains(r.stderr, "no process with PID"):
			seen["gone before the look"]++
			oneLine(t, r, 1, "no process with PID "+pid)
		case r.code == 1 && strings.Contains(r.stderr, "has exited (a zombie"):
			// Exited, not yet reaped by the test when gpuprof looked.
			seen["gone before the look"]++
			oneLine(t, r, 1, "PID "+pid+" (demo-trainer) has exited")
		case strings.Contains(r.stderr, "exited before gpuprof could attach"):
			seen["gone before the attach"]++
			if r.code != 0 || strings.Count(r.stderr, "gpuprof: PID "+pid+" exited before gpuprof could attach\n") != 1 {
				t.Errorf("a job of %d steps gone before the attach: %+v", n, r)
			}
		default:
			seen["gone while attached"]++
			// The summary: of the job's steps, or that it made no CUDA
			// call while attached (it ended before its first).
			summary := strings.Contains(r.stdout, "gpuprof: PID "+pid+", attached") ||
				strings.HasPrefix(r.stdout, "gpuprof: no process made a CUDA call, attached")
			if r.code != 0 || strings.Count(r.stderr, "gpuprof: PID "+pid+" exited\n") != 1 || !summary {
				t.Errorf("a job of %d steps gone while attached: want %q once, the summary and exit 0: %+v", n, "PID "+pid+" exited", r)
			}
		}
		t.Logf("a job of %d steps: exit %d, stdout %q, stderr %q", n, r.code, firstLine(r.stdout), strings.TrimSpace(r.stderr))
	}
	t.Logf("%v", seen)
	if seen["gone while attached"] == 0 {
		t.Errorf("no job ended while gpuprof was attached: %v", seen)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// TestTargetExecs: gpuprof attached to a launcher (a shell) that execs the
// job follows it into its new image and sees every step.
func TestTargetExecs(t *testing.T) {
	testenv.RequireRoot(t)
	build := testenv.Fixtures(t)
	dir := t.TempDir()
	truth, steps := filepath.Join(dir, "truth.jsonl"), filepath.Join(dir, "steps.jsonl")
	launcher := exec.Command("sh", "-c", `sleep 1; exec "$0" --steps 150 --truth "$1" --start-delay 0.3`, filepath.Join(build, "demo-trainer"), truth)
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { launcher.Process.Kill(); launcher.Wait() })
	r := gpuprof(t, "attach", "--pid", itoa(launcher.Process.Pid), "-q", "--jsonl", steps)
	if r.code != 0 {
		t.Fatalf("attach to a launcher that execs the job: %+v", r)
	}
	if err := launcher.Wait(); err != nil {
		t.Fatalf("the job: %v", err)
	}
	checkAgainstTruth(t, truth, steps)
}

// TestTargetExecsAnotherCUDAProgram: a CUDA job that, its steps done,
// execs into another (a launcher's next stage in the same process): the
// first program's steps and the second's are each cut one to one with
// their logs, and the summary shows the two programs apart.
func TestTargetExecsAnotherCUDAProgram(t *testing.T) {
	testenv.RequireRoot(t)
	build := testenv.Fixtures(t)
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.jsonl"), filepath.Join(dir, "second.jsonl")
	steps := filepath.Join(dir, "steps.jsonl")
	trainer := filepath.Join(build, "demo-trainer")
	job := exec.Command(trainer, "--steps", "150", "--truth", first, "--start-delay", "0.5",
		"--exec-after", fmt.Sprintf("exec %s --steps 200 --truth %s --start-delay 0.3", trainer, second))
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Process.Kill(); job.Wait() })
	r := gpuprof(t, "attach", "--pid", itoa(job.Process.Pid), "-q", "--jsonl", steps)
	if err := job.Wait(); err != nil {
		t.Fatalf("the job: %v", err)
	}
	if r.code != 0 {
		t.Fatalf("attach to a job that execs another CUDA program: %+v", r)
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("PID %d, program 1 (before its exec)", job.Process.Pid)) {
		t.Errorf("the summary does not show the program before the exec apart:\n%s", r.stdout)
	}
	// Each log against the steps: the other program's are outside it.
	for _, truth := range []string{first, second} {
		res := checkAgainstTruth(t, truth, steps)
		t.Logf("%s: %d steps matched, %d outside it", filepath.Base(truth), res.Matched, res.Outside)
	}
}

// TestTargetInOwnNamespaces: a job in PID and mount namespaces of its own
// (a container's), its CUDA libraries on a tmpfs mounted in its namespace
// alone, so that the path its maps name does not exist on the host: gpuprof
// attached by its host PID reaches the libraries through /proc/PID/root
// and sees every step.
func TestTargetInOwnNamespaces(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		testenv.Skip(t, "needs unshare(1) for PID and mount namespaces")
	}
	build := testenv.Fixtures(t)
	dir := t.TempDir()
	libs := filepath.Join(dir, "libs") // empty on the host
	if err := os.Mkdir(libs, 0o755); err != nil {
		t.Fatal(err)
	}
	truth, steps := filepath.Join(dir, "truth.jsonl"), filepath.Join(dir, "steps.jsonl")
	script := `mount -t tmpfs tmpfs "$1" && cp "$0"/libcudart.so.13 "$0"/libcuda.so.1 "$1"/ || exit 98
exec "$0"/demo-trainer --libdir "$1" --truth "$2" --steps 200 --start-delay 1`
	ns := exec.Command("unshare", "--pid", "--fork", "--mount", "--mount-proc", "--propagation", "private",
		"sh", "-c", script, build, libs, truth)
	var nsOut bytes.Buffer
	ns.Stdout, ns.Stderr = &nsOut, &nsOut
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Process.Kill(); ns.Wait() })
	// The job is unshare's child (PID 1 inside).
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for pid == 0 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", ns.Process.Pid, ns.Process.Pid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			pid, _ = strconv.Atoi(f[0])
		}
		if time.Now().After(deadline) {
			t.Fatalf("unshare started no job: %s", nsOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitMapped(t, pid, filepath.Join(libs, "libcuda.so.1"))
	if _, err := os.Stat(filepath.Join(libs, "libcuda.so.1")); err == nil {
		t.Fatal("the job's library is visible on the host: the test would not test /proc/PID/root")
	}
	if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); !bytes.Contains(b, []byte("NSpid:\t"+itoa(pid)+"\t1\n")) {
		t.Fatalf("PID %d is not PID 1 of a namespace of its own:\n%s", pid, b)
	}
	r := gpuprof(t, "attach", "--pid", itoa(pid), "-q", "--allow-other-container", "--jsonl", steps)
	if r.code != 0 {
		t.Fatalf("attach to a job in namespaces of its own: %+v", r)
	}
	if err := ns.Wait(); err != nil {
		t.Fatalf("the job: %v: %s", err, nsOut.String())
	}
	checkAgainstTruth(t, truth, steps)
}

// TestMappedLibraryGone: the job's CUDA libraries deleted, or replaced by
// a rename over them, while it maps them (an upgrade under a running
// job): gpuprof attaches to the files the job maps (/proc/PID/map_files),
// not to whatever the paths name now, and sees every step.
func TestMappedLibraryGone(t *testing.T) {
	testenv.RequireRoot(t)
	for _, how := range []string{"deleted", "replaced"} {
		t.Run(how, func(t *testing.T) {
			libs := copyStandIns(t)
			demo := testenv.StartDemo(t, "--libdir", libs, "--steps", "200", "--start-delay", "1")
			waitMapped(t, demo.PID(), filepath.Join(libs, "libcuda.so.1"), filepath.Join(libs, "libcudart.so.13"))
			for _, lib := range standIns {
				path := filepath.Join(libs, lib)
				if how == "replaced" {
					// The same bytes, another file: probes on it
					// would never fire in the job.
					copyFile(t, path, path+".new")
					if err := os.Rename(path+".new", path); err != nil {
						t.Fatal(err)
					}
				} else if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
			}
			if maps := waitMapped(t, demo.PID(), "libcuda.so.1 (deleted)"); !strings.Contains(maps, "libcudart.so.13 (deleted)") {
				t.Fatalf("maps do not show the libraries deleted:\n%s", maps)
			}
			steps := filepath.Join(t.TempDir(), "steps.jsonl")
			r := gpuprof(t, "attach", "--pid", itoa(demo.PID()), "-q", "--jsonl", steps)
			demoStepsMatch(t, demo, r, steps, fmt.Sprintf("attach with the libraries %s", how))
		})
	}
}

// TestStrippedLibraries: libraries stripped of everything but .dynsym
// (strip --strip-all, as distributions ship them) are attached by their
// dynamic symbols.
func TestStrippedLibraries(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("strip"); err != nil {
		testenv.Skip(t, "needs strip(1) (binutils)")
	}
	libs := copyStandIns(t)
	for _, lib := range standIns {
		path := filepath.Join(libs, lib)
		if out, err := exec.Command("strip", "--strip-all", path).CombinedOutput(); err != nil {
			t.Fatalf("strip %s: %v: %s", lib, err, out)
		}
		if out, _ := exec.Command("readelf", "-S", "-W", path).Output(); bytes.Contains(out, []byte(".symtab")) || !bytes.Contains(out, []byte(".dynsym")) {
			t.Fatalf("%s after strip: want .dynsym and no .symtab:\n%s", lib, out)
		}
	}
	demo := testenv.StartDemo(t, "--libdir", libs, "--steps", "150", "--start-delay", "0.4")
	steps := filepath.Join(t.TempDir(), "steps.jsonl")
	r := gpuprof(t, "attach", "--pid", itoa(demo.PID()), "-q", "--jsonl", steps)
	demoStepsMatch(t, demo, r, steps, "attach to stripped libraries")
}

// TestStaticRuntime: a program with the CUDA runtime linked into its
// executable (nvcc's default, -cudart static; NCCL's too), its functions
// in the program's .symtab and exported nowhere. gpuprof does not look for
// the runtime in executables; it times the job at the driver,
// libcuda.so.1, which no program links statically, and every call of the
// runtime's ends in: the steps match the job's log.
func TestStaticRuntime(t *testing.T) {
	testenv.RequireRoot(t)
	build := testenv.Fixtures(t)
	dir := t.TempDir()
	truth, steps := filepath.Join(dir, "truth.jsonl"), filepath.Join(dir, "steps.jsonl")
	job := exec.Command(filepath.Join(build, "demo-trainer-static-runtime"), "--steps", "150", "--start-delay", "0.4", "--truth", truth)
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { job.Process.Kill(); job.Wait() })
	maps := waitMapped(t, job.Process.Pid, "libcuda.so.1")
	if strings.Contains(maps, "libcudart") {
		t.Fatalf("the static-runtime job maps a runtime library:\n%s", maps)
	}
	r := gpuprof(t, "attach", "--pid", itoa(job.Process.Pid), "--jsonl", steps)
	if err := job.Wait(); err != nil {
		t.Fatalf("the job: %v", err)
	}
	if r.code != 0 || !strings.Contains(r.stderr, "libcuda.so.1 (driver)") || strings.Contains(r.stderr, "(runtime)") {
		t.Fatalf("attach to a static-runtime job: want the driver alone attached: %+v", r)
	}
	checkAgainstTruth(t, truth, steps)
}

// TestMappedLibraryGoneWithoutSysAdmin: without CAP_SYS_ADMIN (a user
// with only the capabilities gpuprof asks for), /proc/PID/map_files cannot
// be followed: a library deleted while mapped is refused in one line that
// says what to do, status 1, and the job is left as it was.
func TestMappedLibraryGoneWithoutSysAdmin(t *testing.T) {
	testenv.RequireRoot(t)
	build := testenv.Fixtures(t)
	libs := worldDir(t)
	for _, lib := range standIns {
		copyFile(t, filepath.Join(build, lib), filepath.Join(libs, lib))
	}
	job, _ := startDemoAs(t, 65534, "--steps", "100000", "--start-delay", "0.2", "--libdir", libs)
	waitMapped(t, job.Process.Pid, filepath.Join(libs, "libcuda.so.1"), filepath.Join(libs, "libcudart.so.13"))
	for _, lib := range standIns {
		if err := os.Remove(filepath.Join(libs, lib)); err != nil {
			t.Fatal(err)
		}
	}
	waitMapped(t, job.Process.Pid, "libcuda.so.1 (deleted)")
	caps := "+bpf,+perfmon,+sys_ptrace,+dac_read_search"
	r := runCommand(t, exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps="+caps, "--ambient-caps="+caps, gpuprofBin, "attach", "--pid", itoa(job.Process.Pid), "-q", "--no-nvml"))
	oneLine(t, r, 1, "was deleted or replaced while PID "+itoa(job.Process.Pid)+" maps it")
	checkAsItWas(t, job.Process.Pid, "after the refusal")
}
