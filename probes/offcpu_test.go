package probes

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestOffCPUSamples attaches with off-CPU samples to a CPython process on
// each interpreter: the main thread's naps (a probed wait) are sampled
// whole, each ~20 ms nap once with its own length, inside a probed call;
// the other thread's waits to take the GIL back after a C call, which no
// probe times, are marked as waits in pthread_cond_timedwait (take_gil's)
// with the thread's Python function in their stacks.
func TestOffCPUSamples(t *testing.T) {
	testenv.RequireRoot(t)
	for name, python := range testenv.Pythons(t) {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Stacks = StackConfig{OffCPUHz: 97}
			s, err := Open(cfg)
			if err != nil {
				t.Fatalf("open session: %v", err)
			}
			t.Cleanup(func() { s.Close() })
			times := filepath.Join(t.TempDir(), "times.json")
			const seconds = 1.5
			pid := startScript(t, python, "offcpu.py", "1.5", times)
			if _, err := s.Attach(pid); err != nil {
				t.Fatal(err)
			}
			c, err := runFor(t, s, 20*time.Second)
			if !errors.Is(err, ErrTargetsExited) {
				t.Fatal(err)
			}
			var got struct {
				Napped   float64 `json:"napped"`
				TakerCPU float64 `json:"taker_cpu"`
				TakerTID uint32  `json:"taker_tid"`
			}
			b, err := os.ReadFile(times)
			if err != nil || json.Unmarshal(b, &got) != nil {
				t.Fatalf("the script's times: %v %s", err, b)
			}
			period := uint64(time.Second) / 97
			var napNS, napInCall, naps, gilNS, gilSamples, takerSamples uint64
			for _, e := range c.evs {
				if e.Kind != events.KindOffCPU || e.PID != uint32(pid) {
					continue
				}
				if e.Args[0] != period || e.End < e.Start {
					t.Fatalf("off-CPU sample %+v: want period %d and an end after its start", e, period)
				}
				w := max(e.End-e.Start, period)
				switch {
				case e.TID == uint32(pid) && hasFrame(e.Frames, "offcpu.py", "nap"):
					naps++
					napNS += w
					napInCall += e.Args[events.StackInCallArg]
				case e.TID == got.TakerTID:
					takerSamples++
					if hasFrame(e.Frames, "offcpu.py", "gil_taker") && e.Args[1]&events.OffCPUGIL != 0 {
						gilSamples++
						gilNS += w
					}
				}
			}
			t.Logf("naps: %d samples, %.3f s (the script napped %.3f s), %d in a probed call; the taker: %d samples, %d of them taking the GIL back, %.3f s (its CPU %.3f s)",
				naps, float64(napNS)/1e9, got.Napped, napInCall, takerSamples, gilSamples, float64(gilNS)/1e9, got.TakerCPU)
			// Each nap is longer than the period: read every time, for
			// its own length (the first may start before the attach).
			if d := float64(napNS)/1e9 - got.Napped; d > 0.05 || d < -0.1 {
				t.Errorf("the naps' off-CPU samples add to %.3f s, the script napped %.3f s", float64(napNS)/1e9, got.Napped)
			}
			if napInCall < naps*9/10 {
				t.Errorf("%d of %d nap samples say they were inside a probed call (clock_nanosleep)", napInCall, naps)
			}
			// While the main thread spins, the taker is off CPU taking
			// the GIL back for most of the 1.5 s.
			if gilNS < uint64(0.4*seconds*1e9) || gilSamples < takerSamples/2 {
				t.Errorf("the taker's GIL waits: %d of its %d samples, %.3f s; want most of them and 0.6 s or more",
					gilSamples, takerSamples, float64(gilNS)/1e9)
			}
			if st := s.Stats(); st.StacksLost != 0 {
				t.Errorf("%d stack samples lost", st.StacksLost)
			}
		})
	}
}
