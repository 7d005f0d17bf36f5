package probes

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// TestFloodAccounting floods the ring buffer: the drainer stalls for 3 s
// (stallEnv) while the hitloop makes 1,000,000 cuEventRecord calls
// straight to the driver, each one probed at entry and one call event,
// ~136 MB of records against a 4 MiB buffer. Every call must be either
// delivered or counted lost, exactly, by kind, and the loss placed in
// time within the calls' span. The run ends both ways a run ends: the
// target exits, or the run is cancelled while it lives and Drain detaches
// the probes and reads the ring buffer to the end.
func TestFloodAccounting(t *testing.T) {
	for _, end := range []string{"exit", "cancel"} {
		t.Run(end, func(t *testing.T) { testFlood(t, end == "cancel") })
	}
}

func testFlood(t *testing.T, cancelRun bool) {
	const stall = 3 * time.Second
	const calls, chunk = 1000000, 50000
	t.Setenv(stallEnv, stall.String())
	s := openSession(t)
	h := startHitloop(t, "cuEventRecord")
	pid := h.cmd.Process.Pid
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	record, _ := cudaapi.ByName("cuEventRecord")
	var mu sync.Mutex
	received, others := 0, 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	sink := func(batch []events.Event, _ []LibraryPlan) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range batch {
			switch {
			case ev.Kind != events.KindCall || int(ev.PID) != pid:
			case ev.API == record.ID:
				received++
			default:
				others++
			}
		}
	}
	go func() {
		err := s.Run(ctx, sink)
		if cancelRun && err == nil {
			// The target lives on: detach, and read what is left.
			err = s.Drain(sink)
		}
		done <- err
	}()
	first := monotonicNow()
	start := time.Now()
	for made := 0; made < calls; made += chunk {
		h.mustCall(t, chunk)
	}
	last := monotonicNow()
	t.Logf("%d calls in %v", calls, time.Since(start).Round(time.Millisecond))
	if cancelRun {
		cancel()
	} else {
		h.in.Close()
	}
	select {
	case err := <-done:
		if cancelRun && err != nil || !cancelRun && !errors.Is(err, ErrTargetsExited) {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60 s of the end")
	}
	st := s.Stats()
	lost := st.LostByKind[events.KindCall]
	mu.Lock()
	defer mu.Unlock()
	t.Logf("received %d, lost %d (ring buffer full %d in all, %d unreadable), %d loss spans", received, lost,
		st.RingbufFull, st.BadRecords, len(st.LossSpans))
	if lost == 0 {
		t.Fatal("no call event was lost: the stall did not fill the ring buffer, the test proves nothing")
	}
	if uint64(received)+lost != calls {
		t.Errorf("received %d + lost %d = %d, want the %d calls made", received, lost, uint64(received)+lost, calls)
	}
	if others != 0 {
		t.Errorf("%d other calls delivered, want none", others)
	}
	var byKind, inSpans uint64
	for _, n := range st.LostByKind {
		byKind += n
	}
	if byKind != st.RingbufFull || st.BadRecords != 0 {
		t.Errorf("lost by kind %v sum to %d, the ring-buffer-full count is %d (%d unreadable)", st.LostByKind, byKind, st.RingbufFull, st.BadRecords)
	}
	for _, sp := range st.LossSpans {
		inSpans += sp.Events
		if sp.Start < first || sp.End > last {
			t.Errorf("loss span %d-%d ns outside the calls' %d-%d", sp.Start, sp.End, first, last)
		}
	}
	if inSpans != st.RingbufFull {
		t.Errorf("the loss spans hold %d events, want all %d lost", inSpans, st.RingbufFull)
	}
	if n := s.LostBetween(first, last); n != st.RingbufFull {
		t.Errorf("LostBetween the first and last call: %d, want %d", n, st.RingbufFull)
	}
	if n := s.LostBetween(0, first-1); n != 0 {
		t.Errorf("LostBetween 0 and before the first call: %d, want 0", n)
	}
}
