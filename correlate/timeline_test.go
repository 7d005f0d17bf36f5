package correlate

import (
	"math"
	"reflect"
	"testing"
)

// checkTimelines holds every step's phase timeline to the step's own
// sums: sorted, contiguous spans covering the step, data and dispatch
// wait to the nanosecond of DataTime and DispatchWait (within 1 µs, the
// sums' float rounding), sync within SyncTime, the lead-in other. run and
// runPython check every step the fixtures cut; control checks the
// committed traces' steps the same way.
func checkTimelines(t testing.TB, steps []Step) {
	t.Helper()
	for _, s := range steps {
		if err := s.CheckPhases(); err != nil {
			t.Fatalf("step %d [%d, %d]: %s: %+v", s.Index, s.StartNS, s.EndNS, err, s.Phases)
		}
	}
}

func TestTimelinePriority(t *testing.T) {
	// A step from 0 to 100 beginning at 10: a dispatch wait 10-30 inside
	// a data phase 10-50, a sync 40-60 half in it, another 95-120 past
	// the end.
	got := timeline(0, 100, 10,
		[]span{{10, 30}},
		[]span{{10, 50}},
		[]span{{40, 60}, {95, 120}}, true)
	want := []PhaseSpan{
		{PhaseOther, 0, 10},
		{PhaseDispatchWait, 10, 30},
		{PhaseData, 30, 50},
		{PhaseSync, 50, 60},
		{PhaseCompute, 60, 95},
		{PhaseSync, 95, 100},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("timeline\n got %+v\nwant %+v", got, want)
	}
	// Where nothing says the step computed, the rest is other, merged
	// with the lead-in.
	got = timeline(0, 100, 10, nil, []span{{20, 30}}, nil, false)
	want = []PhaseSpan{{PhaseOther, 0, 20}, {PhaseData, 20, 30}, {PhaseOther, 30, 100}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("timeline without compute\n got %+v\nwant %+v", got, want)
	}
}

func TestPhaseAt(t *testing.T) {
	s := Step{StartNS: 100, EndNS: 200, Phases: timeline(100, 200, 100, nil, []span{{100, 150}}, nil, true)}
	for _, c := range []struct {
		t    uint64
		want Phase
	}{{99, PhaseOther}, {100, PhaseData}, {149, PhaseData}, {150, PhaseCompute}, {200, PhaseCompute}, {201, PhaseOther}} {
		if got := s.PhaseAt(c.t); got != c.want {
			t.Errorf("PhaseAt(%d) = %s, want %s", c.t, got, c.want)
		}
	}
	if got := s.PhaseTime(PhaseData); got != 50e-9 {
		t.Errorf("data time %g, want 50 ns", got)
	}
}

// TestTimelineOfTimedSteps: spec_pipeline's infer loop (four gets, each
// fetched and copied in, then the timed compute ending in loss.item()'s
// sync): the dispatch waits, the data phase, the 4 ms sync and the
// compute between are the step's timeline, each where the loop put it.
func TestTimelineOfTimedSteps(t *testing.T) {
	tr := newThread(100, 101, 0)
	for i := range 40 {
		for range 4 {
			tr.pywait(uint64(2+i%3) * ms)
			tr.idle(100 * us)
			tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 4<<20, 1, 0x55)
		}
		tr.launch(1, 5*us)
		tr.timedCompute(t)
	}
	_, steps := runPython(t, tr.evs)
	if len(steps) != 39 {
		t.Fatalf("%d steps", len(steps))
	}
	for _, s := range steps {
		if got, want := s.PhaseTime(PhaseSync), 4e-3; math.Abs(got-want) > 1e-9 {
			t.Fatalf("step %d: sync %v, want the stream sync's %v", s.Index, got, want)
		}
		// The first wait opens the step: no lead-in, and what is neither
		// waiting, data nor sync is the compute from the first record on.
		compute := s.WallTime - s.DispatchWait - s.DataTime - 4e-3
		if s.PhaseTime(PhaseOther) != 0 || math.Abs(s.PhaseTime(PhaseCompute)-compute) > 1e-9 {
			t.Fatalf("step %d: other %v, compute %v, want 0 and %v", s.Index, s.PhaseTime(PhaseOther), s.PhaseTime(PhaseCompute), compute)
		}
		if p := s.PhaseAt(s.StartNS); p != PhaseDispatchWait {
			t.Fatalf("step %d begins in %s, want its get's wait", s.Index, p)
		}
		if p := s.PhaseAt(s.EndNS - 3*ms); p != PhaseSync {
			t.Fatalf("step %d: %s 3 ms before its end, want the sync", s.Index, p)
		}
	}
}
