package control

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
)

// Config is how the loop cuts steps and what it tells the probes.
type Config struct {
	// Correlate configures each process's correlator.
	Correlate correlate.Config
	// LaunchDuty: once a process's steps are found, its launches are
	// counted this fraction of the time, LaunchOn at a time (LaunchCycle);
	// 1 counts every launch.
	LaunchDuty float64
	// LaunchOn is how long launches are counted at a time once steps are
	// found: long enough to hold whole steps of most loops.
	LaunchOn time.Duration
	// LearnBudget: while a process's step boundary is learned, where
	// probing every launch, Python wait and kernel lookup would cost it
	// more than this fraction of its time, they are probed only a share
	// of the time that costs about this (learnlaunches.go); 1 probes
	// every one then.
	LearnBudget float64
	// RecordSites: once steps are found, event records are probed only
	// at the call sites whose events the job reads (Probes.NarrowRecords),
	// so that a library's own records trap no more.
	RecordSites bool
	// StepTimes is how a process's step time is told to its launch phases.
	StepTimes StepTimes
	// Log takes the loop's decisions; nil: slog.Default().
	Log *slog.Logger
	// LostEvents, where set, is how many events the probes lost in the
	// spans of loss overlapping [startNS, endNS] (probes.Session's
	// LostBetween): each step is marked with it (Step.LostEvents).
	LostEvents func(startNS, endNS uint64) uint64
}

// StepTimes: a process's step time (Probes.FitLaunchPhases) is the median
// wall time of its latest Window steps, once there are Min, told when it
// has grown by more than a quarter since it was last told: a phase sized
// to it then holds whole steps; told on every step it would be noise.
type StepTimes struct {
	Window, Min int
}

// DefaultLaunchDuty is the default Config.LaunchDuty. On two H200 DDP
// ranks (testdata/gpuhost/h200x2.sh, README "Measured"), a rank's autograd
// thread paid ~230 µs of system time a step with gpuprof attached at 0.1,
// about half of it (by --probe-stats' trap counts) in the on phases: its
// launches, the driver's device-to-device copies and kernel lookups, ~500
// traps a step there. At 0.05 the step rate by second since attach was
// -0.26% between on phases and -3..-6% in the seconds around each: ~0.12 s
// of the job's time a phase. 1 s in 40 halves that share again, and
// still counts ~30 whole steps of a 30-steps/s loop a cycle. Measured
// there at 1 s in 40, gpuprof still cost -2.66% of the step rate (CI
// -3.92..-0.18%), nearly all of it in traps outside the on phases.
const DefaultLaunchDuty = 0.025

// DefaultConfig is attach's policy: launches counted for ~0.5% of a
// process's time while its steps are learned and 1 s in 40 once they are
// found, records narrowed to their readers' call sites, step times
// the median of the latest 8 steps once there are 4.
func DefaultConfig() Config {
	return Config{LaunchDuty: DefaultLaunchDuty, LaunchOn: time.Second, LearnBudget: DefaultLearnBudget, RecordSites: true,
		StepTimes: StepTimes{Window: 8, Min: 4}}
}

// LaunchCycle is the cycle of launch sampling for LaunchDuty: counted
// LaunchOn of every period. A launch-heavy job pays ~0.5 µs a launch while
// they are counted.
func (c Config) LaunchCycle() (period, on time.Duration) {
	if c.LaunchDuty <= 0 {
		return time.Duration(math.MaxInt64), 0
	}
	return time.Duration(float64(c.LaunchOn) / c.LaunchDuty), c.LaunchOn
}

// check says what in c cannot be run.
func (c Config) check() error {
	var errs []error
	if c.LaunchDuty < 0 || c.LaunchDuty > 1 {
		errs = append(errs, fmt.Errorf("launch duty %g: give a fraction from 0 to 1", c.LaunchDuty))
	}
	if c.LaunchDuty > 0 && c.LaunchDuty < 1 && c.LaunchOn <= 0 {
		errs = append(errs, fmt.Errorf("launches counted %v at a time: give a positive duration", c.LaunchOn))
	}
	if c.LearnBudget < 0 || c.LearnBudget > 1 {
		errs = append(errs, fmt.Errorf("learning budget %g: give a fraction from 0 to 1", c.LearnBudget))
	}
	if c.StepTimes.Min < 1 || c.StepTimes.Window < c.StepTimes.Min {
		errs = append(errs, fmt.Errorf("step times over %d steps once there are %d: give 1 <= min <= window",
			c.StepTimes.Window, c.StepTimes.Min))
	}
	if _, err := correlate.New(c.Correlate); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
