package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
	"github.com/gpuprof/gpuprof/validate"
)

// Bad input (issue 30, item 3): each gets one line that says what to do,
// a non-zero exit and no stack trace, and leaves the target as it was.

// TestRefusesKernelThread: kthreadd (PID 2, PF_KTHREAD in its stat) is no
// job to attach to; gpuprof used to wait for it to load CUDA.
func TestRefusesKernelThread(t *testing.T) {
	testenv.RequireRoot(t)
	oneLine(t, gpuprof(t, "attach", "--pid", "2", "-d", "1s"), 1, "PID 2 (kthreadd) is a kernel thread")
	oneLine(t, gpuprof(t, "probes", "--pid", "2"), 1, "is a kernel thread")
}

// TestRefusesZombie: a process that exited and is not reaped yet.
func TestRefusesZombie(t *testing.T) {
	testenv.RequireRoot(t)
	child := exec.Command("true")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Wait() })
	pid := child.Process.Pid
	waitFor(t, func() bool { return procState(pid) == "Z" }, "PID %d to become a zombie", pid)
	oneLine(t, gpuprof(t, "attach", "--pid", itoa(pid), "-d", "1s"), 1, "has exited (a zombie its parent")
}

// TestRefusesInit: PID 1 that is an init system is refused; a PID 1 that
// is the job (a container whose entry point is the trainer) is not. Each
// is the PID 1 of a PID namespace of its own, gpuprof running in it: a
// script named init, and the same script named trainer.
func TestRefusesInit(t *testing.T) {
	testenv.RequireRoot(t)
	needTools(t, "unshare")
	dir := t.TempDir()
	script := "#!/bin/sh\n\"$@\"\n" // runs gpuprof as its child, and waits
	for _, name := range []string{"init", "trainer"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	inNamespace := func(pid1 string) result {
		return runCommand(t, exec.Command("unshare", "--pid", "--fork", "--mount-proc", filepath.Join(dir, pid1),
			gpuprofBin, "attach", "--pid", "1", "-d", "1s"))
	}
	oneLine(t, inNamespace("init"), 1, "PID 1 (init) is the init process, not a training job")
	if r := inNamespace("trainer"); r.code != 0 || !strings.Contains(r.stderr, "waiting for PID 1 to load a CUDA library") {
		t.Errorf("a PID 1 that is not an init: %+v", r)
	}
}

var hookBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(filepath.Dir(gpuprofBin), "gpuprof-testhooks")
	out, err := exec.Command("go", "build", "-tags", "gpuproftesthooks", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build gpuprof -tags gpuproftesthooks: %w\n%s", err, out)
	}
	return bin, nil
})

// reuseScript runs in a PID namespace of its own: a sleep is looked up by
// gpuprof (the test build, paused between lookup and attach), exits, and
// its PID is given to another sleep (ns_last_pid) before gpuprof goes on.
const reuseScript = `d=$1; bin=$2
sleep 30 & p=$!
GPUPROF_TEST_PAUSE=$d "$bin" attach -q --pid $p -d 1s >$d/stdout 2>$d/stderr &
g=$!
while [ ! -e $d/looked-up ]; do sleep 0.01; done
kill $p; wait $p
echo $((p-1)) >/proc/sys/kernel/ns_last_pid
sleep 30 & q=$!
echo $p $q >$d/pids
# The new process is named sh until its exec of sleep; gpuprof reads the
# name, so it goes on only once the exec is done.
while [ "$(cat /proc/$q/comm)" != sleep ]; do sleep 0.01; done
touch $d/go
wait $g; echo $? >$d/rc
kill $q`

