// Package testenv gives tests what they need from the machine: root for
// real uprobes, and the C fixtures in testdata/ built. A test that cannot
// run here skips loudly with the reason; with GPUPROF_REQUIRE_INTEGRATION=1
// (set by CI) it fails instead, so CI cannot pass by skipping.
package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/watchpoint"
)

// Skip skips, or fails when integration tests are required.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("GPUPROF_REQUIRE_INTEGRATION") == "1" {
		t.Fatalf("SKIP not allowed (GPUPROF_REQUIRE_INTEGRATION=1): "+format, args...)
	}
	t.Skipf("SKIP: "+format, args...)
}

// NoWatchpoints says why hardware watchpoints do not trap on this
// machine (watchpoint.ErrNoTraps), or "" where they do. A test of
// gpuprof's Python-function timing checks there that gpuprof says so, then
// skips the timing with SkipNoWatchpoints.
func NoWatchpoints(t testing.TB) string {
	t.Helper()
	RequireRoot(t)
	err := watchpoint.Fires()
	switch {
	case err == nil:
		return ""
	case errors.Is(err, watchpoint.ErrNoTraps):
		return err.Error()
	}
	Skip(t, "%v", err)
	return ""
}

// SkipNoWatchpoints skips, also under GPUPROF_REQUIRE_INTEGRATION, a
// test that times calls by hardware watchpoints where the machine does
// not trap on them: no install gives a VM's hypervisor that, and CI runs
// on the machine its session had. make test prints the machine's verdict
// first (internal/watchpoint's TestFires), so the skip is not silent.
func SkipNoWatchpoints(t testing.TB, why string) {
	t.Helper()
	t.Skipf("SKIP: %s: calls timed by watchpoints cannot be checked here", why)
}

// skipShort skips a test of the integration tier under -short (make
// check, the fast tier: no root, no fixtures); make test runs it.
func skipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short (make check): %s; make test runs it", what)
	}
}

// RequireRoot skips unless the test runs as root, which loading BPF
// programs and attaching uprobes to other processes needs.
func RequireRoot(t testing.TB) {
	t.Helper()
	skipShort(t, "attaches real uprobes")
	if os.Geteuid() != 0 {
		Skip(t, "needs root to load BPF programs and attach uprobes (run make test as root)")
	}
}

// Root is the repository root: the nearest directory above the working
// directory (go test runs in the package's) that holds go.mod.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

var buildOnce sync.Once
var buildErr error
var buildOut []byte

// Fixtures builds the C fixtures (stand-in CUDA libraries, demo trainer,
// hitloop) once and returns the directory holding them.
func Fixtures(t testing.TB) string {
	t.Helper()
	skipShort(t, "builds and runs the C fixtures")
	dir := filepath.Join(Root(), "testdata")
	buildOnce.Do(func() {
		cmd := exec.Command("make", "-s", "-C", dir)
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("build testdata fixtures (make -C testdata): %v\n%s", buildErr, buildOut)
	}
	return filepath.Join(dir, "build")
}

// Demo is a running demo-trainer (testdata/demo) logging its own truth.
type Demo struct {
	Cmd   *exec.Cmd
	Truth string // its truth log
	out   bytes.Buffer
	done  chan error
}

// StartDemo starts the demo trainer with args; it is killed when the test
// ends.
func StartDemo(t testing.TB, args ...string) *Demo {
	t.Helper()
	dir := Fixtures(t)
	d := &Demo{Truth: filepath.Join(t.TempDir(), "truth.jsonl"), done: make(chan error, 1)}
	d.Cmd = exec.Command(filepath.Join(dir, "demo-trainer"), append([]string{"--truth", d.Truth}, args...)...)
	d.Cmd.Stdout, d.Cmd.Stderr = &d.out, &d.out
	if err := d.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := d.Cmd.Wait()
		if err != nil {
			err = fmt.Errorf("demo-trainer: %w: %s", err, d.out.String())
		}
		d.done <- err
	}()
	t.Cleanup(func() { d.Cmd.Process.Kill() })
	return d
}

// PID is the demo's process ID.
func (d *Demo) PID() int { return d.Cmd.Process.Pid }

// Wait waits for the demo to exit, failing the test if it fails or
// outlives within.
func (d *Demo) Wait(t testing.TB, within time.Duration) {
	t.Helper()
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(within):
		t.Fatalf("demo-trainer did not finish within %v", within)
	}
}

// Stop ends a demo that is still running (SIGTERM) and waits for it,
// whatever it exits with: for a test that decides when a long demo ends.
func (d *Demo) Stop(t testing.TB) {
	t.Helper()
	d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		t.Fatal("demo-trainer did not end within 10 s of SIGTERM")
	}
}

// Pythons are the CPythons CI has: pyenv's 3.10 to 3.13 (shared libpython)
// and Debian's 3.11 (libpython linked into the executable), by name. A
// missing pyenv version skips loudly.
func Pythons(t testing.TB) map[string]string {
	t.Helper()
	root := os.Getenv("PYENV_ROOT")
	if root == "" {
		root = "/root/.pyenv"
	}
	found := map[string]string{}
	for _, v := range []string{"3.10", "3.11", "3.12", "3.13"} {
		matches, _ := filepath.Glob(filepath.Join(root, "versions", v+".*", "bin", "python"+v))
		if len(matches) == 0 {
			Skip(t, "pyenv's Python %s is not installed under %s", v, root)
			continue
		}
		found["pyenv-"+v] = matches[0]
	}
	if _, err := os.Stat("/usr/bin/python3.11"); err == nil {
		found["debian-3.11"] = "/usr/bin/python3.11"
	}
	return found
}

// EndToEndPython is the interpreter the end-to-end tests (cmd/gpuprof)
// run their Python loops on: pyenv's 3.12. The CPython matrix (frame
// layouts, wait probes, pools, watched functions on each version) is
// tested once, in pymem and probes, where that support lives. Missing, it
// skips loudly.
func EndToEndPython(t testing.TB) string {
	t.Helper()
	python, ok := Pythons(t)["pyenv-3.12"]
	if !ok {
		Skip(t, "needs pyenv's Python 3.12, the end-to-end tests' interpreter")
	}
	return python
}

// WaitForLines waits until the file has n lines, exited is closed (nil:
// never) or within passes, and returns how many it has.
func WaitForLines(path string, n int, within time.Duration, exited <-chan struct{}) int {
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(path)
		got := bytes.Count(b, []byte("\n"))
		if got >= n || time.Now().After(deadline) {
			return got
		}
		select {
		case <-exited:
			return got
		case <-time.After(20 * time.Millisecond):
		}
	}
}
