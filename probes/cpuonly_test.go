package probes

import (
	"context"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestCPUOnlyWaitsThinnedUntilCUDA: a Python process with no CUDA library
// has its wait probes attached only part of the time, the markers saying
// so (Args[0] 1); once it loads CUDA they are attached for good (a marker
// with Args[0] 0) and its waits are all seen again.
func TestCPUOnlyWaitsThinnedUntilCUDA(t *testing.T) {
	testenv.RequireRoot(t)
	python, ok := testenv.Pythons(t)["pyenv-3.12"]
	if !ok {
		testenv.Skip(t, "needs pyenv's 3.12")
	}
	libdir := testenv.Fixtures(t)
	cfg := DefaultConfig()
	const period, on = 600 * time.Millisecond, 150 * time.Millisecond
	cfg.CPUOnlyAfter, cfg.CPUOnlyPeriod, cfg.CPUOnlyOn = 300*time.Millisecond, period, on
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	closes := watchPauses(s)
	// CUDA loaded 2.5 s in, 4.5 s in all.
	pid := startScript(t, python, "late_cuda.py", libdir, "2.5", "4.5")
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	c := &collector{}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := s.Run(ctx, c.sink); err != ErrTargetsExited {
		t.Fatalf("Run: %v", err)
	}
	marks, waits := marksAndWaits(c.evs, pid)
	loaded := uint64(0) // the loader's first notice once the pauses began: CUDA
	for _, e := range c.evs {
		if e.Kind == events.KindLibLoad && loaded == 0 && len(marks) > 0 && e.End > marks[0].End {
			loaded = e.End
		}
	}
	paused := pausedSpans(marks, closes, pid)
	for _, span := range paused {
		if n := countIn(waits, span); n > 0 {
			t.Errorf("%d waits began in a pause of the wait probes, %v after they were closed", n, offsetsIn(waits, span))
		}
	}
	if len(paused) < 2 {
		t.Fatalf("%d pauses of the wait probes in %d markers before CUDA was loaded, want 2 or more", len(paused), len(marks))
	}
	last := marks[len(marks)-1]
	if last.Out != 1 || last.Args[0] != 0 || last.End < loaded {
		t.Fatalf("last marker %+v (CUDA loaded at %d): want the waits attached for good once CUDA was loaded", last, loaded)
	}
	seenThroughout(t, waits, last.End, 40, on)
}
