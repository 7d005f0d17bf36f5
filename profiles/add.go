package profiles

import (
	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Wait kinds the wait profile adds to correlate.WaitKind's.
const (
	kindGIL      = "gil"       // taking the GIL back after a wait
	kindCUDASync = "cuda_sync" // in a CUDA synchronisation
	kindCUDACopy = "cuda_copy" // in a CUDA copy
)

// sourceNone is the gpu_time_source of launches no step's GPU time went to.
const sourceNone = "none"

// sourceEngine is the gpu_time_source of an inference engine thread's
// launches: counted, with no GPU time (no step of the engine's is timed).
const sourceEngine = "engine"

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
		b.takeSample(held{typ: TypeCPU, pid: e.PID, tid: e.TID, start: e.End, end: e.End,
			stack: stackOf(e.Frames, e.Native), value: period}, e.Args[events.StackInCallArg] != 0)
	case events.KindOffCPU:
		b.addOffCPU(e)
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
		b.probedWait(e.PID, e.TID, e.Start, e.End, kind)
		b.addSpan(e.PID, e.TID, e.Start, e.End, stack, kind)
	case events.KindPyWait:
		stack, kind := stackOf(e.Frames, nil), correlate.ClassifyWait(e).String()
		b.waits[threadKey(e.PID, e.TID)] = lastWait{e.End, stack}
		b.probedWait(e.PID, e.TID, e.Start, e.End, kind)
		b.addSpan(e.PID, e.TID, e.Start, e.End, stack, kind)
	case events.KindCall:
		if a := e.Desc(); a.Class == cudaapi.ClassSync || (a.Class == cudaapi.ClassCopy && e.Dir() == cudaapi.DirDtoH) {
			p := b.proc(e.PID)
			if p.engines == nil {
				p.engines = map[uint32]bool{}
			}
			p.engines[e.TID] = true // the step thread's own calls are told apart at its steps
		}
	case events.KindPyGIL:
		// The tail of the wait it follows, as the correlator joins them
		// (within events.GILFollowNS); after a write, no stack is known.
		stack := []frame{gilFrame}
		k := threadKey(e.PID, e.TID)
		if w, ok := b.waits[k]; ok && e.Start >= w.end && e.Start-w.end <= events.GILFollowNS {
			stack = withLeaf(gilFrame, w.stack)
			delete(b.waits, k)
		}
		b.probedWait(e.PID, e.TID, e.Start, e.End, kindGIL)
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
