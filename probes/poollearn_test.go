package probes

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestPoolFoundFromShortWaits: with PyMinWait far above every wait of the
// job (a get waits ~30 ms for the producer here, as a trainer's would wait
// µs on a pool that never runs dry), the first get that waits is still
// reported with its frames while gpuprof looks for the pool, and once its
// queue is seen the waits under PyMinWait are not reported again.
func TestPoolFoundFromShortWaits(t *testing.T) {
	testenv.RequireRoot(t)
	pythons := testenv.Pythons(t)
	python, ok := pythons["pyenv-3.12"]
	if !ok {
		testenv.Skip(t, "needs pyenv's 3.12")
	}
	cfg := DefaultConfig()
	cfg.PyMinWait = time.Second
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	pid := startScript(t, python, "queue_waits.py", "40", "0.03", "0.5", filepath.Join(t.TempDir(), "waits.jsonl"))
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	_, learning := s.python.learning.until[pid]
	s.mu.Unlock()
	if !learning {
		t.Fatal("not looking for the pool after attach")
	}
	c, err := runFor(t, s, 20*time.Second)
	if !errors.Is(err, ErrTargetsExited) {
		t.Fatal(err)
	}
	var gets int
	for _, e := range c.evs {
		if e.Kind == events.KindPyWait && e.TID == uint32(pid) && slices.ContainsFunc(e.Frames, queueFrame) {
			gets++
		}
	}
	// The first get's wait ends the learning; one more may have ended
	// before its event was read.
	if gets < 1 || gets > 2 {
		t.Errorf("%d of the 40 gets' ~30 ms waits reported with PyMinWait 1 s, want the first (or two)", gets)
	}
	s.mu.Lock()
	left := len(s.python.learning.until)
	s.mu.Unlock()
	if left != 0 || s.python.learning.learners.Load() != 0 {
		t.Errorf("%d processes still looking for a pool (%d in the programs' count)", left, s.python.learning.learners.Load())
	}
}
