package profiles

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/gpuprof/gpuprof/correlate"
)

// shareGPU gives the step's measured GPU time (its ComputeTime: the
// loop's CUDA-event readings, else derived from its launches and syncs)
// to the launch stacks sampled in it, on any thread of the process, in
// proportion to the launches each stands for. Without CUPTI there is no
// kernel's own duration to go by: a stack launching long kernels gets
// what one launching as many short ones does. A step in which no launch
// was sampled (launch counting is on only part of the time) is left out
// of the GPU profile and counted, so the GPU time by stack sums to the
// covered steps' GPU time exactly.
func (b *Builder) shareGPU(p *proc, s *correlate.Step) {
	source := string(s.ComputeSource)
	if s.ComputeSource == correlate.ComputeNone {
		source = sourceNone
	}
	type group struct {
		w        *window
		key      sampleKey
		launches int64
	}
	var groups []group
	at := map[*window]map[sampleKey]int{}
	for _, sl := range p.sortedSlots() {
		w := sl.by[TypeGPU.index()]
		if w == nil || sl.end <= s.StartNS || sl.start > s.EndNS {
			continue
		}
		kept := w.pending[:0]
		for _, ps := range w.pending {
			if ps.start <= s.StartNS || ps.start > s.EndNS {
				kept = append(kept, ps)
				continue
			}
			if ps.tid != s.TID && p.engines[ps.tid] {
				// An engine's launches: counted, with no GPU time of
				// the step's.
				w.fold(ps.stack, labels{phase: correlate.PhaseOther, kind: sourceEngine}, ps.value, 0)
				continue
			}
			// Launches of other threads (autograd's backward) run in
			// the step thread's phase then: its compute.
			k := sampleKey{ps.stack, labels{phase: s.PhaseAt(ps.start), kind: source, span: s.Index + 1}}
			if at[w] == nil {
				at[w] = map[sampleKey]int{}
			}
			i, ok := at[w][k]
			if !ok {
				i = len(groups)
				at[w][k] = i
				groups = append(groups, group{w: w, key: k})
			}
			groups[i].launches += ps.value
		}
		w.pending = kept
	}
	gpuNS := uint64(math.Round(max(s.ComputeTime, 0) * 1e9))
	switch {
	case len(groups) == 0 && s.LaunchesCounted && s.Launches+s.GraphLaunches > 0 && s.ComputeSource != correlate.ComputeNone:
		// Launches were counted, none of them sampled (a step of fewer
		// launches than one in LaunchEvery): the next step's stacks
		// take its GPU time.
		p.carriedNS += gpuNS
		p.carriedSteps++
		return
	case len(groups) == 0:
		b.stats.StepsNoStacks++
		b.stats.GPUNoStacksNS += gpuNS + p.carriedNS
		b.stats.StepsNoStacks += p.carriedSteps
		p.carriedNS, p.carriedSteps = 0, 0
		return
	case s.ComputeSource == correlate.ComputeNone:
		b.stats.StepsNoGPUTime++
	default:
		b.stats.StepsCovered++
		b.stats.StepsCarried += p.carriedSteps
		gpuNS += p.carriedNS
		b.stats.GPUCoveredNS += gpuNS
		p.carriedNS, p.carriedSteps = 0, 0
	}
	weights := make([]uint64, len(groups))
	for i, g := range groups {
		weights[i] = uint64(g.launches)
	}
	for i, share := range shares(gpuNS, weights) {
		g := groups[i]
		g.w.fold(g.key.stack, g.key.labels, g.launches, int64(share))
	}
}

// shares splits total by weights, each share the difference of two
// rounded-down running totals, so they sum to total exactly.
func shares(total uint64, weights []uint64) []uint64 {
	var sum uint64
	for _, w := range weights {
		sum += w
	}
	out := make([]uint64, len(weights))
	if sum == 0 {
		return out
	}
	var run, prev uint64
	for i, w := range weights {
		run += w
		hi, lo := bits.Mul64(total, run)
		q, _ := bits.Div64(hi, lo, sum) // run <= sum, so the quotient fits
		out[i], prev = q-prev, q
	}
	return out
}

// sortedSlots are p's open windows in time order.
func (p *proc) sortedSlots() []*slot {
	out := make([]*slot, 0, len(p.slots))
	for _, sl := range p.slots {
		out = append(out, sl)
	}
	slices.SortFunc(out, func(a, b *slot) int { return cmp.Compare(a.start, b.start) })
	return out
}
