package control

import (
	"slices"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
)

// TestWaitProbesCover: the Python wait probes kept serve a step only if
// they include every wait function it needs and, where its lead-in ends
// at a write, the writes; all of them serve any step, and a process
// needing all is served only by all.
func TestWaitProbesCover(t *testing.T) {
	kept := WaitProbes{Funcs: []string{"clock_nanosleep", "sem_timedwait"}}
	for _, tc := range []struct {
		need WaitProbes
		want bool
	}{
		{WaitProbes{}, true},
		{WaitProbes{Funcs: []string{"sem_timedwait"}}, true},
		{WaitProbes{Funcs: []string{"clock_nanosleep", "sem_timedwait"}}, true},
		{WaitProbes{Funcs: []string{"read"}}, false},
		{WaitProbes{Funcs: []string{"sem_timedwait", "recvmsg"}}, false},
		{WaitProbes{Writes: true}, false},
		{WaitProbes{All: true}, false},
	} {
		if got := kept.Covers(tc.need); got != tc.want {
			t.Errorf("%+v covers %+v: %v, want %v", kept, tc.need, got, tc.want)
		}
	}
	if !(WaitProbes{Writes: true}).Covers(WaitProbes{Writes: true}) || !(WaitProbes{All: true}).Covers(WaitProbes{All: true, Writes: true}) {
		t.Error("the same probes do not cover the same needs")
	}
	for _, tc := range []struct{ need, want WaitProbes }{
		{WaitProbes{}, kept},
		{WaitProbes{Funcs: []string{"recvmsg", "sem_timedwait"}}, WaitProbes{Funcs: []string{"clock_nanosleep", "recvmsg", "sem_timedwait"}}},
		{WaitProbes{Writes: true}, WaitProbes{Funcs: kept.Funcs, Writes: true}},
	} {
		got := kept.Union(tc.need)
		if !slices.Equal(got.Funcs, tc.want.Funcs) || got.Writes != tc.want.Writes || got.All != tc.want.All {
			t.Errorf("%+v with %+v: %+v, want %+v", kept, tc.need, got, tc.want)
		}
		if !got.Covers(tc.need) || !got.Covers(kept) {
			t.Errorf("%+v does not cover what it joins", got)
		}
	}
}

// TestWaitProbesFor: steps need the wait functions their thread blocked
// in and the writes where they log; a process with engine threads needs
// every wait probe, whatever its step thread blocked in.
func TestWaitProbesFor(t *testing.T) {
	for _, tc := range []struct {
		waits correlate.StepWaits
		want  WaitProbes
	}{
		{correlate.StepWaits{}, WaitProbes{}},
		{correlate.StepWaits{Funcs: []string{"clock_nanosleep"}, Writes: true}, WaitProbes{Funcs: []string{"clock_nanosleep"}, Writes: true}},
		{correlate.StepWaits{Funcs: []string{"clock_nanosleep"}, Engines: true}, WaitProbes{All: true}},
	} {
		if got := waitProbesFor(tc.waits); !got.Equal(tc.want) {
			t.Errorf("%+v: %+v, want %+v", tc.waits, got, tc.want)
		}
	}
}
