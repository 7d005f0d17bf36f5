package probes

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// TestSlowSinkLosesNothing stalls the event loop for 4 s (as closing links
// or attaching to a library just loaded does) while the target makes
// 100,000 probed calls, ~13 MB of events against a 4 MiB ring buffer: the
// drainer holds them, and every one arrives.
func TestSlowSinkLosesNothing(t *testing.T) {
	const stall = 4 * time.Second
	s := openSession(t)
	h := startHitloop(t, "cuEventRecord")
	if _, err := s.Attach(h.cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	record, _ := cudaapi.ByName("cuEventRecord")
	var mu sync.Mutex
	records := 0
	stalled := make(chan struct{})
	var once sync.Once
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, func(batch []events.Event, _ []LibraryPlan) {
			n := 0
			for _, ev := range batch {
				if ev.Kind == events.KindCall && ev.API == record.ID {
					n++
				}
			}
			mu.Lock()
			records += n
			mu.Unlock()
			if n > 0 {
				once.Do(func() {
					close(stalled)
					time.Sleep(stall)
				})
			}
		})
	}()
	h.mustCall(t, 10)
	select {
	case <-stalled:
	case <-time.After(10 * time.Second):
		t.Fatal("no event record reached the sink")
	}
	// 100,000 calls in chunks over ~2 s (~7 MB/s, 2.5 times the H200 DDP
	// job's rate): what is tested is the loop's stall, not how fast the
	// drainer decodes a burst (several times slower under -race).
	start := time.Now()
	for range 50 {
		h.mustCall(t, 2000)
		time.Sleep(40 * time.Millisecond)
	}
	if d := time.Since(start); d > stall {
		t.Logf("the calls took %v, longer than the stall: the test proves less", d)
	}
	want := 100010
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		got := records
		mu.Unlock()
		if got >= want || time.Now().After(deadline) {
			if got != want {
				t.Errorf("%d event records delivered, want %d", got, want)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := s.Stats(); st.RingbufFull != 0 || st.BadRecords != 0 {
		t.Errorf("lost %d to a full ring buffer, %d undecodable, want none", st.RingbufFull, st.BadRecords)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
