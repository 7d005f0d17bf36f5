package profiles

import (
	"slices"

	"github.com/google/pprof/profile"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Type is a profile type.
type Type string

const (
	TypeCPU  Type = "cpu"  // process_cpu:cpu:nanoseconds:cpu:nanoseconds
	TypeWait Type = "wait" // wait:wait:nanoseconds:wait:nanoseconds
	TypeGPU  Type = "gpu"  // gpu_time:kernel_launches:count and gpu_time:gpu_time:nanoseconds
)

const numTypes = 3

var types = [numTypes]Type{TypeCPU, TypeWait, TypeGPU}

func (t Type) index() int { return slices.Index(types[:], t) }

// Profile is one window of one process's profile of one type.
type Profile struct {
	PID            uint32
	Type           Type
	StartNS, EndNS uint64 // the window, CLOCK_MONOTONIC ns
	Prof           *profile.Profile
}

// Builder turns events and steps into profiles. Give it each event before
// the control loop sees it (the loop cuts a step on a later event, so a
// step's samples are in by then) and each step the loop cuts; Flush
// returns the windows complete. It is not safe for concurrent use: the
// goroutine that adds events owns it.
type Builder struct {
	cfg      Config
	interval uint64
	lag      uint64
	procs    map[uint32]*proc
	// offset is wall minus event clock, ns, read once: windows start at
	// multiples of the interval on the wall clock.
	offset   int64
	offsetOK bool
	waits    map[uint64]lastWait // by pid<<32|tid: the stack a GIL tail is under
	kernels  map[kernelKey]frame
	stats    Stats
}

type lastWait struct {
	end   uint64
	stack []frame
}

type kernelKey struct {
	pid    uint32
	handle uint64
}

// New makes a Builder.
func New(cfg Config) *Builder {
	cfg = cfg.withDefaults()
	return &Builder{cfg: cfg, interval: uint64(cfg.Interval), lag: uint64(cfg.Lag), procs: map[uint32]*proc{},
		waits: map[uint64]lastWait{}, kernels: map[kernelKey]frame{}}
}

// Wait kinds the wait profile adds to correlate.WaitKind's.
const (
	kindGIL      = "gil"       // taking the GIL back after a wait
	kindCUDASync = "cuda_sync" // in a CUDA synchronisation
	kindCUDACopy = "cuda_copy" // in a CUDA copy
	sourceNone   = "none"      // gpu_time_source of launches no step's GPU time went to
)

// defaultPeriod is the on-CPU sampling period where a sample says none:
// 97 Hz, as perf and Grafana Alloy sample.
const defaultPeriod = int64(1e9) / 97

// Add takes an event; kinds the profiles do not use are ignored.
func (b *Builder) Add(e *events.Event) {
	switch e.Kind {
	case events.KindCPUSample:
		period := int64(e.Args[0])
		if period <= 0 {
			period = defaultPeriod
		}
		b.addInstant(TypeCPU, e.PID, e.TID, e.End, stackOf(e.Frames, e.Native), period, "")
	case events.KindLaunchStack:
		stack := stackOf(e.Frames, e.Native)
		if k, ok := b.kernel(e.PID, e.Args[0]); ok {
			stack = withLeaf(k, stack)
		}
		b.addInstant(TypeGPU, e.PID, e.TID, e.End, stack, int64(max(e.Args[1], 1)), "")
	case events.KindCallStack:
		stack := stackOf(e.Frames, e.Native)
		kind := kindCUDASync
		switch a := e.Desc(); a.Class {
		case cudaapi.ClassSync:
		case cudaapi.ClassCopy:
			// The direction says what the copy waited for: a D2H copy
			// (.item(), .cpu()) waits for the GPU's results.
			kind = kindCUDACopy
			if d := e.Dir(); d != cudaapi.DirUnknown {
				stack = withLeaf(frame{name: "[copy " + d.String() + "]"}, stack)
			}
		default:
			kind = "cuda_" + a.Class.String()
		}
		b.addSpan(e.PID, e.TID, e.Start, e.End, stack, kind)
	case events.KindPyWait:
		stack := stackOf(e.Frames, nil)
		b.waits[uint64(e.PID)<<32|uint64(e.TID)] = lastWait{e.End, stack}
		b.addSpan(e.PID, e.TID, e.Start, e.End, stack, correlate.ClassifyWait(e).String())
	case events.KindPyGIL:
		// The tail of the wait it follows, as the correlator joins them
		// (within events.GILFollowNS); after a write, no stack is known.
		stack := []frame{gilFrame}
		k := uint64(e.PID)<<32 | uint64(e.TID)
		if w, ok := b.waits[k]; ok && e.Start >= w.end && e.Start-w.end <= events.GILFollowNS {
			stack = withLeaf(gilFrame, w.stack)
			delete(b.waits, k)
		}
		b.addSpan(e.PID, e.TID, e.Start, e.End, stack, kindGIL)
	}
}

// kernel is the leaf frame naming pid's kernel of handle h, where known.
func (b *Builder) kernel(pid uint32, h uint64) (frame, bool) {
	k := kernelKey{pid, h}
	if f, ok := b.kernels[k]; ok {
		return f, true
	}
	if b.cfg.KernelName == nil {
		return frame{}, false
	}
	name, ok := b.cfg.KernelName(pid, h)
	if !ok || name == "" {
		return frame{}, false
	}
	f := kernelFrame(name)
	b.kernels[k] = f
	return f, true
}

func (b *Builder) proc(pid uint32) *proc {
	p := b.procs[pid]
	if p == nil {
		p = &proc{slots: map[int64]*slot{}}
		b.procs[pid] = p
	}
	return p
}

// windowIndex is the window holding instant t, on the wall clock.
func (b *Builder) windowIndex(t uint64) int64 {
	if !b.offsetOK {
		b.offset, b.offsetOK = b.cfg.Clock(t).UnixNano()-int64(t), true
	}
	w := int64(t) + b.offset
	i := w / int64(b.interval)
	if w < 0 && w%int64(b.interval) != 0 {
		i--
	}
	return i
}

// bounds are window i's start and end on the event clock (the first
// starts at 0 where the wall clock's interval began before the events').
func (b *Builder) bounds(i int64) (start, end uint64) {
	lo, hi := i*int64(b.interval)-b.offset, (i+1)*int64(b.interval)-b.offset
	return uint64(max(lo, 0)), uint64(max(hi, 0))
}

// window is p's window i of type typ, nil where it was sent already.
func (b *Builder) window(p *proc, i int64, typ Type) *window {
	sl := p.slots[i]
	if sl == nil {
		start, end := b.bounds(i)
		if end <= p.flushedTo {
			return nil
		}
		sl = &slot{start: start, end: end}
		p.slots[i] = sl
	}
	w := sl.by[typ.index()]
	if w == nil {
		w = newWindow(b)
		sl.by[typ.index()] = w
	}
	return w
}

func (b *Builder) addInstant(typ Type, pid, tid uint32, t uint64, stack []frame, value int64, kind string) {
	p := b.proc(pid)
	w := b.window(p, b.windowIndex(t), typ)
	if w == nil {
		b.stats.Late++
		return
	}
	if typ == TypeCPU && w.period == 0 {
		w.period = value
	}
	ps := pending{stack: w.intern(stack), tid: tid, start: t, end: t, value: value, kind: kind}
	if t <= p.lastEnd || !w.hold(ps) {
		p.place(w, &ps, typ, ^uint64(0))
	}
}

// addSpan adds blocked time from a to b, cut at the windows it crosses.
func (b *Builder) addSpan(pid, tid uint32, a, z uint64, stack []frame, kind string) {
	if z <= a {
		return
	}
	p := b.proc(pid)
	for i := b.windowIndex(a); ; i++ {
		w := b.window(p, i, TypeWait)
		start, end := b.bounds(i)
		lo, hi := max(a, start), min(z, end)
		switch {
		case w == nil:
			b.stats.Late++
			b.stats.LateNS += hi - lo
		default:
			ps := pending{stack: w.intern(stack), tid: tid, start: lo, end: hi, kind: kind}
			if !p.place(w, &ps, TypeWait, p.lastEnd) && !w.hold(ps) {
				p.place(w, &ps, TypeWait, ^uint64(0))
			}
		}
		if hi >= z {
			return
		}
	}
}

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
	pids := make([]uint32, 0, len(b.procs))
	for pid := range b.procs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		p := b.procs[pid]
		idx := make([]int64, 0, len(p.slots))
		for i := range p.slots {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		for _, i := range idx {
			sl := p.slots[i]
			if !final && p.lastEnd < sl.end && nowNS < sl.end+b.lag {
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
