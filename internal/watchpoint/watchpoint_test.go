package watchpoint

import (
	"errors"
	"os"
	"testing"
)

// TestFires: as root the check opens its watchpoint and gives a verdict,
// nil or ErrNoTraps, never an open error; the verdict is logged, as it
// decides which of the Python-function tests run here.
func TestFires(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: a hardware watchpoint on another of gpuprof's threads needs root here (perf_event_paranoid); make test runs as root")
	}
	err := Fires()
	if err != nil && !errors.Is(err, ErrNoTraps) {
		t.Fatalf("Fires: %v, want nil or ErrNoTraps", err)
	}
	t.Logf("hardware watchpoints on this machine: %v", err)
	if again := Fires(); again != err {
		t.Errorf("a second Fires gave %v after %v: the check runs once", again, err)
	}
}
