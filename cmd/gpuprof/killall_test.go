package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestKillingGpuprofsCgroupLeavesTargetAsItWas runs gpuprof in a cgroup
// of its own and kills the cgroup (cgroup.kill), as a supervisor stopping
// gpuprof's unit or deleting its pod does: gpuprof, its link releaser and
// the releaser's closers die at once, while steady, at a SIGINT, and as
// the releaser closes links in the detach it began. The kernel takes each probe out
// as its link's last file goes; a link whose last close was in flight in
// a killed process stayed in the target's code ("failed to unregister,
// leaking uprobe": 2 of the 4 kills into a detach before the closers,
// 2026-12-03).
func TestKillingGpuprofsCgroupLeavesTargetAsItWas(t *testing.T) {
	testenv.RequireRoot(t)
	if cgroup2Mount() == "" {
		t.Skip("SKIP: no cgroup2 file system is mounted: a cgroup cannot be killed whole here")
	}
	demo := hotDemo(t)
	startHog(t)
	pid := demo.PID()
	// Steady; at once after a SIGINT; and, six times, the moment the
	// first of the target's links goes, as the others are being closed.
	stages := []string{"steady", "at the SIGINT"}
	for range 6 {
		stages = append(stages, "as its links go")
	}
	for i, when := range stages {
		// A cgroup each: on this 6.18 kernel a process cloned into a
		// cgroup once killed (CLONE_INTO_CGROUP) is killed at its birth.
		cg := newTestCgroup(t, i)
		r := startAttachWith(t, pid, cg.put)
		r.waitSteps(t, 20, 15*time.Second)
		checkProbed(t, pid, when)
		links, _ := uprobeLinksOn(pid)
		had := len(links)
		if when != "steady" {
			r.signal(syscall.SIGINT)
		}
		if when == "as its links go" {
			deadline := time.Now().Add(5 * time.Second)
			for len(links) == had && time.Now().Before(deadline) {
				links, _ = uprobeLinksOn(pid)
			}
		}
		procs := cg.kill(t)
		st := r.wait(t, 20*time.Second)
		t.Logf("%s: %d processes killed (gpuprof %v) with %d of %d uprobe links on the target", when, procs, st, len(links), had)
		checkAsItWasAfter(t, pid, syscall.SIGKILL, when)
	}
	checkTargetRuns(t, demo, "after the kills")
	checkAttachesAgain(t, pid)
}

// testCgroup is a cgroup v2 group of the test's own.
type testCgroup struct {
	dir string
	fd  int
}

// newTestCgroup makes cgroup n under the cgroup2 mount, removed at the
// test's end; it skips where there is none that can be killed whole.
func newTestCgroup(t *testing.T, n int) *testCgroup {
	t.Helper()
	mount := cgroup2Mount()
	if mount == "" {
		t.Skip("SKIP: no cgroup2 file system is mounted: a cgroup cannot be killed whole here")
	}
	dir := filepath.Join(mount, fmt.Sprintf("gpuprof-test-%d-%d", os.Getpid(), n))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("SKIP: make a cgroup under %s: %v", mount, err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		for i := 0; i < 200 && os.Remove(dir) != nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
	})
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		t.Skipf("SKIP: the cgroup has no cgroup.kill (Linux 5.14): %v", err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	return &testCgroup{dir: dir, fd: fd}
}

// put starts cmd in the cgroup (clone3's CLONE_INTO_CGROUP).
func (c *testCgroup) put(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: c.fd}
}

// kill kills every process in the cgroup at once and waits until none is
// left; it returns how many there were.
func (c *testCgroup) kill(t *testing.T) int {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	procs := len(strings.Fields(string(b)))
	if err := os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		t.Fatalf("kill the cgroup: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.events"))
		if strings.Contains(string(b), "populated 0") {
			return procs
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cgroup's processes lived on 10 s after its kill: %s", b)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// cgroup2Mount is where the cgroup2 file system is mounted, "" where it
// is not.
func cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mount-point options ... - fstype source ...
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				return fields[4]
			}
		}
	}
	return ""
}
