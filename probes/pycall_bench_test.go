package probes

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// BenchmarkPythonCallProbe measures what timing a Python function with
// hardware watchpoints (--probe ROLE=py:MODULE:QUALNAME) adds to each of
// its calls: a loop calling a function that does nothing, without and
// with the watchpoints on its start and return, and the BPF program's own
// run time per hit from the kernel's statistics.
//
//	sudo go test -run '^$' -bench PythonCallProbe -benchtime 1x ./probes
func BenchmarkPythonCallProbe(b *testing.B) {
	testenv.RequireRoot(b)
	u, err := ParseUserProbe("data=py:__main__:tiny", 0)
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.User = []UserProbe{u}
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		defer st.Close()
	}
	script := filepath.Join(testenv.Root(), "testdata", "python", "callloop.py")
	pythons := testenv.Pythons(b)
	for _, name := range []string{"pyenv-3.10", "pyenv-3.12", "pyenv-3.13"} {
		python, ok := pythons[name]
		if !ok {
			continue
		}
		const n = 20000
		cmd, in, round := startLoop(b, python, script)
		without := round(n)
		s, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Attach(cmd.Process.Pid); err != nil {
			b.Fatal(err)
		}
		watched := len(s.targets[cmd.Process.Pid].pyCalls) == 1 && s.targets[cmd.Process.Pid].pyCalls[u.ID].events != nil
		st0, _ := s.objs.PyCallSite.Stats()
		with := round(n)
		st1, _ := s.objs.PyCallSite.Stats()
		s.Close()
		after := round(n) // detached: the watchpoints are gone
		in.Close()
		cmd.Wait()
		if !watched {
			b.Fatalf("%s: tiny() not watched", name)
		}
		prog := 0.0
		if st0 != nil && st1 != nil && st1.RunCount > st0.RunCount {
			prog = float64(st1.Runtime-st0.Runtime) / float64(st1.RunCount-st0.RunCount)
		}
		b.Logf("%-10s %8.0f ns a call without, %8.0f with: %+.0f ns (two watchpoint traps); BPF program %.0f ns a hit; %.0f ns once detached",
			name, without, with, with-without, prog, after)
		b.ReportMetric(with-without, name+"-ns/call")
	}
}

// BenchmarkWatchedThreadSwitch measures what a watchpoint costs a thread
// that never runs the watched code: two threads handing control back and
// forth (lockloop.py pingpong, two blocking waits a round), without and
// with a watchpoint on an address neither touches. The kernel switches a
// watched thread's debug registers with it, so each context switch pays;
// why gpuprof's own whole gets watch only the threads seen waiting in a
// get.
//
//	sudo go test -run '^$' -bench WatchedThreadSwitch -benchtime 1x ./probes
func BenchmarkWatchedThreadSwitch(b *testing.B) {
	testenv.RequireRoot(b)
	s, err := Open(DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	python, ok := testenv.Pythons(b)["pyenv-3.12"]
	if !ok {
		testenv.Skip(b, "needs pyenv's 3.12")
	}
	const n = 20000
	script := filepath.Join(testenv.Root(), "testdata", "python", "lockloop.py")
	cmd, in, round := startLoop(b, python, script, "pingpong")
	defer func() { in.Close(); cmd.Wait() }()
	without := round(n)
	tids, err := threadsOf("/proc", cmd.Process.Pid)
	if err != nil {
		b.Fatal(err)
	}
	var fds []int
	for _, tid := range tids {
		// An address no code of the job reads: the watchpoint never fires.
		fd, err := openWatchpoint(tid, 0x1000, s.objs.PyCallSite.FD(), false)
		if err != nil {
			b.Fatal(err)
		}
		fds = append(fds, fd)
	}
	with := round(n)
	closeFDs(fds)
	after := round(n)
	b.Logf("%d threads watched: %.0f ns a round of 2 blocking waits without, %.0f with (%+.0f), %.0f after closing",
		len(tids), without, with, with-without, after)
	b.ReportMetric(with-without, "ns/round")
}

// BenchmarkWholeGet measures what timing multiprocessing's Queue.get
// whole (attach's --whole-gets) adds to each get: a loop putting an item
// and getting it back (the get waits for the queue's feeder thread),
// pinned to one CPU so that its handoffs cost the same from round to
// round. Each way of timing the get is taken against gpuprof attached with
// its other Python probes and no get timed (a function never called),
// and reported as what it adds to that: the get timed by its native
// anchors (pyanchor.go), and watched as when those are not found (two
// debug traps a get, and the getting thread's debug registers switched
// at each of its context switches).
//
//	sudo go test -run '^$' -bench WholeGet -benchtime 1x ./probes
func BenchmarkWholeGet(b *testing.B) {
	testenv.RequireRoot(b)
	get := wholeGetsProbe(b, "multiprocessing.queues:Queue.get")
	none := wholeGetsProbe(b, "multiprocessing.queues:Queue.close")
	script := filepath.Join(testenv.Root(), "testdata", "python", "getloop.py")
	cpu := strconv.Itoa(runtime.NumCPU() - 1)
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		defer st.Close()
	}
	pythons := testenv.Pythons(b)
	for _, name := range []string{"pyenv-3.10", "pyenv-3.12", "pyenv-3.13"} {
		python, ok := pythons[name]
		if !ok {
			continue
		}
		const n = 5000
		cmd, in, round := startLoop(b, "taskset", "-c", cpu, python, script)
		pid := cmd.Process.Pid
		timed := func(u UserProbe, anchors bool) (float64, string) {
			cfg := DefaultConfig()
			cfg.User = []UserProbe{u}
			s, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.cfg.NoNativeAnchors = !anchors
			if _, err := s.Attach(pid); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx, func([]events.Event, []LibraryPlan) {}) }()
			round(n) // the getting thread seen waiting in a get, and watched
			progs := []*ebpf.Program{s.objs.PyAnchorStart, s.objs.PyAnchorEnd, s.objs.PyCallSite}
			var before []*ebpf.ProgramStats
			for _, p := range progs {
				st, _ := p.Stats()
				before = append(before, st)
			}
			with := round(n)
			for i, p := range progs {
				st, _ := p.Stats()
				if st != nil && before[i] != nil && st.RunCount > before[i].RunCount {
					b.Logf("  program %d: %.1f runs a round, %.0f ns a run", i, float64(st.RunCount-before[i].RunCount)/(3*n), float64(st.Runtime-before[i].Runtime)/float64(st.RunCount-before[i].RunCount))
				}
			}
			cancel()
			<-done
			s.mu.Lock()
			defer s.mu.Unlock()
			w := s.targets[pid].pyCalls[u.ID]
			switch {
			case w != nil && w.anchors != nil:
				return with, "native anchors"
			case w != nil && len(w.events) > 0:
				return with, fmt.Sprintf("%d watchpoints", len(w.events))
			}
			return with, "nothing"
		}
		without := round(n)
		base, _ := timed(none, true)
		anchored, how1 := timed(get, true)
		watched, how2 := timed(get, false)
		after := round(n)
		in.Close()
		cmd.Wait()
		b.Logf("%-10s a put and get: %6.0f ns without gpuprof, %6.0f with it and no get timed; the get timed by %s %+6.0f ns, by %s %+6.0f ns; %6.0f ns once detached",
			name, without, base, how1, anchored-base, how2, watched-base, after)
		b.ReportMetric(anchored-base, name+"-anchored-ns/get")
		b.ReportMetric(watched-base, name+"-watched-ns/get")
	}
}