// TestRefusesReusedPID: the PID looked up names another process by the
// time gpuprof attaches; it attaches to nothing (the start time in
// /proc/PID/stat, read once the pidfd holds the process, differs).
func TestRefusesReusedPID(t *testing.T) {
	testenv.RequireRoot(t)
	needTools(t, "unshare")
	bin, err := hookBin()
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 0; ; attempt++ {
		d := t.TempDir()
		if r := runCommand(t, exec.Command("unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", reuseScript, "sh", d, bin)); r.code != 0 {
			t.Fatalf("reuse script: %+v", r)
		}
		pids, _ := os.ReadFile(filepath.Join(d, "pids"))
		f := strings.Fields(string(pids))
		if len(f) != 2 || f[0] != f[1] {
			// A thread or process started in between took the PID.
			if attempt < 5 {
				continue
			}
			t.Fatalf("the PID was not reused in 6 tries (%q)", pids)
		}
		rc, _ := os.ReadFile(filepath.Join(d, "rc"))
		stderr, _ := os.ReadFile(filepath.Join(d, "stderr"))
		code, _ := strconv.Atoi(strings.TrimSpace(string(rc)))
		oneLine(t, result{code: code, stderr: withoutNVMLWarning(string(stderr))}, 1,
			"PID "+f[0]+" (sleep) exited and its PID was taken by another process (sleep) before gpuprof attached")
		return
	}
}

// withoutNVMLWarning drops the warning a machine without NVML gives as
// the GPUs are opened, which comes before the attach.
func withoutNVMLWarning(s string) string {
	var keep []string
	for line := range strings.Lines(s) {
		if !strings.Contains(line, "GPU hardware state left out") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "")
}

// TestMalformedInput: malformed --probe specs and durations are usage
// errors (exit 2) before anything is attached; they need no root.
func TestMalformedInput(t *testing.T) {
	sleep := startSleep(t)
	pid := itoa(sleep.Process.Pid)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--probe", "foo"}, "write ROLE=LIB:SYMBOL"},
		{[]string{"--probe", "data="}, "write ROLE=LIB:SYMBOL"},
		{[]string{"--probe", "data=libx"}, "write ROLE=LIB:SYMBOL"},
		{[]string{"--probe", "data=libx:"}, "write ROLE=LIB:SYMBOL"},
		{[]string{"--probe", "=libc:malloc"}, "role must be one of"},
		{[]string{"--probe", "bogus=libc:malloc"}, "role must be one of"},
		{[]string{"--probe", "data=py:mod"}, "write ROLE=py:MODULE:QUALNAME"},
		{[]string{"--probe", "data=py::f"}, "write ROLE=py:MODULE:QUALNAME"},
		{[]string{"-d", "abc"}, `invalid argument "abc" for "-d, --duration"`},
		{[]string{"-d", "-1s"}, "--duration -1s: give how long to profile"},
		{[]string{"--duration=-5m"}, "--duration -5m0s: give how long to profile"},
		{[]string{"--pool-interval", "abc"}, "must be a duration"},
		{[]string{"--rescan-interval", "1"}, "must be a duration"},
		{[]string{"--launch-duty", "-0.5"}, "fraction from 0 to 1"},
		{[]string{"--metrics-addr", "99999"}, "give a port"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			oneLine(t, gpuprof(t, append([]string{"attach", "--pid", pid}, c.args...)...), 2, c.want)
		})
	}
	if os.Geteuid() == 0 { // checked once the privileges are
		oneLine(t, gpuprof(t, "attach", "--pid", pid, "--nvml-interval", "0"), 2, "--nvml-interval 0s: give a positive duration")
		oneLine(t, gpuprof(t, "attach", "--pid", pid, "--pool-interval", "0"), 2, "--pool-interval 0s: give a positive duration")
		oneLine(t, gpuprof(t, "attach", "--pid", pid, "--pyroscope", "127.0.0.1:4040"), 2, "give an http:// or https:// URL")
	}
	if err := sleep.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the target did not outlive the refusals: %v", err)
	}
}

