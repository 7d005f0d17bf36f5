package probes

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCloserHoldsFilesUntilItsInputEnds: a closer (closerELF where a
// memfd runs, this binary otherwise) holds the files it was started with
// until its input ends, then its exit drops them.
func TestCloserHoldsFilesUntilItsInputEnds(t *testing.T) {
	for _, name := range []string{"elf", "gpuprof binary"} {
		t.Run(name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			in, feed, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd := binaryCloserCmd(in, []*os.File{w})
			if name == "elf" {
				if closerProgram() == "" {
					t.Skip("SKIP: no closer ELF on this machine (a memfd cannot be made executable): the gpuprof binary closes")
				}
				cmd = closerCmd(in, []*os.File{w})
			}
			if err := cmd.Start(); err != nil {
				t.Fatalf("start %s: %v", cmd.Path, err)
			}
			in.Close()
			w.Close()
			exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
			if name == "elf" && !strings.Contains(exe, "gpuprof-closer") {
				t.Errorf("the closer runs %q, want the memfd gpuprof-closer", exe)
			}
			r.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			var b [1]byte
			if n, err := r.Read(b[:]); !os.IsTimeout(err) {
				t.Fatalf("the pipe's write end was let go of before the closer's input ended: read %d, %v", n, err)
			}
			feed.Write([]byte("more than nothing"))
			feed.Close()
			if !readsEOF(t, r) {
				t.Fatal("the closer still holds the pipe 5 s after its input ended")
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("the closer: %v", err)
			}
		})
	}
}

// BenchmarkCloser is what a closer costs to start (until it runs, as
// startCloser waits) and end: the CPU paid for each link closed
// mid-session.
func BenchmarkCloser(b *testing.B) {
	for _, name := range []string{"elf", "gpuprof binary"} {
		b.Run(name, func(b *testing.B) {
			if name == "elf" && closerProgram() == "" {
				b.Skip("SKIP: no closer ELF on this machine")
			}
			for b.Loop() {
				in, feed, err := os.Pipe()
				if err != nil {
					b.Fatal(err)
				}
				cmd := closerCmd(in, nil)
				if name != "elf" {
					cmd = binaryCloserCmd(in, nil)
				}
				if err := startCloser(cmd); err != nil {
					b.Fatal(err)
				}
				in.Close()
				feed.Close()
				cmd.Wait()
			}
		})
	}
}

// TestNoCloserKeepsTheFiles: where no closer can start (gpuprof's cgroup
// being killed kills its children at birth), the releaser does not close
// what may be a link's last reference itself, in a close a SIGKILL can
// cut short: it keeps the files for its own exit.
func TestNoCloserKeepsTheFiles(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	saved := startCloser
	startCloser = func(*exec.Cmd) error { return errors.New("killed at birth") }
	t.Cleanup(func() {
		startCloser = saved
		keptForExit.Lock()
		for _, f := range keptForExit.files {
			f.Close()
		}
		keptForExit.files = nil
		keptForExit.Unlock()
	})
	fd, err := unix.Dup(int(w.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	closeInCloser([]int{fd})
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Fatalf("the file was closed (%v), want it kept for the releaser's exit", err)
	}
	keptForExit.Lock()
	n := len(keptForExit.files)
	keptForExit.Unlock()
	if n != 1 {
		t.Errorf("%d files kept for the exit, want 1", n)
	}
	r.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := r.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the pipe's reader got %v, want no end: its writer kept open", err)
	}
}
