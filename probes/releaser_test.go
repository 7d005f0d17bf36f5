package probes

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestMain runs the test binary as the link releaser where it is started
// as one, and has every session of these tests close its links through
// one (the binary is its own releaser, as gpuprof is).
func TestMain(m *testing.M) {
	if IsReleaser() {
		os.Exit(RunReleaser())
	}
	if exe, err := os.Executable(); err == nil {
		UseReleaser(exe)
	}
	os.Exit(m.Run())
}

// pipeLink stands in for a uprobe link: a pipe's write end, whose last
// close the read end sees as EOF. Close records whether the releaser held
// a copy at the time (so ours was not the last).
type pipeLink struct {
	link.Link
	w           *os.File
	heldAtClose bool
	releaserPID int
}

func (l *pipeLink) FD() int { return int(l.w.Fd()) }

func (l *pipeLink) Close() error {
	l.heldAtClose = holdsFileOf(l.releaserPID, l.w)
	return l.w.Close()
}

// holdsFileOf says whether process pid has a descriptor for f's file.
func holdsFileOf(pid int, f *os.File) bool {
	want, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		return false
	}
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if got, err := os.Readlink(fd); err == nil && got == want {
			return true
		}
	}
	return false
}

// testReleaser is the process's releaser (started as Open starts it).
func testReleaser(t *testing.T) *linkReleaser {
	t.Helper()
	startReleaser(slog.Default())
	r := theReleaser()
	if r == nil {
		t.Fatal("the link releaser did not start (see the warning above)")
	}
	return r
}

// ownReleaser is a releaser of the test's own, shut at the end.
func ownReleaser(t *testing.T) *linkReleaser {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, err := newLinkReleaser(exe, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.shut)
	return r
}

// readsEOF says whether r's pipe reads end of file within 5 s: every copy
// of its write end closed.
func readsEOF(t *testing.T, r *os.File) bool {
	t.Helper()
	r.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	n, err := r.Read(b[:])
	return n == 0 && errors.Is(err, io.EOF)
}

func newPipeLink(t *testing.T, pid int) (*os.File, *pipeLink) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, &pipeLink{w: w, releaserPID: pid}
}

// TestReleaserDropsTheLastReference: closeAtOnce hands the links to the
// releaser, closes its own copies while the releaser still holds one, and
// returns once the releaser has closed those too.
func TestReleaserDropsTheLastReference(t *testing.T) {
	pid := testReleaser(t).pid
	var links []link.Link
	var reads []*os.File
	for range 300 { // more than one message's worth of descriptors
		r, l := newPipeLink(t, pid)
		links = append(links, l)
		reads = append(reads, r)
	}
	if err := closeAtOnce(links); err != nil {
		t.Fatal(err)
	}
	for i, l := range links {
		if !l.(*pipeLink).heldAtClose {
			t.Fatalf("link %d: the releaser held no copy when gpuprof closed its own (so gpuprof's close was the last)", i)
		}
		if !readsEOF(t, reads[i]) {
			t.Fatalf("link %d: still open after closeAtOnce returned", i)
		}
	}
}

// TestReleaserClosesWhenGpuprofGoes: files handed over, and links made,
// before gpuprof said close are closed by the releaser once gpuprof's
// sockets shut (gpuprof killed).
func TestReleaserClosesWhenGpuprofGoes(t *testing.T) {
	r := ownReleaser(t)
	rd, l := newPipeLink(t, r.pid)
	b, err := r.openBatch()
	if err != nil {
		t.Fatalf("openBatch: %v", err)
	}
	if err := holdFDs(b, []int{l.FD()}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if !l.heldAtClose {
		t.Fatal("the releaser held no copy after holdFDs")
	}
	unix.Close(b) // as gpuprof's exit would
	if !readsEOF(t, rd) {
		t.Fatal("the releaser kept a handed-over file open after gpuprof's socket shut")
	}
	if os.Geteuid() != 0 {
		testenv.Skip(t, "the made links' part needs root (uprobes)")
	}
	s := openSession(t)
	h := startHitloop(t, "cuLaunchKernel")
	pid := h.cmd.Process.Pid
	made, ok := r.make(planFor(t, pid, only("cuLaunchKernel"))[0].File.HostPath, s.objs.LaunchEntry,
		&link.UprobeMultiOptions{Addresses: launchOffsets(t, pid), PID: uint32(pid)}, false)
	if !ok {
		t.Fatal("the releaser did not make the link")
	}
	h.mustCall(t, 1000)
	made.Close() // ours; the releaser's copy holds the probe in
	if n := releaserLinks(t, r.pid); n != 1 {
		t.Fatalf("the releaser holds %d links, want the 1 it made", n)
	}
	r.shut()
	deadline := time.Now().Add(5 * time.Second)
	for uprobeLinksOn(t, pid) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the made link outlived gpuprof's socket by 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReleaserMakesLinks: the session's links are made in the releaser,
// which keeps a copy of each until a close names it.
func TestReleaserMakesLinks(t *testing.T) {
	testenv.RequireRoot(t)
	s := openSession(t)
	r := testReleaser(t)
	h := startHitloop(t, "cuLaunchKernel")
	pid := h.cmd.Process.Pid
	before := releaserLinks(t, r.pid)
	var links []link.Link
	for _, lp := range planFor(t, pid, func(Probe) bool { return true }) {
		ls, err := attachPlan(s.objs, pid, lp)
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, ls...)
	}
	for _, l := range links {
		if r, ok := l.(returnLink); ok {
			l = r.Link
		}
		if _, ok := l.(madeLink); !ok {
			t.Fatalf("a link of type %T, not made by the releaser", l)
		}
	}
	if n := releaserLinks(t, r.pid) - before; n != len(links) {
		t.Fatalf("the releaser holds %d more links, want the %d made", n, len(links))
	}
	if n := uprobeLinksOn(t, pid); n != len(links) {
		t.Fatalf("%d uprobe_multi links on PID %d, want %d", n, pid, len(links))
	}
	h.mustCall(t, 1000)
	if err := closeAtOnce(links); err != nil {
		t.Fatal(err)
	}
	if n := releaserLinks(t, r.pid) - before; n != 0 {
		t.Errorf("the releaser still holds %d of the links closed", n)
	}
	if n := uprobeLinksOn(t, pid); n != 0 {
		t.Errorf("%d uprobe_multi links left on PID %d after their close", n, pid)
	}
}

// launchOffsets are cuLaunchKernel's probe offsets in the hitloop.
func launchOffsets(t *testing.T, pid int) []uint64 {
	t.Helper()
	var offs []uint64
	for _, lp := range planFor(t, pid, only("cuLaunchKernel")) {
		for _, p := range lp.Probes {
			offs = append(offs, p.Address())
		}
	}
	if len(offs) == 0 {
		t.Fatal("no cuLaunchKernel probe planned")
	}
	return offs
}

// releaserLinks counts the BPF links the process pid holds.
func releaserLinks(t *testing.T, pid int) int {
	t.Helper()
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == "anon_inode:bpf_link" {
			n++
		}
	}
	return n
}

// uprobeLinksOn counts the uprobe_multi links whose filter is pid.
func uprobeLinksOn(t *testing.T, pid int) int {
	t.Helper()
	links, err := testenv.UprobeLinksOn(pid)
	if err != nil {
		t.Fatal(err)
	}
	return len(links)
}
