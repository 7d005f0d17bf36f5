package profiles

import (
	"sort"

	"github.com/gpuprof/gpuprof/correlate"
)

// stepInfo is what labelling needs of a cut step.
type stepInfo struct {
	index      int
	tid        uint32
	start, end uint64
	phases     []correlate.PhaseSpan
}

func (st *stepInfo) phaseAt(t uint64) correlate.Phase {
	s := correlate.Step{StartNS: st.start, EndNS: st.end, Phases: st.phases}
	return s.PhaseAt(t)
}

// proc is one process's windows and the steps cut that their samples may
// still fall in.
type proc struct {
	// steps are sorted by end. A step holds (start, end]: the calls that
	// returned after the previous boundary, up to its own.
	steps     []stepInfo
	lastEnd   uint64 // the latest step's end: samples up to it are labelled at once
	slots     map[int64]*slot
	flushedTo uint64 // windows ending by this were sent: samples there come too late
	// engines are its threads seen waiting for the GPU's results (a sync
	// or a device-to-host copy) other than its step thread: inference
	// engines, whose launches are not the step's (correlate/engines.go
	// tells them apart the same way; autograd's threads never wait).
	engines map[uint32]bool
	// carriedNS is the GPU time of the steps since the last one with a
	// launch stack, launches counted all through them: given to the next
	// step's stacks (a loop's steps launch alike).
	carriedNS    uint64
	carriedSteps int
}

// slot is one window of a process, a window a profile type.
type slot struct {
	start, end uint64
	by         [numTypes]*window
}

// addStep keeps the step in end order (a boundary that moved to another
// thread replays its recent events into steps that may end before the
// latest one).
func (p *proc) addStep(st stepInfo) {
	i := sort.Search(len(p.steps), func(i int) bool { return p.steps[i].end > st.end })
	p.steps = append(p.steps, stepInfo{})
	copy(p.steps[i+1:], p.steps[i:])
	p.steps[i] = st
	p.lastEnd = max(p.lastEnd, st.end)
}

// stepAt is the step holding instant t, nil if none does.
func (p *proc) stepAt(t uint64) *stepInfo {
	i := sort.Search(len(p.steps), func(i int) bool { return p.steps[i].end >= t })
	if i < len(p.steps) && p.steps[i].start < t {
		return &p.steps[i]
	}
	return nil
}

// placeInstant labels an on-CPU sample of thread tid at t: the phase is
// the step thread's own, any other thread is other.
func (p *proc) placeInstant(w *window, stack int, tid uint32, t uint64, v0, v1 int64, kind string, anyThread bool) {
	l := labels{phase: correlate.PhaseOther, kind: kind}
	if st := p.stepAt(t); st != nil {
		l.span = st.index + 1
		if anyThread || tid == st.tid {
			l.phase = st.phaseAt(t)
		}
	}
	w.fold(stack, l, v0, v1)
}

// placeSpan labels blocked time of thread tid from a to b, split by the
// steps it crosses and, on the step thread, by their phases: the wait
// profile's time by phase is then the steps' own.
func (p *proc) placeSpan(w *window, stack int, tid uint32, a, b uint64, kind string) {
	outside := labels{phase: correlate.PhaseOther, kind: kind}
	cur := a
	i := sort.Search(len(p.steps), func(i int) bool { return p.steps[i].end > a })
	for ; i < len(p.steps) && cur < b && p.steps[i].start < b; i++ {
		st := &p.steps[i]
		lo, hi := max(cur, st.start), min(b, st.end)
		if lo > cur {
			w.fold(stack, outside, int64(lo-cur), 0)
		}
		if hi <= lo {
			continue
		}
		l := labels{phase: correlate.PhaseOther, kind: kind, span: st.index + 1}
		rest := hi - lo
		if tid == st.tid {
			for _, ph := range st.phases {
				if x, y := max(lo, ph.StartNS), min(hi, ph.EndNS); y > x {
					w.fold(stack, labels{ph.Phase, kind, l.span}, int64(y-x), 0)
					rest -= y - x
				}
			}
		}
		if rest > 0 {
			w.fold(stack, l, int64(rest), 0)
		}
		cur = hi
	}
	if b > cur {
		w.fold(stack, outside, int64(b-cur), 0)
	}
}

// place labels what of a pending sample its steps now cover, up to
// until: it says whether the sample is done, else it keeps the rest.
func (p *proc) place(w *window, ps *pending, typ Type, until uint64) bool {
	if ps.start == ps.end {
		if ps.start > until {
			return false
		}
		if typ == TypeGPU {
			// A launch its step did not take (past the lag bound, or in no
			// step): its launches count, its GPU time is not known.
			p.placeInstant(w, ps.stack, ps.tid, ps.start, ps.value, 0, sourceNone, true)
		} else {
			p.placeInstant(w, ps.stack, ps.tid, ps.start, ps.value, 0, ps.kind, false)
		}
		return true
	}
	if ps.start >= until {
		return false
	}
	end := min(ps.end, until)
	p.placeSpan(w, ps.stack, ps.tid, ps.start, end, ps.kind)
	ps.start = end
	return ps.start >= ps.end
}
