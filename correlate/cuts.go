package correlate

import "github.com/gpuprof/gpuprof/cudaapi"

// Some loops call the boundary's kind several times a step, with kernels
// launched between (the Hugging Face Trainer reads a loss or a count with
// .item() at five places of its step), so no cluster of those calls comes
// once a step. What does come once a step is the fetch: a step's compute
// ends at the last such call before the next step's data phase begins (a
// wait for samples or batches, a fetch, a copy in). A cut matcher ends
// steps there.

// isDataCopy says whether calls of k copy data in: they begin a data
// phase, so they cannot be the last call before one.
func (k key) isDataCopy() bool { return k.class == cudaapi.ClassCopy && k.dir == cudaapi.DirHtoD }

func reasonWord(m matcher) string {
	if m.cut {
		return "the last"
	}
	return "one"
}

// A boundary call counts only once the step's compute has begun since its
// fetch (armed): kernels launched, or a call of another kind that is no
// data event. The Trainer's syncs after each copy in, and a model's
// set-up copying its weights in one by one with a sync after each, end
// nothing.
func arms(k key, work uint32, data bool) bool {
	return work > 0 || !data && k.canBeBoundary()
}

// dataCuts returns the end of the last call m matches before each data
// event that follows one, and the intervals between those ends: the
// kernels launched (other calls, byCalls) and the kinds of other calls.
func dataCuts(toks []token, m matcher, byCalls bool) (ends []uint64, ivs []interval) {
	pending, armed, open := false, false, false
	var last uint64
	work := 0
	others := map[key]bool{}
	for _, t := range toks {
		if t.gap {
			// The work in between is not known: no interval spans it.
			pending, armed, open, work = false, false, false, 0
			clear(others)
			continue
		}
		match := m.match(t.k)
		switch {
		case byCalls && !match && !t.data:
			work++
		case !byCalls:
			work += int(t.work)
		}
		if match {
			if armed = armed || t.work > 0; armed {
				pending, last = true, t.end
			}
			continue
		}
		if t.data && pending {
			if open {
				ivs = append(ivs, interval{work: work, sig: signature(others)})
			}
			ends = append(ends, last)
			pending, armed, open, work = false, false, true, 0
			clear(others)
			continue
		}
		armed = armed || arms(t.k, t.work, t.data)
		if t.k.canBeBoundary() {
			others[t.k] = true
		}
	}
	return ends, ivs
}
