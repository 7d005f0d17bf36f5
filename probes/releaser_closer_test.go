package probes

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
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

// BenchmarkCloser is what a closer costs to start and end: the CPU
// paid for each link closed mid-session.
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
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				in.Close()
				feed.Close()
				cmd.Wait()
			}
		})
	}
}
