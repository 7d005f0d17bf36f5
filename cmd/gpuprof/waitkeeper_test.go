package main

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
)

// fakeWaits records the calls a waitKeeper makes.
type fakeWaits struct{ calls []string }

func (f *fakeWaits) SamplePythonWaits(pid int, keep []string, writes bool) bool {
	f.calls = append(f.calls, fmt.Sprintf("sample %d %v %v", pid, keep, writes))
	return true
}

func (f *fakeWaits) KeepMorePythonWaits(pid int, keep []string, writes bool) bool {
	f.calls = append(f.calls, fmt.Sprintf("more %d %v %v", pid, keep, writes))
	return true
}

func (f *fakeWaits) KeepPythonWaits(pid int) bool {
	f.calls = append(f.calls, fmt.Sprintf("all %d", pid))
	return true
}

// TestWaitKeeper: a process's wait probes are sampled once its needs are
// known, a need not kept adds to what is kept (not all of them back), and
// only a need of all brings all back, for good.
func TestWaitKeeper(t *testing.T) {
	f := &fakeWaits{}
	k := newWaitKeeper(f, slog.New(slog.DiscardHandler))
	sleep := correlate.WaitProbes{Funcs: []string{"clock_nanosleep"}}
	put := correlate.WaitProbes{Funcs: []string{"sem_timedwait"}}
	k.need(7, correlate.WaitProbes{All: true}) // engine threads: nothing sampled
	k.need(9, sleep)
	k.need(9, sleep)
	k.need(9, put)
	k.need(9, correlate.WaitProbes{Funcs: []string{"clock_nanosleep", "sem_timedwait"}})
	k.need(9, correlate.WaitProbes{Writes: true})
	k.need(9, correlate.WaitProbes{All: true})
	k.need(9, correlate.WaitProbes{Funcs: []string{"read"}})
	want := []string{
		"sample 9 [clock_nanosleep] false",
		"more 9 [clock_nanosleep sem_timedwait] false",
		"more 9 [clock_nanosleep sem_timedwait] true",
		"all 9",
	}
	if !slices.Equal(f.calls, want) {
		t.Errorf("calls:\n%q\nwant\n%q", f.calls, want)
	}
}
