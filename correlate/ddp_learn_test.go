package correlate

import "testing"

// ddpIteration is iteration i of a DistributedDataParallel loop: data
// copied in, forward and backward (160 launches), loss.item(), and the
// loop's own reading of its compute (computeMS). On the iterations timed
// says, DDP records events around its forward and backward, and at the
// next iteration's forward syncs and reads them: the step before's.
func ddpIteration(t testing.TB, tr *thread, i int, timed func(int) bool, computeMS float32) {
	tr.idle(2 * ms)
	for range 4 {
		tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 4<<20, 1, 0x55)
	}
	tr.launch(1, 5*us) // cat
	if i > 0 && timed(i-1) {
		tr.call(t, "cudaEventSynchronize", 3*us, 0xd1)
		tr.elapsed(t, 2, 0xd1, 0xd2) // forward, the step before
		tr.call(t, "cudaEventSynchronize", 3*us, 0xd3)
		tr.elapsed(t, 3, 0xd2, 0xd3) // backward
	}
	tr.call(t, "cudaEventRecordWithFlags", 3*us, 0xe1, 0x55)
	if timed(i) {
		tr.call(t, "cudaEventRecordWithFlags", 3*us, 0xd1, 0x55)
	}
	tr.launch(60, 8*us)
	if timed(i) {
		tr.call(t, "cudaEventRecordWithFlags", 3*us, 0xd2, 0x55)
	}
	tr.launch(100, 8*us)
	if timed(i) {
		tr.call(t, "cudaEventRecordWithFlags", 3*us, 0xd3, 0x55)
	}
	tr.call(t, "cudaEventRecordWithFlags", 3*us, 0xe2, 0x55)
	tr.call(t, "cudaMemcpyAsync", 10*us, 0xc000, 0xd000, 4, 2, 0x55)
	tr.call(t, "cudaStreamSynchronize", uint64(computeMS-1)*ms, 0x55)
	tr.elapsed(t, computeMS, 0xe1, 0xe2)
	tr.idle(50 * us)
}

// TestDDPLoopLearnedSoon: DistributedDataParallel's timed iterations at
// the start (the first ten: event syncs, records and readings of their
// own) do not hold back finding the loop's own boundary until plain steps
// outnumber them.
func TestDDPLoopLearnedSoon(t *testing.T) {
	tr := newThread(100, 101, 0)
	ddpTimed := func(i int) bool { return i < 10 || i%100 == 0 }
	var ends []uint64
	for i := range 300 {
		ddpIteration(t, tr, i, ddpTimed, 26)
		ends = append(ends, tr.t-50*us)
	}
	c, _ := New(Config{})
	for i := range tr.evs {
		c.Add(&tr.evs[i])
		if a, ok := c.Boundary(); ok {
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
