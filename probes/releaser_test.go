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

func startTestReleaser(t *testing.T) int {
	t.Helper()
	startReleaser(slog.Default())
	releaser.mu.Lock()
	defer releaser.mu.Unlock()
	if releaser.ctrl < 0 {
		t.Fatal("the link releaser did not start (see the warning above)")
	}
	return releaser.pid
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
	pid := startTestReleaser(t)
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

// TestReleaserClosesWhenGpuprofGoes: a batch whose socket shuts before
// gpuprof said close (gpuprof killed) is closed by the releaser.
func TestReleaserClosesWhenGpuprofGoes(t *testing.T) {
	pid := startTestReleaser(t)
	r, l := newPipeLink(t, pid)
	b, err := openBatch()
	if err != nil || b < 0 {
		t.Fatalf("openBatch: %d, %v", b, err)
	}
	if err := holdFDs(b, []int{l.FD()}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if !l.heldAtClose {
		t.Fatal("the releaser held no copy after holdFDs")
	}
	unix.Close(b) // as gpuprof's exit would
	if !readsEOF(t, r) {
		t.Fatal("the releaser kept the link open after gpuprof's socket shut")
	}
}
