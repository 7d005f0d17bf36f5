package probes

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestGILTail: a nap that ends with another thread holding the GIL is
// followed by the wait to take it back (take_gil's condition wait),
// reported on the napping thread right after the nap, on every CPython
// on the machine.
func TestGILTail(t *testing.T) {
	pythons := testenv.Pythons(t)
	if len(pythons) == 0 {
		testenv.Skip(t, "no CPython found")
	}
	for name, python := range pythons {
		t.Run(name, func(t *testing.T) { checkGILTail(t, python) })
	}
}

func checkGILTail(t *testing.T, python string) {
	s := openSession(t)
	pid := startScript(t, python, "gil_waits.py", "tail", "2", filepath.Join(t.TempDir(), "n"))
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	c, err := runFor(t, s, 5*time.Second)
	if !errors.Is(err, ErrTargetsExited) {
		t.Fatal(err)
	}
	var naps []events.Event
	tails := 0
	for _, e := range c.evs {
		if e.TID != uint32(pid) {
			continue
		}
		switch e.Kind {
		case events.KindPyWait:
			naps = append(naps, e)
		case events.KindPyGIL:
			// A tail begins within 100 µs of a wait's end (GIL_FOLLOW_NS).
			for _, n := range naps {
				if e.Start >= n.End && e.Start-n.End <= 100_000 {
					tails++
					break
				}
			}
		}
	}
	t.Logf("%d naps, %d GIL waits right after one", len(naps), tails)
	if len(naps) < 50 || tails < len(naps)/4 {
		t.Fatalf("%d naps, %d GIL waits right after one: want 50 or more naps, a quarter of them with a GIL wait after", len(naps), tails)
	}
}

// TestNativeCondWaitsMissGILProbes: the untimed condition waits native
// threads make (pthread_cond_wait) do not trap in the GIL probes.
func TestNativeCondWaitsMissGILProbes(t *testing.T) {
	python, ok := testenv.Pythons(t)["pyenv-3.12"]
	if !ok {
		testenv.Skip(t, "needs pyenv's 3.12")
	}
	stats, err := bpf.EnableStats()
	if err != nil {
		testenv.Skip(t, "needs BPF statistics: "+err.Error())
	}
	defer stats.Close()
	s := openSession(t)
	count := filepath.Join(t.TempDir(), "n")
	pid := startScript(t, python, "gil_waits.py", "native", "1", count)
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	if _, err := runFor(t, s, 5*time.Second); !errors.Is(err, ErrTargetsExited) {
		t.Fatal(err)
	}
	b, err := os.ReadFile(count)
	if err != nil {
		t.Fatalf("the script's count of its waits: %v", err)
	}
	waits, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || waits < 1000 {
		t.Fatalf("the script made %q condition waits, want 1000 or more", b)
	}
	var hits uint64
	for _, st := range s.objs.ProgramStats() {
		if st.Name == "gil_entry" {
			hits = st.Runs
		}
	}
	if hits*10 > uint64(waits) {
		t.Errorf("the GIL probes ran %d times for the script's %d untimed condition waits, want under a tenth", hits, waits)
	}
	t.Logf("%d untimed condition waits, %d GIL probe hits", waits, hits)
}