// TestOutputLinksRefused: an output path that is a symbolic link to a
// file, dangling or not, or a hard link, is not written through: one
// line, the file it leads to as it was, nothing created where it points.
func TestOutputLinksRefused(t *testing.T) {
	sleep := startSleep(t)
	pid := itoa(sleep.Process.Pid)
	dir := t.TempDir()
	victim := filepath.Join(dir, "someone-elses.txt")
	const content = "not gpuprof's to overwrite\n"
	if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--jsonl", "--record", "--trace", "--html"} {
		link := filepath.Join(dir, "link"+flag)
		dangling := filepath.Join(dir, "dangling"+flag)
		nowhere := filepath.Join(dir, "not-there"+flag)
		hard := filepath.Join(dir, "hard"+flag)
		if err := errorsOf(os.Symlink(victim, link), os.Symlink(nowhere, dangling), os.Link(victim, hard)); err != nil {
			t.Fatal(err)
		}
		oneLine(t, gpuprof(t, "attach", "--pid", pid, flag, link), 1, flag+": "+link+" is a symbolic link (to "+victim+")")
		oneLine(t, gpuprof(t, "attach", "--pid", pid, flag, dangling), 1, "gpuprof does not write through links")
		oneLine(t, gpuprof(t, "attach", "--pid", pid, flag, hard), 1, hard+" has 2 hard links")
		if _, err := os.Lstat(nowhere); err == nil {
			t.Errorf("%s: a dangling link's target was created", flag)
		}
		os.Remove(hard)
	}
	if b, _ := os.ReadFile(victim); string(b) != content {
		t.Errorf("the linked file was changed: %q", b)
	}
	if os.Geteuid() != 0 {
		return
	}
	// Root (sudo gpuprof) overwrites no other user's file either.
	theirs := filepath.Join(dir, "theirs.jsonl")
	if err := errorsOf(os.WriteFile(theirs, []byte(content), 0o644), os.Chown(theirs, 65534, 65534)); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gpuprofBin, "attach", "--pid", pid, "--jsonl", theirs)
	cmd.Env = append(os.Environ(), "SUDO_UID=1234")
	oneLine(t, runCommand(t, cmd), 1, "--jsonl: "+theirs+" belongs to user")
	if b, _ := os.ReadFile(theirs); string(b) != content {
		t.Errorf("another user's file was changed: %q", b)
	}
}

func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestFullDisk: --jsonl, then --record, on a file system that fills up. gpuprof goes on
// to the end of its run (-d), as it would for the live line, the other
// outputs and the summary, then says so in one line and exits 1; the
// steps (events) written before stay whole lines; the demo runs on to its end,
// detached from.
func TestFullDisk(t *testing.T) {
	testenv.RequireRoot(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", dir).CombinedOutput(); err != nil {
		testenv.Skip(t, "needs to mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	demo := testenv.StartDemo(t, "--steps", "800", "--start-delay", "0.3")
	steps := filepath.Join(dir, "steps.jsonl")
	r := gpuprof(t, "attach", "-q", "--pid", itoa(demo.PID()), "--jsonl", steps, "-d", "2s")
	r.stderr = withoutNVMLWarning(r.stderr)
	oneLine(t, r, 1, "write "+steps+": no space left on device: the steps before it are kept, whole")
	b, err := os.ReadFile(steps)
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); lines++ {
		var step map[string]any
		if err := json.Unmarshal(sc.Bytes(), &step); err != nil {
			t.Fatalf("line %d of the steps written before the disk filled: %v", lines+1, err)
		}
	}
	if lines == 0 {
		t.Error("no step kept")
	}
	if !strings.Contains(r.stdout, "steps") {
		t.Errorf("no summary:\n%s", r.stdout)
	}

	// The same for --record, attached again: the events written before
	// stay whole lines, a trace gpuprof replay reads.
	os.Remove(steps)
	trace := filepath.Join(dir, "trace.jsonl")
	r = gpuprof(t, "attach", "-q", "--pid", itoa(demo.PID()), "--record", trace, "-d", "1s")
	r.stderr = withoutNVMLWarning(r.stderr)
	oneLine(t, r, 1, "write "+trace+": no space left on device: the events before it are kept, whole")
	if _, evs, _, err := events.ReadTrace(trace); err != nil || len(evs) == 0 {
		t.Errorf("the trace written before the disk filled: %d events, %v", len(evs), err)
	}
	if err := demo.Cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the demo did not outlive gpuprof: %v", err)
	}
	demo.Wait(t, 20*time.Second)
	if rows, err := validate.ReadJSONL(demo.Truth); err != nil || len(rows) != 800 {
		t.Errorf("the demo logged %d steps (%v), want all 800", len(rows), err)
	}
}

