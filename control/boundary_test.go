package control

import (
	"math"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
)

// TestPlanBoundary: a boundary found just now thins the launches to the
// configured cycle, unless it is a device-to-device copy (or copies of
// any direction), which go with the launches, or the duty counts every
// launch; it narrows the records unless it is one or record sites are
// off. A boundary that moves asks nothing more.
func TestPlanBoundary(t *testing.T) {
	sync := correlate.CallKind{Class: cudaapi.ClassSync}
	elapsed := correlate.CallKind{Class: cudaapi.ClassElapsed}
	d2d := correlate.CallKind{Class: cudaapi.ClassCopy, Dir: cudaapi.DirDtoD}
	d2h := correlate.CallKind{Class: cudaapi.ClassCopy, Dir: cudaapi.DirDtoH}
	anyCopy := correlate.CallKind{Class: cudaapi.ClassCopy, Dir: cudaapi.DirHtoD, AnyDir: true}
	record := correlate.CallKind{Class: cudaapi.ClassRecord}
	user := correlate.CallKind{User: true}
	def := DefaultConfig()
	every := def
	every.LaunchDuty = 1
	never := def
	never.LaunchDuty = 0
	noSites := def
	noSites.RecordSites = false
	cycle := boundaryPlan{sampleLaunches: true, period: 40 * time.Second, on: time.Second, narrowRecords: true}
	for _, tc := range []struct {
		name  string
		cfg   Config
		first bool
		k     correlate.CallKind
		want  boundaryPlan
	}{
		{"sync", def, true, sync, cycle},
		{"elapsed", def, true, elapsed, cycle},
		{"d2h copy", def, true, d2h, cycle},
		{"user probe", def, true, user, cycle},
		{"moved", def, false, sync, boundaryPlan{}},
		{"d2d copy", def, true, d2d, boundaryPlan{narrowRecords: true}},
		{"copy, any direction", def, true, anyCopy, boundaryPlan{narrowRecords: true}},
		{"record", def, true, record, boundaryPlan{sampleLaunches: true, period: 40 * time.Second, on: time.Second}},
		{"every launch", every, true, sync, boundaryPlan{narrowRecords: true}},
		{"no launch", never, true, sync, boundaryPlan{sampleLaunches: true, period: math.MaxInt64, narrowRecords: true}},
		{"record sites off", noSites, true, sync, boundaryPlan{sampleLaunches: true, period: 40 * time.Second, on: time.Second}},
	} {
		if got := tc.cfg.planBoundary(tc.first, tc.k); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestLaunchCycle: launches are counted LaunchOn of every LaunchOn/duty,
// not at all at duty 0.
func TestLaunchCycle(t *testing.T) {
	for _, tc := range []struct {
		duty       float64
		period, on time.Duration
	}{
		{0.025, 40 * time.Second, time.Second},
		{0.5, 2 * time.Second, time.Second},
		{1, time.Second, time.Second},
		{0, math.MaxInt64, 0},
	} {
		cfg := DefaultConfig()
		cfg.LaunchDuty = tc.duty
		if period, on := cfg.LaunchCycle(); period != tc.period || on != tc.on {
			t.Errorf("duty %g: %v in %v, want %v in %v", tc.duty, on, period, tc.on, tc.period)
		}
	}
}

// TestConfigChecked: a loop is not made with a policy it cannot run, or a
// correlator config correlate refuses.
func TestConfigChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"duty over 1", func(c *Config) { c.LaunchDuty = 1.5 }},
		{"negative duty", func(c *Config) { c.LaunchDuty = -0.1 }},
		{"no on phase", func(c *Config) { c.LaunchOn = 0 }},
		{"window under min", func(c *Config) { c.StepTimes.Window = 2 }},
		{"no min", func(c *Config) { c.StepTimes.Min = 0 }},
		{"bad boundary", func(c *Config) { c.Correlate.Boundary = "cudaNoSuchCall" }},
	} {
		cfg := DefaultConfig()
		tc.edit(&cfg)
		if _, err := New(cfg, nil, nil); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if _, err := New(DefaultConfig(), nil, nil); err != nil {
		t.Errorf("default config: %v", err)
	}
}
