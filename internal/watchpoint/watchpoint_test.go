package watchpoint

import (
	"errors"
	"os"
	"testing"
)

// TestFires: the check opens its watchpoint and gives a verdict, nil or
// ErrNoTraps, never an open error as root; the verdict is logged, as it
// decides which of the Python-function tests run here (make test prints
// it first).
func TestFires(t *testing.T) {
	err := Fires()
	if err != nil && !errors.Is(err, ErrNoTraps) {
		if os.Geteuid() != 0 {
			t.Skipf("SKIP: %v: perf events are refused to a plain user here (perf_event_paranoid); make test runs this as root", err)
		}
		t.Fatalf("Fires: %v, want nil or ErrNoTraps", err)
	}
	t.Logf("hardware watchpoints on this machine: %v", err)
	if again := Fires(); again != err {
		t.Errorf("a second Fires gave %v after %v: the check runs once", again, err)
	}
}
