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
		{"5,000 a second: 0.45%", def, 5000, 0},
		{"a launch-bound loop's 100,000", def, 100000, 18 * time.Second},
		{"a million: the steady duty", def, 1e6, 40 * time.Second},
		{"launch duty 1", every, 100000, 0},
		{"budget 1", noBudget, 100000, 0},
	} {
		period, on, ok := tc.cfg.learnCycle(probeRate{launches: tc.rate})
		if ok != (tc.period > 0) || ok && (on != time.Second || period.Round(time.Millisecond) != tc.period) {
			t.Errorf("%s: %v in %v (%v), want 1s in %v", tc.name, on, period, ok, tc.period)
		}
	}
}

// TestLearnCycleWaits: the waits and lookups reported are priced with
// the launches: a process launching little but waiting much has both
// thinned.
func TestLearnCycleWaits(t *testing.T) {
	def := DefaultConfig()
	if _, _, ok := def.learnCycle(probeRate{launches: 3000}); ok {
		t.Fatal("3,000 launches a second (0.27%) thinned")
	}
	// 0.27% + 3,000 waits at 2.1 µs (0.63%): 0.90%, a duty of ~0.56.
	period, on, ok := def.learnCycle(probeRate{launches: 3000, reports: 3000})
	if want := time.Duration(float64(time.Second) * 0.0090 / 0.005); !ok || on != time.Second || period.Round(time.Millisecond) != want.Round(time.Millisecond) {
		t.Errorf("3,000 launches and 3,000 waits a second: %v in %v (%v), want 1s in %v", on, period, ok, want)
	}
}

// meterCall and meterWait feed m a call carrying launches, and a report
// of kind, that end at end.
func meterCall(m *launchMeter, end uint64, launches uint32, maxCost time.Duration) (probeRate, bool) {
	return m.add(&events.Event{Kind: events.KindCall, End: end, Launches: launches}, maxCost)
}

func meterWait(m *launchMeter, kind events.Kind, end uint64) (probeRate, bool) {
	return m.add(&events.Event{Kind: kind, Start: end - 1000, End: end}, 0)
}

// TestLaunchMeter: the rates are the launches the calls carried, and the
// waits and kernel lookups reported (not the names read from launch
// sites), over a window that begins at the first call carrying
// any (those are not in it: they were made before), given once the window
// is over.
func TestLaunchMeter(t *testing.T) {
	var m launchMeter
	if _, ok := meterCall(&m, 1e9, 0, 0); ok || m.since != 0 {
		t.Fatalf("a call with no launches began the window")
	}
	meterWait(&m, events.KindPyWait, 15e8) // before the window: not in it
	meterCall(&m, 2e9, 500, 0)
	for i := uint64(1); i < 5; i++ {
		if _, ok := meterCall(&m, 2e9+i*1e8, 100, 0); ok {
			t.Fatalf("window over after %v", time.Duration(i*1e8))
		}
		for _, k := range []events.Kind{events.KindPyWait, events.KindPyGIL, events.KindWrite, events.KindKernelName} {
			if _, ok := meterWait(&m, k, 2e9+i*1e8+1); ok {
				t.Fatal("a wait ended the window")
			}
		}
		site := events.Event{Kind: events.KindKernelName, End: 2e9 + i*1e8 + 2}
		site.Args[events.KernelNameArg] = events.KernelNameFromSite
		m.add(&site, 0) // named from its launch's site by gpuprof: no probe reported it
	}
	if r, ok := meterCall(&m, 2e9+rateWindow, 100, 0); !ok || r.launches != 1000 || r.reports != 32 {
		t.Errorf("rates %+v (%v), want 1000 launches and 32 reports a second", r, ok)
	}
	if m.since != 2e9+rateWindow || m.launches != 0 || m.reports != 0 {
		t.Errorf("the next window: since %d, %d launches, %d waits", m.since, m.launches, m.reports)
	}
	m.done = true
	if _, ok := meterCall(&m, 1e12, 1e6, 0); ok {
		t.Error("a meter done measured on")
	}
}

// TestLaunchMeterEndsAtItsCost: a window ends once its probes have cost
// the learning budget of a second (a launch-bound loop is not probed whole
// for 0.5 s), its waits counted with its launches, but not before
// minRateSpan.
func TestLaunchMeterEndsAtItsCost(t *testing.T) {
	limit := DefaultConfig().windowCost()
	if want := 5 * time.Millisecond; limit != want {
		t.Fatalf("windowCost %v, want %v (the budget of a second)", limit, want)
	}
	for _, tc := range []struct {
		name  string
		waits int           // a step
		after time.Duration // the window's end
	}{
		{"launches alone", 0, 60 * time.Millisecond},    // 6 steps: 6,000 × 900 ns ≥ 5 ms
		{"waits with them", 200, 40 * time.Millisecond}, // 4 steps: 4,000 × 900 ns + 800 × 2.1 µs ≥ 5 ms
	} {
		var m launchMeter
		meterCall(&m, 1e9, 1, limit)
		// 100k launches a second, 1,000 a 10 ms step.
		for i := uint64(1); ; i++ {
			end := 1e9 + i*10e6
			for w := range tc.waits {
				meterWait(&m, events.KindPyWait, end-10e6+uint64(w+1)*1000)
			}
			r, ok := meterCall(&m, end, 1000, limit)
			if !ok {
				if end-1e9 >= rateWindow {
					t.Fatalf("%s: no rate in a whole window", tc.name)
				}
				continue
			}
			if got := time.Duration(end - 1e9); got != tc.after {
				t.Errorf("%s: window over after %v, want %v", tc.name, got, tc.after)
			}
			if r.launches != 1e5 || r.reports != float64(tc.waits)*100 {
				t.Errorf("%s: rates %+v, want 100000 launches and %d waits a second", tc.name, r, tc.waits*100)
			}
			break
		}
	}
	// A burst of launches in less than minRateSpan is not a rate.
	var m launchMeter
	meterCall(&m, 1e9, 1, limit)
	if _, ok := meterCall(&m, 1e9+10e6, 50000, limit); ok {
		t.Error("a window of 10 ms gave a rate")
	}
	if r, ok := meterCall(&m, 1e9+minRateSpan, 0, limit); !ok || r.launches != 50000/(float64(minRateSpan)/1e9) {
		t.Errorf("at minRateSpan: rate %+v (%v), want 50,000 over minRateSpan", r, ok)
	}
}
