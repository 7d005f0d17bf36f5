package perfetto

import (
	"math"
	"strconv"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Event takes every event, in the order the loop sees them. What held a
// thread becomes a slice on it: Python waits and GIL waits, CUDA syncs and
// copies, the --probe functions; GPU samples become counters, and a
// process event names the process by its rank. Everything else (other CUDA
// calls, too many to draw; stack samples, for the profiles) is left out.
func (w *Writer) Event(e *events.Event) {
	if e.Kind == events.KindProcess {
		// Before stopped(): the closing names still say who it is.
		if e.Args[0] > 0 {
			p := w.proc(e.PID)
			p.rank, p.ranked = int(e.Args[0]-1), true
		}
		return
	}
	if w.stopped() {
		return
	}
	if e.Kind == events.KindGPUSamples {
		w.gpuSamples(e)
		return
	}
	w.seeSpan(e.Start, e.End)
	switch e.Kind {
	case events.KindPyWait:
		w.pyWait(e)
	case events.KindPyGIL:
		if t := w.threadSlice(e.PID, e.TID, e.Start, e.End); t != nil {
			w.ev.strField("name", "GIL")
			w.endSlice(t, e.Start, e.End)
		}
	case events.KindCall:
		if e.API >= cudaapi.UserBase {
			w.userCall(e)
			return
		}
		w.cudaCall(e)
	}
}

// threadSlice places a slice of thread tid and begins it in w.ev (its
// name and args to follow, then endSlice), or says why not: nil.
func (w *Writer) threadSlice(pid, tid uint32, s, e uint64) *track {
	if e < s || s < w.origin {
		w.stats.Dropped++
		return nil
	}
	th := w.thread(w.proc(pid), tid)
	t := th.lanes.place(s, e, false, w.newTID)
	if t == nil {
		w.stats.Dropped++
		return nil
	}
	w.ev.reset()
	w.beginSlice(pid, t.tid, s, e)
	return t
}

func (w *Writer) beginSlice(pid, tid uint32, s, e uint64) {
	w.ev.begin('X')
	w.ev.uintField("pid", uint64(pid))
	w.ev.uintField("tid", uint64(tid))
	w.ev.usField("ts", s-w.origin)
	w.ev.usField("dur", e-s)
}

// endSlice closes the slice begun by threadSlice and writes it.
func (w *Writer) endSlice(t *track, s, e uint64) {
	w.ev.end()
	if !w.emit(e) {
		return
	}
	t.add(s, e)
	w.stats.Slices++
	if t.tid >= synthBase {
		w.stats.Overlaps++
	}
}

// userCall: a --probe function's call, "ROLE: name".
func (w *Writer) userCall(e *events.Event) {
	t := w.threadSlice(e.PID, e.TID, e.Start, e.End)
	if t == nil {
		return
	}
	if name, ok := w.userNames[e.API]; ok {
		w.ev.strField("name", name)
	} else {
		b := append(w.ev.b, `,"name":"probe `...)
		b = strconv.AppendUint(b, uint64(e.API-cudaapi.UserBase), 10)
		w.ev.b = append(b, '"')
	}
	w.endSlice(t, e.Start, e.End)
}

// cudaCall: the calls that hold their thread, syncs and copies, by the
// entry point's name; launches, records and the rest are left out.
func (w *Writer) cudaCall(e *events.Event) {
	a, ok := cudaapi.ByID(e.API)
	if !ok || a.Class != cudaapi.ClassSync && a.Class != cudaapi.ClassCopy {
		return
	}
	t := w.threadSlice(e.PID, e.TID, e.Start, e.End)
	if t == nil {
		return
	}
	w.ev.strField("name", a.Name)
	w.ev.args()
	if a.Class == cudaapi.ClassCopy {
		w.ev.uintArg("bytes", cudaapi.Arg(e.Args, a.BytesArg))
		w.ev.strArg("dir", a.CopyDir(e.Args).String())
	} else {
		w.ev.strArg("sync", a.Sync.String())
	}
	if !e.OK() {
		w.ev.uintArg("ret", uint64(uint32(e.Ret)))
	}
	w.ev.endArgs()
	w.endSlice(t, e.Start, e.End)
}

// gpuSamples: a round of NVML samples as counters of the "GPUs (NVML)"
// process, each at its own sample's time, a track a GPU and quantity.
func (w *Writer) gpuSamples(e *events.Event) {
	first := e.End
	for _, s := range e.GPUs {
		if s.TimeNS != 0 && s.TimeNS < first {
			first = s.TimeNS
		}
	}
	w.seeSpan(first, e.End)
	w.ev.reset()
	n := 0
	for i := range e.GPUs {
		s := &e.GPUs[i]
		t := s.TimeNS
		if t == 0 {
			t = e.End
		}
		if t < w.origin {
			continue
		}
		n += w.gpuCounter(s.GPU, t, " util", "%", s.GPUUtil, -1)
		n += w.gpuCounter(s.GPU, t, " power", "W", s.PowerW, -1)
		n += w.gpuCounter(s.GPU, t, " SM active", "%", s.SMActive*100, 2)
		n += w.gpuCounter(s.GPU, t, " memory", "GiB", s.MemUsed/(1<<30), 3)
		n += w.gpuCounter(s.GPU, t, " SM clock", "MHz", s.SMClockMHz, -1)
	}
	if w.emit(e.End) {
		w.stats.Counters += n
		w.gpus = w.gpus || n > 0
	}
}

// gpuCounter adds counter "GPU g<what>" of v to w.ev, where v was read.
// Perfetto names a counter track by the event's name and its arg's key:
// "GPU 0 util %".
func (w *Writer) gpuCounter(gpu int, t uint64, what, unit string, v float64, prec int) int {
	if !finite(v) {
		return 0
	}
	e := &w.ev
	e.begin('C')
	b := append(e.b, `,"name":"GPU `...)
	b = strconv.AppendInt(b, int64(gpu), 10)
	b = append(b, what...)
	e.b = append(b, '"')
	e.uintField("pid", gpuPID)
	e.uintField("tid", gpuPID)
	e.usField("ts", t-w.origin)
	e.args()
	e.floatArg(unit, v, prec)
	e.endArgs()
	e.end()
	return 1
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
