package correlate

import (
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

func poolEvent(addr uint64, at uint64, n int) *events.Event {
	e := &events.Event{Kind: events.KindPool, Start: at, End: at, Name: "queue.Queue"}
	e.Args[0], e.Args[1] = uint64(n), addr
	return e
}

func TestClassifyQueueAddress(t *testing.T) {
	get := []events.PyFrame{{Func: "Condition.wait", File: "threading.py", Self: 0x10},
		{Func: "Queue.get", File: "/usr/lib/python3.12/queue.py", Self: 0xa0}, {Func: "<module>", File: "train.py", Self: 0x30}}
	if k, what, q := classify(get); k != WaitDispatch || what != "queue.Queue.get" || q != 0xa0 {
		t.Errorf("queue get: %s %q %#x, want the Queue.get frame's self 0xa0", k, what, q)
	}
	put := []events.PyFrame{{Func: "wait", File: "threading.py", Self: 0x10},
		{Func: "put", File: "/x/lib/python3.10/multiprocessing/queues.py", Self: 0xb0}}
	if k, _, q := classify(put); k != WaitFull || q != 0xb0 {
		t.Errorf("multiprocessing put: %s %#x, want full 0xb0", k, q)
	}
	// A bare connection is no queue.
	conn := []events.PyFrame{{Func: "Connection.recv", File: "/usr/lib/python3.12/multiprocessing/connection.py", Self: 0xc0}}
	if _, _, q := classify(conn); q != 0 {
		t.Errorf("connection recv: queue %#x, want none", q)
	}
}

func TestPoolReadings(t *testing.T) {
	p := newPools()
	const trainer, engine = 7, 8
	// Two queues: the step thread gets from 0xa0, engines put into 0xb0.
	for i, n := range []int{3, 2, 5} {
		p.add(poolEvent(0xa0, uint64(100+100*i), n))
	}
	p.add(poolEvent(0xb0, 150, 40))
	p.noteWait(engine, WaitFull, 0xb0)

	s := Step{TID: trainer, EndNS: 250}
	p.measure(&s, false)
	if !s.PoolMeasured || s.Pool != 40 {
		t.Fatalf("no get seen yet: pool %d (measured %v), want the put queue's 40", s.Pool, s.PoolMeasured)
	}
	p.noteWait(trainer, WaitDispatch, 0xa0)
	for _, tc := range []struct {
		end  uint64
		want int
		ok   bool
	}{{99, 0, false}, {100, 3, true}, {250, 2, true}, {300, 5, true}, {300 + poolStale + 1, 0, false}} {
		s := Step{TID: trainer, EndNS: tc.end}
		p.measure(&s, false)
		if s.PoolMeasured != tc.ok || s.Pool != tc.want {
			t.Errorf("step ending at %d: pool %d (measured %v), want %d (%v)", tc.end, s.Pool, s.PoolMeasured, tc.want, tc.ok)
		}
	}
	// Readings are bounded.
	for i := range 3 * poolKeep {
		p.add(poolEvent(0xa0, uint64(1000+i), i))
	}
	if n := len(p.readings[0xa0]); n > poolKeep {
		t.Errorf("%d readings kept, want at most %d", n, poolKeep)
	}
}

// TestPoolReadAtReturn: where the step thread's calls carry the pool's
// length as they returned, a step's pool is its last call's, not the
// polled one.
func TestPoolReadAtReturn(t *testing.T) {
	tr := newThread(100, 101, 0)
	for i := range 40 {
		e := tr.syncStep(t)
		e.Pool = uint32(i%3) + 1 // lengths 0, 1, 2 as the boundary returned
	}
	evs := append([]events.Event{*poolEvent(0xa0, 1, 99)}, tr.evs...)
	_, steps := run(t, Config{}, evs)
	if len(steps) != 39 {
		t.Fatalf("%d steps", len(steps))
	}
	for i, s := range steps {
		if want := (i + 1) % 3; !s.PoolMeasured || s.Pool != want || s.PoolKind != "queue.Queue" {
			t.Errorf("step %d: pool %d (measured %v, %q), want %d from its last call", i, s.Pool, s.PoolMeasured, s.PoolKind, want)
		}
	}
}

// TestSamplesFromDequeState: a deque counts its appends and pops, so the
// items a step took are (Δstate - Δlength) / 2 however many the engines
// put meanwhile; they are the batch for train_capacity and thru.
func TestSamplesFromDequeState(t *testing.T) {
	tr := newThread(100, 101, 0)
	state, n := uint32(1000), 5
	for i := range 40 {
		took, put := 4, 3+i%3 // the engines put 3 to 5 while the step takes 4
		state += uint32(took + put)
		n += put - took
		e := tr.syncStep(t)
		e.Pool, e.PoolState = uint32(n)+1, state+1
	}
	_, steps := run(t, Config{}, tr.evs)
	if len(steps) != 39 {
		t.Fatalf("%d steps", len(steps))
	}
	for i, s := range steps {
		if !s.SamplesMeasured || s.Samples != 4 {
			t.Fatalf("step %d: %d samples (measured %v), want 4", i, s.Samples, s.SamplesMeasured)
		}
		within(t, "train_capacity", s.TrainCapacity, 4/s.StepTime, 1e-9)
		within(t, "thru", s.Thru, 4/s.WallTime, 1e-9)
	}
}

// TestSamplesFromPipeReads: a multiprocessing queue's items taken are
// counted as such (its pipe's 4-byte reads); a count that starts afresh
// (the pool's word set again) gives that step no samples.
func TestSamplesFromPipeReads(t *testing.T) {
	tr := newThread(100, 101, 0)
	gets := uint32(0)
	for i := range 40 {
		gets += 4
		if i == 20 {
			gets = 2 // counted afresh
		}
		e := tr.syncStep(t)
		e.Pool, e.PoolGets = 2+1, gets+1
	}
	_, steps := run(t, Config{}, tr.evs)
	if len(steps) != 39 {
		t.Fatalf("%d steps", len(steps))
	}
	unmeasured := 0
	for i, s := range steps {
		if !s.SamplesMeasured {
			unmeasured++
			continue
		}
		if s.Samples != 4 {
			t.Fatalf("step %d: %d samples, want 4", i, s.Samples)
		}
	}
	if unmeasured != 1 {
		t.Errorf("%d steps without samples, want the one whose count started afresh", unmeasured)
	}
}