// TestMetricsPortTaken: --metrics-addr on a port another program listens
// on fails before anything is attached.
func TestMetricsPortTaken(t *testing.T) {
	testenv.RequireRoot(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	sleep := startSleep(t)
	oneLine(t, gpuprof(t, "attach", "--pid", itoa(sleep.Process.Pid), "--metrics-addr", port), 1,
		"--metrics-addr 127.0.0.1:"+port+": listen tcp 127.0.0.1:"+port+": bind: address already in use")
}

// TestPyroscopeUnreachable: at the start, a profile server nothing
// listens at is refused in one line: most likely a typo.
func TestPyroscopeUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	sleep := startSleep(t)
	oneLine(t, gpuprof(t, "attach", "--pid", itoa(sleep.Process.Pid), "--pyroscope", closed), 1,
		"--pyroscope "+closed+": cannot reach the server")
}

// TestPyroscopeGoneMidRun: a profile server that goes away mid-run costs
// only its profiles: the run goes on to the job's end, says so once on
// stderr, counts the failures in the summary, and exits 1 saying how many
// profiles were not sent.
func TestPyroscopeGoneMidRun(t *testing.T) {
	testenv.RequireRoot(t)
	var got sync.WaitGroup
	got.Add(1)
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(got.Done)
	}))
	demo := testenv.StartDemo(t, "--steps", "600", "--start-delay", "0.3")
	cmd := exec.Command(gpuprofBin, "attach", "-q", "--pid", itoa(demo.PID()), "--pyroscope", srv.URL, "--pyroscope-interval", "1s")
	var res result
	done := make(chan struct{})
	go func() { res = runCommand(t, cmd); close(done) }()
	got.Wait() // the first push arrived: the server goes away
	srv.CloseClientConnections()
	srv.Close()
	<-done
	demo.Wait(t, 20*time.Second)
	// Profiles were lost: exit 1, the last line saying how many.
	lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
	if last := lines[len(lines)-1]; res.code != 1 || !strings.HasPrefix(last, "gpuprof: pyroscope: ") || !strings.Contains(last, "profiles not sent at exit") {
		t.Errorf("exit %d, last line %q; want 1 and the profiles not sent", res.code, last)
	}
	if n := strings.Count(res.stderr, "upload failed; profiling goes on"); n != 1 {
		t.Errorf("%d warnings about the failing pushes, want one:\n%s", n, res.stderr)
	}
	m := regexp.MustCompile(`attached [0-9.]+s, (\d+) steps`).FindStringSubmatch(res.stdout)
	if n, _ := strconv.Atoi(safeIndex(m, 1)); n < 500 {
		t.Errorf("the run did not go on to the demo's end (600 steps):\n%s", res.stdout)
	}
	if !strings.Contains(res.stdout, " failed") || strings.Contains(res.stdout, " 0 failed") {
		t.Errorf("the summary does not count the failed pushes:\n%s", res.stdout)
	}
	if rows, err := validate.ReadJSONL(demo.Truth); err != nil || len(rows) != 600 {
		t.Errorf("the demo logged %d steps (%v), want all 600", len(rows), err)
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5 s for "+format, args...)
		}
	}
}

// procState is /proc/PID/stat's state field ("" if unreadable).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 {
		return f[0]
	}
	return ""
}

// needTools skips loudly where a tool a test runs is missing.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, "needs %s(1)", tool)
		}
	}
}
