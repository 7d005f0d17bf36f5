package profiles

import (
	"github.com/gpuprof/gpuprof/events"
)

// Wait kinds of the off-CPU samples: time off CPU no probe timed.
const (
	kindOffCPU    = "off_cpu"   // blocked in a system call no probe times (a read, a lock, a page's I/O)
	kindPreempted = "preempted" // runnable, waiting for a CPU, in a system call
)

// heldGrace is how long (event clock) a sample taken inside a probed call
// waits for that call's wait to come: a wait is reported at its return,
// after the samples inside it, and stacks and events come by different
// ring buffers.
const heldGrace = uint64(2e9)

// heldMax bounds the samples held at once; past it one is placed at once.
const heldMax = 1 << 14

// recentWaits is how many of a thread's latest probed waits are kept, for
// a sample that comes after the wait holding it.
const recentWaits = 8

// A probed wait (a Python wait, the GIL after it, a sync or copy) reports
// its own time, by its own stack and kind. Off CPU inside it is that time
// again: an off-CPU sample there is dropped. On CPU inside it (a sync
// spinning) is CPU time, kept, and labelled with the wait's kind, so that
// cpu{wait_kind=""} + wait adds up to the thread's time once.

// held is a CPU or off-CPU sample taken inside a probed call, waiting to
// see whether that call is reported as a wait.
type held struct {
	typ        Type
	pid, tid   uint32
	start, end uint64
	stack      []frame
	kind       string
	value      int64 // cpu: the period; wait: the ns a short stretch stands for (0: its own length)
}

type waitSpan struct {
	start, end uint64
	kind       string
}

// threadWaits are a thread's latest probed waits, in arrival order.
type threadWaits struct {
	spans [recentWaits]waitSpan
	n     int
}

func (tw *threadWaits) add(w waitSpan) {
	tw.spans[tw.n%recentWaits] = w
	tw.n++
}

// covering is the kind of the wait holding [a, b], ok false if none does
// (tw may be nil: a thread with no wait yet).
func (tw *threadWaits) covering(a, b uint64) (kind string, ok bool) {
	if tw == nil {
		return "", false
	}
	for i := range min(tw.n, recentWaits) {
		if w := tw.spans[i]; w.start <= a && b <= w.end {
			return w.kind, true
		}
	}
	return "", false
}

// addOffCPU takes an off-CPU sample: a stretch of d ns is read with chance
// d/period, so one shorter than the period stands for the period.
func (b *Builder) addOffCPU(e *events.Event) {
	kind, stack := kindOffCPU, stackOf(e.Frames, e.Native)
	switch {
	case e.Args[1]&events.OffCPUGIL != 0 && len(e.Frames) > 0:
		// take_gil's condition wait: the Python stack that let the GIL
		// go (a C call), as the GIL tails of the probed waits show.
		kind, stack = kindGIL, withLeaf(gilFrame, stackOf(e.Frames, nil))
	case e.Args[1]&events.OffCPURunnable != 0:
		kind = kindPreempted
	}
	h := held{typ: TypeWait, pid: e.PID, tid: e.TID, start: e.Start, end: e.End, stack: stack, kind: kind}
	if period := e.Args[0]; e.End-e.Start < period {
		h.value = int64(period)
	}
	b.takeSample(h, e.Args[events.StackInCallArg] != 0)
}

// takeSample places a sample, or holds it if it was taken inside a
// probed call whose wait may still come.
func (b *Builder) takeSample(h held, inCall bool) {
	if inCall {
		if kind, ok := b.recent[threadKey(h.pid, h.tid)].covering(h.start, h.end); ok {
			b.inWait(h, kind)
			return
		}
		if len(b.held) < heldMax {
			b.held = append(b.held, h)
			return
		}
	}
	b.placeHeld(h)
}

// inWait is what becomes of a sample inside a probed wait of that kind.
func (b *Builder) inWait(h held, kind string) {
	if h.typ == TypeWait {
		b.stats.OffCPUInWaits++
		return
	}
	b.stats.CPUInWaits++
	h.kind = kind
	b.placeHeld(h)
}

// probedWait notes a probed wait of a thread, settling the samples held
// inside it.
func (b *Builder) probedWait(pid, tid uint32, start, end uint64, kind string) {
	k := threadKey(pid, tid)
	tw := b.recent[k]
	if tw == nil {
		tw = &threadWaits{}
		b.recent[k] = tw
	}
	tw.add(waitSpan{start, end, kind})
	kept := b.held[:0]
	for _, h := range b.held {
		if h.pid == pid && h.tid == tid && start <= h.start && h.end <= end {
			b.inWait(h, kind)
			continue
		}
		kept = append(kept, h)
	}
	b.held = kept
}

// releaseHeld places the held samples no wait came for within heldGrace
// of nowNS (all of them where final).
func (b *Builder) releaseHeld(nowNS uint64, final bool) {
	kept := b.held[:0]
	for _, h := range b.held {
		if final || h.end+heldGrace <= nowNS {
			b.placeHeld(h)
			continue
		}
		kept = append(kept, h)
	}
	b.held = kept
}

// heldFrom is the earliest start of pid's held samples, ok false if none.
func (b *Builder) heldFrom(pid uint32) (uint64, bool) {
	from, ok := uint64(0), false
	for _, h := range b.held {
		if h.pid == pid && (!ok || h.start < from) {
			from, ok = h.start, true
		}
	}
	return from, ok
}

func (b *Builder) placeHeld(h held) {
	switch {
	case h.typ == TypeCPU:
		b.addInstant(TypeCPU, h.pid, h.tid, h.end, h.stack, h.value, h.kind)
	case h.value > 0:
		// Short: an instant at its middle, standing for the period.
		b.addInstant(TypeWait, h.pid, h.tid, h.start+(h.end-h.start)/2, h.stack, h.value, h.kind)
	default:
		b.addSpan(h.pid, h.tid, h.start, h.end, h.stack, h.kind)
	}
}

func threadKey(pid, tid uint32) uint64 { return uint64(pid)<<32 | uint64(tid) }
