package correlate

import "testing"

// TestAfterDataNeedsWorkAfter: a boundary call after a fetch with no work
// between ends nothing (a sync after the copy in) only where work follows
// it before the next one. A stretch in which the step thread's steps show
// no launches of their own (a DDP rank's trace from the H200 pair,
// h200x2-ranks, its boundary learned from one 2 s phase of such steps
// once launches were priced at 0.9 µs) has its readings after the fetch
// end its steps: taken for syncs after a copy in, they had the builder
// pass over every step while launches were not counted (4 of 140 steps
// found).
func TestAfterDataNeedsWorkAfter(t *testing.T) {
	keyFor := func(name string) key { return keyOf(apiNamed(t, name), nil) }
	sync, copyIn := keyFor("cudaStreamSynchronize"), keyFor("cuMemcpyHtoDAsync_v2")
	m := matcher{key: sync}
	var end uint64
	at := func(k key, work uint32, data bool) token {
		end += 1000
		return token{k: k, end: end, work: work, data: data}
	}
	var withWork, noWork []token
	for range 10 {
		// loss.item() syncs after the copy in, then after the step's kernels.
		withWork = append(withWork, at(copyIn, 0, true), at(sync, 0, false), at(keyFor("cudaEventRecord"), 170, false), at(sync, 0, false))
		// The same calls, the kernels launched elsewhere.
		noWork = append(noWork, at(copyIn, 0, true), at(sync, 0, false), at(keyFor("cudaEventRecord"), 0, false))
	}
	if _, _, _, n := clustersWithin(withWork, m, false); n < 9 {
		t.Errorf("syncs after a copy in, work after them: %d of 10 after data, want 9 or more", n)
	}
	if _, _, _, n := clustersWithin(noWork, m, false); n != 0 {
		t.Errorf("syncs after a copy in, no work in the steps: %d after data, want 0", n)
	}
}
