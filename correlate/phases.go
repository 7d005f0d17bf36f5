package correlate

import (
	"slices"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// A step's data time is the sum of its data phases: each runs from where
// the loop starts to fetch (the step's beginning, or a data event after
// compute began) to where its compute begins. A loop accumulating
// gradients over micro-batches fetches, collates and copies in each one:
// every such phase counts (seed 000: data_time is the time in the data
// iterator, every fetch of the step).
//
// Where compute begins is known from the loop's own timing events (the
// record of each reading's start event), else from the kernel launches
// (the first of each run, where launches were counted all through the
// step), else from --probe compute= calls. In a step with none of those
// (launch counting is sampled, and the loop times nothing itself) the
// phases are estimated from the latest step in which launches placed
// them: the same always-probed calls in the same order end them, each a
// measured gap later (DataCalibrated).

// DataSource says where a step's data phases were found to end.
type DataSource string

const (
	DataNone DataSource = ""
	// DataEvents: at the records of the loop's own timing events.
	DataEvents DataSource = "cuda_events"
	// DataLaunches: at the first kernel launch after each data phase.
	DataLaunches DataSource = "launches"
	// DataProbe: at the start of the --probe compute= calls.
	DataProbe DataSource = "probe"
	// DataCalibrated: an estimate, launches not counted in the step: each
	// phase ends where it did in the latest step whose launches were, by
	// the step's always-probed calls (the same calls in the same order).
	DataCalibrated DataSource = "calibrated"
)

type span struct{ start, end uint64 }

// isDataEvent says whether an item of the step thread is part of getting
// data in: a wait for samples or for a DataLoader, a store fetch, a copy
// to the device.
func isDataEvent(it *item) bool {
	switch {
	case it.isWait:
		return it.wait == WaitDispatch || it.wait == WaitData
	case it.role == events.RoleData || it.role == events.RoleFetch || it.role == events.RoleGet:
		return true
	case it.role != "" || it.ev.Kind != events.KindCall:
		return false
	}
	a := it.ev.Desc()
	return a.Class == cudaapi.ClassCopy && it.ev.Dir() == cudaapi.DirHtoD
}

// phaseToken is one of a step's calls that are probed whether launches
// are counted or not: syncs, copies other than device-to-device ones,
// elapsed-time reads and user probes. Event records (narrowed to the
// sites whose events are read, and the pinned-memory allocator's come and
// go), allocations and device copies (probed with the launches) are not.
type phaseToken struct {
	k          key
	start, end uint64
}

func isPhaseToken(it *item) bool {
	e := &it.ev
	if e.Kind != events.KindCall || it.isWait {
		return false
	}
	if e.API >= cudaapi.UserBase {
		return it.role != events.RoleGet // as many as the samples a step takes
	}
	switch a := e.Desc(); a.Class {
	case cudaapi.ClassSync, cudaapi.ClassElapsed:
		return true
	case cudaapi.ClassCopy:
		return e.Dir() != cudaapi.DirDtoD
	}
	return false
}

// dataPhases walks a step from begin: a data phase runs to the next
// compute start, and the next one begins at the first data event after
// that, or where the compute before it was last submitted to (the
// latest of ends before that event: a loop's CPU work between its
// micro-batches, a sleep standing for collation, is data loading). It
// returns the phases closed by a compute start.
func dataPhases(begin, end uint64, starts, ends []uint64, data []span) []span {
	var phases []span
	cur, inData := begin, true
	si, di := 0, 0
	for {
		if inData {
			for si < len(starts) && starts[si] < cur {
				si++
			}
			if si == len(starts) || starts[si] > end {
				return phases
			}
			phases = append(phases, span{cur, starts[si]})
			cur, inData = starts[si], false
			continue
		}
		for di < len(data) && data[di].start < cur {
			di++
		}
		if di == len(data) || data[di].start >= end {
			return phases
		}
		from := data[di].start
		if last := latestIn(ends, cur, from); last != 0 {
			from = last
		}
		cur, inData = from, true
	}
}

// latestIn is the latest of xs in (lo, hi], 0 if none.
func latestIn(xs []uint64, lo, hi uint64) uint64 {
	var last uint64
	for _, x := range xs {
		if x > lo && x <= hi {
			last = max(last, x)
		}
	}
	return last
}

// endAtLastCall ends each phase placed by launches at the end of its last
// data event or always-probed call: the copy in, the sync that waits for
// it, the wait for the batch. The time from there to the first kernel is
// the model's own Python (its forward's dispatch), not data.
func endAtLastCall(phases []span, toks []phaseToken, data []span) {
	for i := range phases {
		p := &phases[i]
		last := uint64(0)
		for _, t := range toks {
			if t.start >= p.start && t.end <= p.end {
				last = max(last, t.end)
			}
		}
		for _, d := range data {
			if d.start >= p.start && d.end <= p.end {
				last = max(last, d.end)
			}
		}
		if last != 0 {
			p.end = last
		}
	}
}

// phaseShape is where a step's data phases began and ended, by its
// always-probed calls, learned in a step whose launches were counted.
type phaseShape struct {
	kinds  []key
	phases []phaseMark
}

type phaseMark struct {
	// startTok is the first token at or after the phase's start (-1: the
	// phase is the step's first, from its beginning); startWait says a
	// data wait before that token began it.
	startTok  int
	startWait bool
	// endTok is the last token that ended before the phase did (-1:
	// none, the step's beginning); the phase ended gap after it, or
	// after the last data wait between it and the next token.
	endTok int
	gap    uint64
}

// phaseEndFrom is where a phase's end is measured from: the end of token
// i (the step's beginning where i is -1), or of the last data wait that
// ended after it and before limit.
func phaseEndFrom(toks []phaseToken, i int, begin, limit uint64, waits []span) uint64 {
	at := begin
	if i >= 0 {
		at = toks[i].end
	}
	for _, w := range waits {
		if w.end > at && w.end <= limit {
			at = w.end
		}
	}
	return at
}

// learnShape describes phases by the step's tokens.
func learnShape(toks []phaseToken, phases []span, begin uint64, waits []span) (phaseShape, bool) {
	if len(phases) == 0 {
		return phaseShape{}, false
	}
	sh := phaseShape{kinds: make([]key, len(toks))}
	for i, t := range toks {
		sh.kinds[i] = t.k
	}
	for pi, p := range phases {
		m := phaseMark{startTok: -1, endTok: -1}
		if pi > 0 {
			m.startTok = len(toks)
			for i, t := range toks {
				if t.start >= p.start {
					m.startTok = i
					break
				}
			}
			m.startWait = m.startTok == len(toks) || toks[m.startTok].start > p.start
		}
		for i, t := range toks {
			if t.end <= p.end {
				m.endTok = i
			}
		}
		limit := p.end
		at := phaseEndFrom(toks, m.endTok, begin, limit, waits)
		if at > p.end {
			return phaseShape{}, false
		}
		m.gap = p.end - at
		sh.phases = append(sh.phases, m)
	}
	return sh, true
}

// apply estimates a step's phases from its tokens, where they are the
// shape's kinds in the same order.
func (sh phaseShape) apply(toks []phaseToken, begin, end uint64, waits []span) ([]span, bool) {
	if len(sh.phases) == 0 || len(toks) != len(sh.kinds) {
		return nil, false
	}
	for i, t := range toks {
		if t.k != sh.kinds[i] {
			return nil, false
		}
	}
	var out []span
	prevEnd := begin
	for _, m := range sh.phases {
		start := begin
		if m.startTok >= 0 {
			limit := end
			if m.startTok < len(toks) {
				limit = toks[m.startTok].start
				start = limit
			}
			if m.startWait {
				for _, w := range waits {
					if w.start >= prevEnd && w.start < limit {
						start = w.start
						break
					}
				}
			}
		}
		limit := end
		if m.endTok+1 < len(toks) {
			limit = toks[m.endTok+1].start
		}
		stop := phaseEndFrom(toks, m.endTok, begin, limit, waits) + m.gap
		if stop < start || stop > end {
			return nil, false
		}
		out = append(out, span{start, stop})
		prevEnd = stop
	}
	return out, true
}

// phaseTime is the phases' time less the dispatch waits inside them.
func phaseTime(phases []span, dispatch []span) uint64 {
	var total uint64
	for _, p := range phases {
		total += p.end - p.start
		covered := p.start
		for _, d := range dispatch {
			lo, hi := max(d.start, covered), min(d.end, p.end)
			if hi > lo {
				total -= hi - lo
				covered = hi
			}
		}
	}
	return total
}

func sortedStarts(xs []uint64) []uint64 {
	slices.Sort(xs)
	return slices.Compact(xs)
}
