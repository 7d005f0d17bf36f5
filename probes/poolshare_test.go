package probes

import (
	"os"
	"os/exec"
	"testing"
)

func TestTranslateSharedMapping(t *testing.T) {
	// The engine maps the semaphore's file at 0x7f00_0000_0000; the
	// trainer at 0x7e00_0000_1000, from file offset 0 too.
	engine := []mapping{{start: 0x400000, end: 0x401000, dev: "08:01", inode: 7},
		{start: 0x7f0000000000, end: 0x7f0000001000, dev: "00:1a", inode: 42}}
	trainer := []mapping{{start: 0x7e0000001000, end: 0x7e0000002000, dev: "00:1a", inode: 42}}
	if at, ok := translate(0x7f0000000020, engine, trainer); !ok || at != 0x7e0000001020 {
		t.Errorf("translate: %#x %v, want 0x7e0000001020", at, ok)
	}
	if _, ok := translate(0x400010, engine, trainer); ok {
		t.Error("a file the trainer does not map translated")
	}
	if _, ok := translate(0x500000, engine, trainer); ok {
		t.Error("an address in no mapping translated")
	}
	// Same file, another part of it.
	other := []mapping{{start: 0x1000, end: 0x2000, offset: 0x1000, dev: "00:1a", inode: 42}}
	if _, ok := translate(0x7f0000000020, engine, other); ok {
		t.Error("translated into a mapping of another part of the file")
	}
}

// TestSameReadEnd finds a pipe's read end in another process: a child
// that got it as fd 3, and the write end as fd 4.
func TestSameReadEnd(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	child := exec.Command("sleep", "10")
	child.ExtraFiles = []*os.File{r, w}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	if fd := sameReadEnd("/proc", os.Getpid(), int(r.Fd()), child.Process.Pid); fd != 3 {
		t.Errorf("read end in the child: fd %d, want 3", fd)
	}
	f, err := os.CreateTemp(t.TempDir(), "notapipe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fd := sameReadEnd("/proc", os.Getpid(), int(f.Fd()), child.Process.Pid); fd != -1 {
		t.Errorf("a regular file taken for a pipe: fd %d", fd)
	}
}
