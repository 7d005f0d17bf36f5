package profiles

import (
	"time"
)

// Config says how a Builder cuts and bounds its profiles.
type Config struct {
	// Interval is each window's length: one profile a type a process per
	// window, as Pyroscope expects one push per interval. 0 means 10 s.
	Interval time.Duration
	// Lag is how long past its end a window waits for the steps that
	// label its samples: a process whose steps stop (or that has none, a
	// DataLoader worker) still gets its profiles, their samples' phase
	// other. 0 means 3 intervals.
	Lag time.Duration
	// MaxStacks bounds the distinct stacks a window of one type holds;
	// past it, new stacks fold into one "[other stacks]" frame. 0 means
	// 4000.
	MaxStacks int
	// MaxSamples bounds the distinct (stack, labels) samples of one
	// profile, under the server's 16,000; past it, new ones fold into
	// "[other stacks]" with their phase but no span_id. 0 means 12000.
	MaxSamples int
	// MaxPending bounds the samples a window holds while their steps are
	// not cut yet; past it, a new sample is labelled at once as outside
	// any step. 0 means 1<<16.
	MaxPending int
	// KernelName names a kernel launch's handle (control.Loop.KernelName);
	// nil: launches are not named.
	KernelName func(pid uint32, handle uint64) (string, bool)
	// Clock turns an event time (CLOCK_MONOTONIC ns) into the wall clock,
	// for the profiles' TimeNanos and for windows that start at the same
	// instants on every host. nil: event times are taken as Unix ns.
	Clock func(mono uint64) time.Time
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = 10 * time.Second
	}
	if c.Lag <= 0 {
		c.Lag = 3 * c.Interval
	}
	if c.MaxStacks <= 0 {
		c.MaxStacks = 4000
	}
	if c.MaxSamples <= 0 {
		c.MaxSamples = 12000
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 1 << 16
	}
	if c.Clock == nil {
		c.Clock = func(mono uint64) time.Time { return time.Unix(0, int64(mono)) }
	}
	return c
}
