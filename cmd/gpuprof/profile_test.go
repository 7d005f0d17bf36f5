package main

import "testing"

// TestWaitNeedsCovers: the Python wait probes left attached serve a step
// only if they include every wait function it needs and, where its
// lead-in ends at a write, the writes.
func TestWaitNeedsCovers(t *testing.T) {
	kept := waitNeeds{funcs: []string{"clock_nanosleep", "sem_timedwait"}}
	for _, tc := range []struct {
		funcs  []string
		writes bool
		want   bool
	}{
		{nil, false, true},
		{[]string{"sem_timedwait"}, false, true},
		{[]string{"clock_nanosleep", "sem_timedwait"}, false, true},
		{[]string{"read"}, false, false},
		{[]string{"sem_timedwait", "recvmsg"}, false, false},
		{nil, true, false},
	} {
		if got := kept.covers(tc.funcs, tc.writes); got != tc.want {
			t.Errorf("covers(%v, writes %v) = %v, want %v", tc.funcs, tc.writes, got, tc.want)
		}
	}
	if !(waitNeeds{writes: true}).covers(nil, true) {
		t.Error("kept writes do not cover a step needing writes")
	}
}
