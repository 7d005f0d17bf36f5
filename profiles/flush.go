package profiles

import (
	"slices"

	"github.com/gpuprof/gpuprof/correlate"
)

// Step takes a step as the loop cuts it: it labels the samples it holds,
// and shares its GPU time among the launches sampled in it.
func (b *Builder) Step(s correlate.Step) {
	p := b.proc(s.PID)
	p.addStep(stepInfo{index: s.Index, tid: s.TID, start: s.StartNS, end: s.EndNS, phases: s.Phases})
	b.shareGPU(p, &s)
	for _, sl := range p.slots {
		if sl.start >= p.lastEnd {
			continue
		}
		for ti, w := range sl.by {
			if w == nil {
				continue
			}
			kept := w.pending[:0]
			for i := range w.pending {
				if !p.place(w, &w.pending[i], types[ti], p.lastEnd) {
					kept = append(kept, w.pending[i])
				}
			}
			w.pending = kept
		}
	}
}

// Flush returns the windows complete at nowNS (the event clock): those
// the process's steps have been cut past, those older than the lag bound
// (their samples still without a step are outside any), and every one
// where final. Empty profiles are left out.
func (b *Builder) Flush(nowNS uint64, final bool) []Profile {
	var out []Profile
	b.releaseHeld(nowNS, final)
	pids := make([]uint32, 0, len(b.procs))
	for pid := range b.procs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		p := b.procs[pid]
		if final && p.carriedSteps > 0 {
			// No step came to take their GPU time.
			b.stats.StepsNoStacks += p.carriedSteps
			b.stats.GPUNoStacksNS += p.carriedNS
			p.carriedNS, p.carriedSteps = 0, 0
		}
		idx := make([]int64, 0, len(p.slots))
		for i := range p.slots {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		heldFrom, holding := b.heldFrom(pid)
		for _, i := range idx {
			sl := p.slots[i]
			if !final && (p.lastEnd < sl.end || holding && heldFrom < sl.end) && nowNS < sl.end+b.lag {
				break // later windows are no more complete
			}
			out = append(out, b.close(pid, p, sl)...)
			delete(p.slots, i)
			p.flushedTo = max(p.flushedTo, sl.end)
		}
		if nowNS > b.lag {
			// A window that ends past the lag bound is sent whether it
			// was made or not: samples for it come too late, and the
			// steps before it are no longer needed, in a process with
			// steps and no samples too.
			start, _ := b.bounds(b.windowIndex(nowNS - b.lag))
			p.flushedTo = max(p.flushedTo, start)
		}
		// Steps before the windows still open label nothing more.
		keep := 0
		for keep < len(p.steps) && p.steps[keep].end <= p.flushedTo {
			keep++
		}
		p.steps = slices.Delete(p.steps, 0, keep)
	}
	for k, w := range b.waits {
		if w.end+b.lag < nowNS {
			delete(b.waits, k)
		}
	}
	for k, tw := range b.recent {
		if last := tw.spans[(tw.n-1)%recentWaits]; last.end+b.lag < nowNS {
			delete(b.recent, k)
		}
	}
	b.stats.Profiles += len(out)
	return out
}

// close labels a window's samples still without a step as outside any,
// and makes its profiles.
func (b *Builder) close(pid uint32, p *proc, sl *slot) []Profile {
	var out []Profile
	for ti, w := range sl.by {
		if w == nil {
			continue
		}
		for i := range w.pending {
			p.place(w, &w.pending[i], types[ti], ^uint64(0))
		}
		w.pending = nil
		if w.empty() {
			continue
		}
		prof := w.profile(types[ti], b.cfg.Clock(sl.start).UnixNano(), int64(sl.end-sl.start))
		out = append(out, Profile{PID: pid, Type: types[ti], StartNS: sl.start, EndNS: sl.end, Prof: prof})
	}
	return out
}

// Stats says what the builder left out or folded, and how much of the
// GPU time its profiles hold.
func (b *Builder) Stats() Stats { return b.stats }
