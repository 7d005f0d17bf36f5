package correlate

import "testing"

// TestDDPLoopLearnedSoon: DistributedDataParallel's timed iterations at
// the start (the first ten: event syncs, records and readings of their
// own) do not hold back finding the loop's own boundary until plain steps
// outnumber them.
func TestDDPLoopLearnedSoon(t *testing.T) {
	tr := newThread(100, 101, 0)
	ddpTimed := func(i int) bool { return i < 10 || i%100 == 0 }
	var ends []uint64
	for i := range 300 {
		tr.idle(2 * ms)
		for range 4 {
			tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 4<<20, 1, 0x55)
		}
		tr.launch(1, 5*us)
		if i > 0 && ddpTimed(i-1) {
			tr.call(t, "cudaEventSynchronize", 3*us, 0xd1)
			tr.elapsed(t, 2, 0xd1, 0xd2)
			tr.call(t, "cudaEventSynchronize", 3*us, 0xd3)
			tr.elapsed(t, 3, 0xd2, 0xd3)
		}
		tr.call(t, "cudaEventRecordWithFlags", 3*us, 0xe1, 0x55)
		if ddpTimed(i) {
			tr.call(t, "cudaEventRecordWithFlags", 3*us, 0xd1, 0x55)
		}
		tr.launch(60, 8*us)
		if ddpTimed(i) {
			tr.call(t, "cudaEventRecordWithFlags", 3*us, 0xd2, 0x55)
		}
		tr.launch(100, 8*us)
		if ddpTimed(i) {
			tr.call(t, "cudaEventRecordWithFlags", 3*us, 0xd3, 0x55)
		}
		tr.call(t, "cudaEventRecordWithFlags", 3*us, 0xe2, 0x55)
		tr.call(t, "cudaMemcpyAsync", 10*us, 0xc000, 0xd000, 4, 2, 0x55)
		tr.call(t, "cudaStreamSynchronize", 25*ms, 0x55)
		tr.elapsed(t, 26, 0xe1, 0xe2)
		ends = append(ends, tr.t)
		tr.idle(50 * us)
	}
	c, _ := New(Config{})
	for i := range tr.evs {
		c.Add(&tr.evs[i])
		if a, ok := c.Anchor(); ok {
			n := 0
			for _, e := range ends {
				if e <= tr.evs[i].End {
					n++
				}
			}
			t.Logf("%s after %d steps (%.2fs of events)", a.Calls, n, float64(tr.evs[i].End)/1e9)
			// Proposed once plain steps outnumber DDP's ten timed ones,
			// confirmed 2 s (confirmSpan, ~70 steps) later.
			if a.Calls != "event elapsed-time read" || n > 100 {
				t.Fatalf("boundary %q after %d steps, want the elapsed-time read within 100", a.Calls, n)
			}
			return
		}
	}
	t.Fatal("no boundary found")
}
