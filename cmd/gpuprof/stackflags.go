package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuprof/gpuprof/probes"
)

// stackFlags say which stacks are read for the profiles; they matter only
// where profiles go somewhere (--pyroscope).
type stackFlags struct {
	cpuHz       int
	offCPUHz    int
	launchEvery int
	callMin     time.Duration
}

// Defaults, measured (docs/measurements.md, BenchmarkStackReads): a stack
// read costs a launch ~7 µs on the 2-core dev VM, so one launch in 32
// adds ~0.2 µs a launch, and only while launches are counted
// (--launch-duty); a sync's ~14 µs, so the stacks of calls shorter than
// 20 µs (an asynchronous copy's enqueue) are not read: they are no wait.
const (
	defaultCPUHz        = 97
	defaultOffCPUHz     = 97
	defaultLaunchEvery  = 32
	defaultCallStackMin = 20 * time.Microsecond
)

func (f *stackFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&f.cpuHz, "profile-cpu-hz", defaultCPUHz, "with profiles, sample the targets' threads on CPU this many times a second of their CPU time (0: no on-CPU profile)")
	fs.IntVar(&f.offCPUHz, "profile-offcpu-hz", defaultOffCPUHz, "with profiles, sample the targets' threads' time off CPU (blocked in a system call) this many times a second of it, for the wait profile (0: probed waits only)")
	fs.IntVar(&f.launchEvery, "launch-stack-every", defaultLaunchEvery, "with profiles, read the stack of one kernel launch in this many, while launches are counted (0: no GPU profile)")
	fs.DurationVar(&f.callMin, "call-stack-min", defaultCallStackMin, "with profiles, read the stacks of the syncs and copies that held their thread this long or more")
}

// config is the stacks to read, none where no profile is wanted.
func (f *stackFlags) config(profiling bool) (probes.StackConfig, error) {
	switch {
	case f.cpuHz < 0 || f.cpuHz > 1000:
		return probes.StackConfig{}, usageErr("--profile-cpu-hz %d: give 0 to 1000 (97 is the usual)", f.cpuHz)
	case f.offCPUHz < 0 || f.offCPUHz > 1000:
		return probes.StackConfig{}, usageErr("--profile-offcpu-hz %d: give 0 to 1000 (97 is the usual)", f.offCPUHz)
	case f.launchEvery < 0:
		return probes.StackConfig{}, usageErr("--launch-stack-every %d: give 0 or more", f.launchEvery)
	case f.callMin < 0:
		return probes.StackConfig{}, usageErr("--call-stack-min %v: give a duration of 0 or more", f.callMin)
	case !profiling:
		return probes.StackConfig{}, nil
	}
	return probes.StackConfig{CPUHz: f.cpuHz, OffCPUHz: f.offCPUHz, LaunchEvery: f.launchEvery, Calls: true, CallMin: f.callMin}, nil
}
