package probes

import (
	"context"
	"slices"
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
	const period, on, settle = 600 * time.Millisecond, 150 * time.Millisecond, 250 * time.Millisecond
	cfg.CPUOnlyAfter, cfg.CPUOnlyPeriod, cfg.CPUOnlyOn = 300*time.Millisecond, period, on
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
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
	var marks []events.Event
	var waits []uint64  // the main thread's, by start
	loaded := uint64(0) // the loader's first notice once the pauses began: CUDA
	for _, e := range c.evs {
		switch {
		case e.Kind == events.KindLaunchProbes && e.PID == uint32(pid):
			marks = append(marks, e)
		case e.Kind == events.KindPyWait && e.TID == uint32(pid):
			waits = append(waits, e.Start)
		case e.Kind == events.KindLibLoad && loaded == 0 && len(marks) > 0:
			loaded = e.End
		}
	}
	slices.Sort(waits)
	pauses := 0
	for i, m := range marks {
		if m.Out != 0 || m.Args[0] != 1 || i+1 == len(marks) {
			continue
		}
		pauses++
		from, to := m.End+uint64(settle), marks[i+1].End // the links close in the background
		for _, w := range waits {
			if w >= from && w < to {
				t.Errorf("a wait began %v into a pause of the wait probes", time.Duration(w-m.End))
			}
		}
	}
	if pauses < 2 {
		t.Fatalf("%d pauses of the wait probes in %d markers before CUDA was loaded, want 2 or more", pauses, len(marks))
	}
	last := marks[len(marks)-1]
	if last.Out != 1 || last.Args[0] != 0 || last.End < loaded {
		t.Fatalf("last marker %+v (CUDA loaded at %d): want the waits attached for good once CUDA was loaded", last, loaded)
	}
	var after []uint64
	for _, w := range waits {
		if w > last.End {
			after = append(after, w)
		}
	}
	if len(after) < 40 {
		t.Fatalf("%d waits after CUDA was loaded, want ~90", len(after))
	}
	for i := 1; i < len(after); i++ {
		if gap := time.Duration(after[i] - after[i-1]); gap > on {
			t.Errorf("%v without a wait once CUDA was loaded", gap)
		}
	}
}
