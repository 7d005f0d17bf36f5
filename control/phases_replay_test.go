package control

import (
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
)

// TestReplayedPhaseTimelines: every step the committed traces replay to
// has a phase timeline that holds to its own sums (Step.CheckPhases):
// data and dispatch wait to within a microsecond of data_time and
// dispatch_wait, covering the step end to end.
func TestReplayedPhaseTimelines(t *testing.T) {
	for _, tr := range traces(t) {
		_, f := replay(t, tr, configFor(t, tr), false)
		if len(f.steps) == 0 {
			t.Fatalf("%s: no steps", tr.name)
		}
		var wall, by = 0.0, map[correlate.Phase]float64{}
		for _, s := range f.steps {
			if err := s.CheckPhases(); err != nil {
				t.Fatalf("%s: step %d of PID %d: %v", tr.name, s.Index, s.PID, err)
			}
			wall += s.WallTime
			for _, p := range []correlate.Phase{correlate.PhaseDispatchWait, correlate.PhaseData, correlate.PhaseSync, correlate.PhaseCompute, correlate.PhaseOther} {
				by[p] += s.PhaseTime(p)
			}
		}
		t.Logf("%s: %d steps, %.2f s: dispatch %.0f%% data %.0f%% sync %.0f%% compute %.0f%% other %.0f%%", tr.name, len(f.steps), wall,
			100*by[correlate.PhaseDispatchWait]/wall, 100*by[correlate.PhaseData]/wall, 100*by[correlate.PhaseSync]/wall,
			100*by[correlate.PhaseCompute]/wall, 100*by[correlate.PhaseOther]/wall)
	}
}
