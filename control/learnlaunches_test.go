package control

import (
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// TestLearnCycle: a process launching little keeps every launch counted
// while its steps are learned; one launching more has them counted the
// share of the time that costs the budget, never less than the steady
// duty; a duty or budget of 1 counts every launch.
func TestLearnCycle(t *testing.T) {
	def := DefaultConfig()
	every, noBudget := def, def
	every.LaunchDuty, noBudget.LearnBudget = 1, 1
	for _, tc := range []struct {
		name   string
		cfg    Config
		rate   float64
		period time.Duration
	}{
		{"a pipeline's 1,000 a second", def, 1000, 0},
		{"7,000 a second: ~0.49%", def, 7000, 0},
		{"a launch-bound loop's 100,000", def, 100000, 14 * time.Second},
		{"a million: the steady duty", def, 1e6, 40 * time.Second},
		{"launch duty 1", every, 100000, 0},
		{"budget 1", noBudget, 100000, 0},
	} {
		period, on, ok := tc.cfg.learnCycle(tc.rate)
		if ok != (tc.period > 0) || ok && (on != time.Second || period.Round(time.Millisecond) != tc.period) {
			t.Errorf("%s: %v in %v (%v), want 1s in %v", tc.name, on, period, ok, tc.period)
		}
	}
}

// TestLaunchMeter: the rate is the launches the calls carried over a
// window that begins at the first call carrying any (those are not in
// it: they were made before), given once the window is over.
func TestLaunchMeter(t *testing.T) {
	var m launchMeter
	call := func(end uint64, launches uint32) (float64, bool) {
		return m.add(&events.Event{Kind: events.KindCall, End: end, Launches: launches}, 0)
	}
	if _, ok := call(1e9, 0); ok || m.since != 0 {
		t.Fatalf("a call with no launches began the window")
	}
	call(2e9, 500)
	for i := uint64(1); i < 5; i++ {
		if _, ok := call(2e9+i*1e8, 100); ok {
			t.Fatalf("window over after %v", time.Duration(i*1e8))
		}
	}
	if r, ok := call(2e9+rateWindow, 100); !ok || r != 1000 {
		t.Errorf("rate %v (%v), want 1000 a second", r, ok)
	}
	if m.since != 2e9+rateWindow || m.launches != 0 {
		t.Errorf("the next window: since %d, %d launches", m.since, m.launches)
	}
	m.done = true
	if _, ok := call(1e12, 1e6); ok {
		t.Error("a meter done measured on")
	}
}

// TestLaunchMeterEndsAtItsLaunches: a window ends once it holds the
// launches whose probes cost the learning budget of a second (a
// launch-bound loop is not probed whole for 0.5 s), but not before
// minRateSpan.
func TestLaunchMeterEndsAtItsLaunches(t *testing.T) {
	limit := DefaultConfig().rateLaunches()
	if want := uint64(7142); limit != want {
		t.Fatalf("rateLaunches %d, want %d (the budget of a second at 700 ns a launch)", limit, want)
	}
	var m launchMeter
	call := func(end uint64, launches uint32) (float64, bool) {
		return m.add(&events.Event{Kind: events.KindCall, End: end, Launches: launches}, limit)
	}
	call(1e9, 1)
	// 100k launches a second, 1,000 a 10 ms step.
	var end uint64
	for i := uint64(1); ; i++ {
		end = 1e9 + i*10e6
		r, ok := call(end, 1000)
		if !ok {
			continue
		}
		if span := end - 1e9; span >= rateWindow || m.launches != 0 {
			t.Fatalf("window over after %v", time.Duration(span))
		}
		if r != 1e5 {
			t.Errorf("rate %v, want 100000 a second", r)
		}
		if got, want := end-1e9, uint64(80e6); got != want { // 8 steps: 8,000 ≥ 7,142
			t.Errorf("window over after %v, want %v", time.Duration(got), time.Duration(want))
		}
		break
	}
	// A burst of launches in less than minRateSpan is not a rate.
	m = launchMeter{}
	call(1e9, 1)
	if _, ok := call(1e9+10e6, 50000); ok {
		t.Error("a window of 10 ms gave a rate")
	}
	if r, ok := call(1e9+minRateSpan, 0); !ok || r != 50000/(float64(minRateSpan)/1e9) {
		t.Errorf("at minRateSpan: rate %v (%v), want 50,000 over minRateSpan", r, ok)
	}
}
