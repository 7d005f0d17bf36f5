package probes

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// BenchmarkPythonLockProbe measures what the Python wait probes add: to an
// uncontended acquire (no semaphore wait: nothing should be added) and to a
// round of two blocking waits, whose return probes walk the thread list
// and read the frames (the minimum wait to report is set to zero here, so
// every wait is read). The BPF programs' own run time per hit is read from
// the kernel's program statistics.
//
//	sudo go test -run '^$' -bench PythonLockProbe -benchtime 1x ./probes
func BenchmarkPythonLockProbe(b *testing.B) {
	testenv.RequireRoot(b)
	cfg := DefaultConfig()
	cfg.PyMinWait = 0
	s, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		defer st.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	waits := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx, func(batch []events.Event, _ []LibraryPlan) {
			for _, e := range batch {
				if e.Kind == events.KindPyWait && len(e.Frames) > 0 {
					waits++
				}
			}
		})
	}()
	defer func() { cancel(); <-done }()
	script := filepath.Join(testenv.Root(), "testdata", "python", "lockloop.py")
	pythons := testenv.Pythons(b)
	for _, name := range []string{"pyenv-3.12", "debian-3.11"} {
		python, ok := pythons[name]
		if !ok {
			continue
		}
		for _, mode := range []string{"uncontended", "pingpong"} {
			n := 200000
			if mode == "pingpong" {
				n = 20000
			}
			cmd, in, round := startLoop(b, python, script, mode)
			without := round(n)
			// Attached as gpuprof attaches: the session names the frames
			// of the waits of its targets.
			if _, err := s.Attach(cmd.Process.Pid); err != nil {
				b.Fatal(err)
			}
			before := waits
			st0, _ := s.objs.PyLockReturn.Stats()
			with := round(n)
			st1, _ := s.objs.PyLockReturn.Stats()
			time.Sleep(50 * time.Millisecond)
			read := waits - before
			if err := s.Detach(cmd.Process.Pid); err != nil {
				b.Fatal(err)
			}
			in.Close()
			cmd.Wait()
			per := "acquire"
			if mode == "pingpong" {
				per = "round of 2 blocking waits"
			}
			prog := 0.0
			if st0 != nil && st1 != nil && st1.RunCount > st0.RunCount {
				prog = float64(st1.Runtime-st0.Runtime) / float64(st1.RunCount-st0.RunCount)
			}
			b.Logf("%-11s %-11s %8.0f ns a %s without, %8.0f with: %+.0f ns; %d waits read with frames, return program %.0f ns a hit",
				name, mode, without, per, with, with-without, read, prog)
			b.ReportMetric(with-without, name+"-"+mode+"-ns")
		}
	}
}

// startLoop runs a benchmark loop script (lockloop.py, callloop.py): it
// prints "ready", then for each line N on stdin runs N rounds and prints
// the mean ns a round. round(n) is the best of three such runs.
func startLoop(b *testing.B, python, script string, args ...string) (*exec.Cmd, io.WriteCloser, func(n int) float64) {
	cmd := exec.Command(python, append([]string{script}, args...)...)
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	out := bufio.NewReader(outPipe)
	out.ReadString('\n') // ready
	return cmd, in, func(n int) float64 {
		var best []float64
		for range 3 {
			fmt.Fprintf(in, "%d\n", n)
			line, _ := out.ReadString('\n')
			v, _ := strconv.ParseFloat(strings.TrimSpace(line), 64)
			best = append(best, v)
		}
		return slices.Min(best)
	}
}
