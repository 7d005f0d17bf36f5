package control

import (
	"fmt"
	"time"
)

// fakeProbes records the calls the loop makes of its probes, one line a
// call, and says yes to each.
type fakeProbes struct{ calls []string }

func (f *fakeProbes) add(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeProbes) SetStepThread(pid int, tid uint32) { f.add("thread %d %d", pid, tid) }

func (f *fakeProbes) SampleLaunches(pid int, period, on time.Duration) {
	f.add("launches %d %v %v", pid, period, on)
}

func (f *fakeProbes) FitLaunchPhases(pid int, step time.Duration) { f.add("fit %d %v", pid, step) }

func (f *fakeProbes) NarrowRecords(pid int) { f.add("records %d", pid) }

func (f *fakeProbes) SamplePythonWaits(pid int, keep []string, writes bool) bool {
	f.add("sample %d %v %v", pid, keep, writes)
	return true
}

func (f *fakeProbes) KeepMorePythonWaits(pid int, keep []string, writes bool) bool {
	f.add("more %d %v %v", pid, keep, writes)
	return true
}

func (f *fakeProbes) KeepPythonWaits(pid int) bool {
	f.add("all %d", pid)
	return true
}
