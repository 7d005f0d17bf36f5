package correlate

import (
	"slices"

	"github.com/gpuprof/gpuprof/events"
)

// The sample pool is the queue the job's threads wait on: the one the step
// thread gets its samples from, or else the one engines block putting
// into. Its length comes read as each of the step thread's calls returned
// (Event.Pool, once the session knows the step thread), so a step's pool
// is its length as the step ended, as a loop that logs qsize() after each
// step sees it. Before that, and where BPF could not read it, it comes
// from KindPool events, polled from the process's memory by the session
// (probes/pool.go): the last length read at or before the step's end.

// poolKeep bounds the readings kept per queue: the sampler sends one on
// each change, so this covers seconds of a busy pool, more than the delay
// between a step's end and its report.
const poolKeep = 1 << 12

// poolStale is how old the last reading may be at a step's end and still
// be its pool: the sampler re-sends an unchanged length every 250 ms.
const poolStale = 1e9

type poolReading struct {
	at uint64
	n  int
}

// pools tracks one process's queues: their readings, and which of them the
// step thread took from or engines put into last.
type pools struct {
	readings map[uint64][]poolReading // by queue address
	kinds    map[uint64]string
	gotBy    map[uint32]uint64 // thread -> the queue it last waited to get from
	putInto  uint64            // the queue a put last blocked on
	// batches: queues a DataLoader's waits were on. Each item is a whole
	// batch of a size gpuprof does not know, so their takes are no
	// sample counts.
	batches map[uint64]bool
	loader  bool // a thread of the process waited in a DataLoader
}

func newPools() pools {
	return pools{readings: map[uint64][]poolReading{}, kinds: map[uint64]string{}, gotBy: map[uint32]uint64{}, batches: map[uint64]bool{}}
}

// add takes a KindPool event.
func (p *pools) add(e *events.Event) {
	addr := e.Args[1]
	rs := p.readings[addr]
	if len(rs) >= poolKeep {
		rs = append(rs[:0], rs[len(rs)/2:]...)
	}
	p.readings[addr] = append(rs, poolReading{at: e.End, n: int(e.Args[0])})
	p.kinds[addr] = e.Name
}

// noteWait remembers which queue a wait was on.
func (p *pools) noteWait(tid uint32, kind WaitKind, queue uint64) {
	if kind == WaitData {
		p.loader = true
	}
	if queue == 0 {
		return
	}
	switch kind {
	case WaitDispatch, WaitData: // a sample pool, or a DataLoader's batches
		p.gotBy[tid] = queue
		if kind == WaitData {
			p.batches[queue] = true
		}
	case WaitFull:
		p.putInto = queue
	}
}

// pick returns the queue that is the step thread's pool.
func (p *pools) pick(tid uint32) (uint64, bool) {
	for _, q := range []uint64{p.gotBy[tid], p.putInto} {
		if _, ok := p.readings[q]; ok && q != 0 {
			return q, true
		}
	}
	if len(p.readings) == 1 {
		for q := range p.readings {
			return q, true
		}
	}
	return 0, false
}

// measure sets the step's pool, unless read as its last call returned:
// the last reading at or before its end. Items taken from a DataLoader's
// queue are batches: no samples, so no train_capacity or thru from them,
// counted in the step or carried from the last step counted while the
// wait probes were off (the HF Trainer's steps on the H200 carried a
// batch a step as 1 sample in 209 of 300 steps). So are those of a
// process one of whose threads waits in a DataLoader (its pin-memory
// thread, where the loop never waits: its pool is the pinned batches'
// queue).
func (p *pools) measure(s *Step, batchKnown bool) {
	q, ok := p.pick(s.TID)
	if (ok && p.batches[q] || p.loader) && !batchKnown {
		s.Samples, s.SamplesMeasured, s.TrainCapacity, s.Thru = 0, false, 0, 0
	}
	if s.PoolMeasured {
		s.PoolKind = p.kinds[q]
		return
	}
	if !ok {
		return
	}
	rs := p.readings[q]
	i, _ := slices.BinarySearchFunc(rs, s.EndNS+1, func(r poolReading, t uint64) int {
		switch {
		case r.at < t:
			return -1
		case r.at > t:
			return 1
		}
		return 0
	})
	if i == 0 || s.EndNS-rs[i-1].at > poolStale {
		return
	}
	s.Pool, s.PoolMeasured, s.PoolKind = rs[i-1].n, true, p.kinds[q]
}
