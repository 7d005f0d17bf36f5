package control

import (
	"log/slog"
	"slices"
	"testing"
)

// TestWaitKeeper: a process's wait probes are sampled once its needs are
// known, a need not kept adds to what is kept (not all of them back), and
// only a need of all brings all back, for good.
func TestWaitKeeper(t *testing.T) {
	f := &fakeProbes{}
	k := newWaitKeeper(f, slog.New(slog.DiscardHandler))
	sleep := WaitProbes{Funcs: []string{"clock_nanosleep"}}
	put := WaitProbes{Funcs: []string{"sem_timedwait"}}
	k.need(7, WaitProbes{All: true}) // engine threads: nothing sampled
	k.need(9, sleep)
	k.need(9, sleep)
	k.need(9, put)
	k.need(9, WaitProbes{Funcs: []string{"clock_nanosleep", "sem_timedwait"}})
	k.need(9, WaitProbes{Writes: true})
	k.need(9, WaitProbes{All: true})
	k.need(9, WaitProbes{Funcs: []string{"read"}})
	want := []string{
		"sample 9 [clock_nanosleep] false",
		"more 9 [clock_nanosleep sem_timedwait] false",
		"more 9 [clock_nanosleep sem_timedwait] true",
		"all 9",
	}
	if got := f.lines(); !slices.Equal(got, want) {
		t.Errorf("calls:\n%q\nwant\n%q", got, want)
	}
}
