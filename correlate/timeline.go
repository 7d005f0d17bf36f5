package correlate

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
)

// Phase is what the step thread was doing at an instant of its step: the
// profiles label each sample with it (profiles/), so a flame graph can be
// cut by the phases the step metrics report.
type Phase string

const (
	// PhaseDispatchWait: blocked waiting for work to arrive (DispatchWait).
	PhaseDispatchWait Phase = "dispatch_wait"
	// PhaseData: in a data phase, less dispatch wait (DataTime).
	PhaseData Phase = "data"
	// PhaseSync: in a CUDA synchronisation outside the data phases.
	PhaseSync Phase = "sync"
	// PhaseCompute: the rest of the step after its lead-in, where the step
	// computed (its compute time is known, or it launched kernels).
	PhaseCompute Phase = "compute"
	// PhaseOther: the lead-in (the loop's bookkeeping between steps), the
	// rest of a step where nothing says it computed, and any thread but
	// the step thread.
	PhaseOther Phase = "other"
)

// PhaseSpan is one stretch of a step's timeline.
type PhaseSpan struct {
	Phase          Phase
	StartNS, EndNS uint64
}

// timeline cuts [start, end) into phases: where they overlap, dispatch
// wait wins over data, data over sync, sync over the rest, which is
// compute from begin on where the step computed and other elsewhere.
// Spans are sorted, do not overlap, cover the step and are merged where
// two neighbours have one phase.
func timeline(start, end, begin uint64, dispatch, data, syncs []span, computing bool) []PhaseSpan {
	if end <= start {
		return nil
	}
	layers := [][]span{normalize(dispatch, start, end), normalize(data, start, end), normalize(syncs, start, end)}
	names := []Phase{PhaseDispatchWait, PhaseData, PhaseSync}
	cuts := []uint64{start, end}
	if begin > start && begin < end {
		cuts = append(cuts, begin)
	}
	for _, l := range layers {
		for _, s := range l {
			cuts = append(cuts, s.start, s.end)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	next := make([]int, len(layers)) // per layer, its first span not yet behind
	var out []PhaseSpan
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], cuts[i+1]
		ph := PhaseOther
		if computing && a >= begin {
			ph = PhaseCompute
		}
		for li, l := range layers {
			for next[li] < len(l) && l[next[li]].end <= a {
				next[li]++
			}
			if next[li] < len(l) && l[next[li]].start <= a {
				ph = names[li]
				break
			}
		}
		if n := len(out); n > 0 && out[n-1].Phase == ph {
			out[n-1].EndNS = b
			continue
		}
		out = append(out, PhaseSpan{ph, a, b})
	}
	return out
}

// normalize clips spans to [start, end), sorts them and merges those that
// overlap or touch.
func normalize(spans []span, start, end uint64) []span {
	var out []span
	for _, s := range spans {
		lo, hi := max(s.start, start), min(s.end, end)
		if hi > lo {
			out = append(out, span{lo, hi})
		}
	}
	slices.SortFunc(out, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && s.start <= merged[n-1].end {
			merged[n-1].end = max(merged[n-1].end, s.end)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// PhaseAt is the step thread's phase at t: PhaseOther outside the step
// (and for a step without a timeline). A step runs to its boundary, so t
// at EndNS is in its last phase.
func (s *Step) PhaseAt(t uint64) Phase {
	ps := s.Phases
	i := sort.Search(len(ps), func(i int) bool { return ps[i].EndNS > t })
	switch {
	case i < len(ps) && ps[i].StartNS <= t:
		return ps[i].Phase
	case i == len(ps) && len(ps) > 0 && t == s.EndNS:
		return ps[i-1].Phase
	}
	return PhaseOther
}

// PhaseTime is the step's time in phase p, in seconds.
func (s *Step) PhaseTime(p Phase) float64 {
	var ns uint64
	for _, sp := range s.Phases {
		if sp.Phase == p {
			ns += sp.EndNS - sp.StartNS
		}
	}
	return seconds(ns)
}

// phaseSlack is how far a timeline's sum may be from the step's own: the
// sums are float seconds added wait by wait.
const phaseSlack = 1e-6

// CheckPhases says whether the step's timeline holds to what it must: sorted
// spans that cover the step end to end, data and dispatch wait summing to
// DataTime and DispatchWait, sync to no more than SyncTime, other to no
// more than the lead-in where the step computed, and no compute where it
// did not. The replays of the committed traces hold every step to it.
func (s *Step) CheckPhases() error {
	ps := s.Phases
	if s.EndNS <= s.StartNS {
		if len(ps) != 0 {
			return fmt.Errorf("%d phase spans in an empty step", len(ps))
		}
		return nil
	}
	if len(ps) == 0 || ps[0].StartNS != s.StartNS || ps[len(ps)-1].EndNS != s.EndNS {
		return fmt.Errorf("phases do not cover [%d, %d]", s.StartNS, s.EndNS)
	}
	for i, p := range ps {
		if p.EndNS <= p.StartNS || i > 0 && p.StartNS != ps[i-1].EndNS {
			return fmt.Errorf("phase span %d [%d, %d] empty or not where the one before ended", i, p.StartNS, p.EndNS)
		}
	}
	computing := s.ComputeSource != ComputeNone || s.Launches+s.GraphLaunches+s.OtherLaunches > 0
	switch data, dispatch, sync, other := s.PhaseTime(PhaseData), s.PhaseTime(PhaseDispatchWait), s.PhaseTime(PhaseSync), s.PhaseTime(PhaseOther); {
	case math.Abs(data-s.DataTime) > phaseSlack:
		return fmt.Errorf("data phases %.9f s, data_time %.9f", data, s.DataTime)
	case math.Abs(dispatch-s.DispatchWait) > phaseSlack:
		return fmt.Errorf("dispatch phases %.9f s, dispatch_wait %.9f", dispatch, s.DispatchWait)
	case sync > s.SyncTime+phaseSlack:
		return fmt.Errorf("sync phases %.9f s, sync_time only %.9f", sync, s.SyncTime)
	case computing && other > s.LeadIn+phaseSlack:
		return fmt.Errorf("other %.9f s in a computing step, lead-in only %.9f", other, s.LeadIn)
	case !computing && s.PhaseTime(PhaseCompute) > 0:
		return fmt.Errorf("compute phases in a step with no compute and no launches")
	}
	return nil
}
