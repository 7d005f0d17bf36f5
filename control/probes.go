package control

import "time"

// Probes is what the loop steers: probes.Session's policy knobs. The loop
// calls them from the goroutine that adds events.
type Probes interface {
	// SetStepThread says which thread of pid runs its training loop.
	SetStepThread(pid int, tid uint32)
	// LearnLaunches counts pid's launches only on of every period, the
	// phases growing, while its boundary is learned.
	LearnLaunches(pid int, period, on time.Duration)
	// SampleLaunches counts pid's launches only on of every period once
	// its boundary is found; on >= period counts every one.
	SampleLaunches(pid int, period, on time.Duration)
	// FitLaunchPhases says how long pid's steps take (their median wall
	// time), for its launch phases to hold whole ones.
	FitLaunchPhases(pid int, step time.Duration)
	// NarrowRecords says pid's boundary is no event record: its records
	// may be probed at their readers' call sites only.
	NarrowRecords(pid int)
	// SamplePythonWaits makes pid's Python wait probes go with its launch
	// probes but for keep (and the writes, with writes); false where
	// they cannot.
	SamplePythonWaits(pid int, keep []string, writes bool) bool
	// KeepMorePythonWaits adds to what SamplePythonWaits kept; false where
	// pid's waits do not go with its launches.
	KeepMorePythonWaits(pid int, keep []string, writes bool) bool
	// KeepPythonWaits attaches all of pid's Python wait probes for good;
	// false where they did not go with its launches.
	KeepPythonWaits(pid int) bool
}
