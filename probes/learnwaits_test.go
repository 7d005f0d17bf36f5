package probes

import (
	"testing"
	"time"
)

// TestPythonWaitsGoWithLearningLaunches: while a process's steps are
// learned with its launches counted part of the time (LearnLaunches), all
// its Python wait probes go with the launch probes, the markers saying so
// (Args[0] 1): no wait of any thread is seen in a pause, the producer's
// sleeps included (nothing is kept while the needs are unknown). Once the
// boundary is found (SampleLaunches) they are all attached again, with a
// marker that says so, and stay while its steps say which they need.
func TestPythonWaitsGoWithLearningLaunches(t *testing.T) {
	s, pid, c, closes, stop := runQueueWaits(t, 400) // ~8 s
	time.Sleep(500 * time.Millisecond)
	// On 150 ms of every 600, doubling each cycle: off at once, on from
	// 0.45 s to 0.75 s, off until 1.65 s.
	const period, on = 600 * time.Millisecond, 150 * time.Millisecond
	s.sampling.LearnLaunches(pid, period, on)
	time.Sleep(1400 * time.Millisecond)
	found := monotonicNow()
	s.sampling.SampleLaunches(pid, 20*time.Second, 100*time.Millisecond)
	resumed := monotonicNow() // attached again once it returns: they were paused
	time.Sleep(1500 * time.Millisecond)
	stop()
	marks, waits := marksAndWaits(c.evs, pid)
	sleeps := producerSleeps(c.evs, pid)
	paused := pausedSpans(marks, closes, pid)
	if len(paused) < 2 {
		t.Fatalf("%d pauses of the wait probes in %d markers while learning, want 2", len(paused), len(marks))
	}
	for _, span := range paused {
		if n := countIn(waits, span) + countIn(sleeps, span); n > 0 {
			t.Errorf("%d waits began in a pause of the wait probes while learning (%v long): all were to go",
				n, time.Duration(span[1]-span[0]))
		}
	}
	if n := countIn(waits, [2]uint64{found - uint64(time.Second), found}); n == 0 {
		t.Error("no wait seen in the learning's on phase: the test shows nothing")
	}
	last := marks[len(marks)-1]
	if last.Args[0] != 0 || last.End < found || last.Out != 0 {
		t.Errorf("last marker %+v: want the waits probed from the boundary on (Args[0] 0), launches still off", last)
	}
	seenThroughout(t, waits, resumed, 40, 100*time.Millisecond)
	seenThroughout(t, sleeps, resumed, 40, 100*time.Millisecond)
}
