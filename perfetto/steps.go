package perfetto

import (
	"strconv"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// Step takes each step the loop cuts (control.Output): a slice "step N"
// on its process's steps track, from its start to its end, with its
// measures as args, and inside it a slice for each span of its timeline
// (dispatch_wait, data, sync, compute, other), which cover it end to end;
// and at its end the process's counters: step time, and the pool and the
// launches where they were measured.
func (w *Writer) Step(st correlate.Step) {
	p := w.proc(st.PID)
	if st.Rank != nil {
		p.rank, p.ranked = *st.Rank, true
	}
	p.noteStepThread(st.TID)
	if w.stopped() {
		return
	}
	w.seeSpan(st.StartNS, st.EndNS)
	if st.EndNS < st.StartNS || st.StartNS < w.origin {
		w.stats.Dropped++
		return
	}
	// Steps are apart from each other, not nested: two steps' phases
	// could not both nest on one track.
	t := p.steps.place(st.StartNS, st.EndNS, true, w.newTID)
	if t == nil {
		w.stats.Dropped++
		return
	}
	w.ev.reset()
	w.stepSlice(st, t.tid)
	phases := 0
	at := st.StartNS
	for _, ph := range st.Phases {
		// Sorted, apart and inside the step by construction
		// (correlate's timeline); held to it all the same, as a span
		// that was not would break the track.
		if ph.StartNS < at || ph.EndNS < ph.StartNS || ph.EndNS > st.EndNS {
			continue
		}
		at = ph.EndNS
		w.beginSlice(st.PID, t.tid, ph.StartNS, ph.EndNS)
		w.ev.strField("name", string(ph.Phase))
		w.ev.end()
		phases++
	}
	counters := w.stepCounters(st)
	if !w.emit(st.EndNS) {
		return
	}
	t.add(st.StartNS, st.EndNS)
	if t != p.steps[0] {
		w.stats.Overlaps++
	}
	p.counters = p.counters || counters > 0
	w.stats.Steps++
	w.stats.Slices += 1 + phases
	w.stats.Counters += counters
}

// stepSlice adds the step's own slice to w.ev, its measures as args:
// times in milliseconds (the keys say so), those not measured left out.
func (w *Writer) stepSlice(st correlate.Step, tid uint32) {
	e := &w.ev
	w.beginSlice(st.PID, tid, st.StartNS, st.EndNS)
	b := append(e.b, `,"name":"step `...)
	b = appendInt(b, st.Index)
	e.b = append(b, '"')
	e.args()
	e.uintArg("thread", uint64(st.TID))
	if st.Rank != nil {
		e.intArg("rank", *st.Rank)
	}
	e.msArg("wall_time_ms", st.WallTime)
	e.msArg("step_time_ms", st.StepTime)
	if st.WaitsObserved || st.DispatchWait > 0 {
		e.msArg("dispatch_wait_ms", st.DispatchWait)
	}
	for _, m := range []struct {
		key string
		v   float64
	}{{"data_wait_ms", st.DataWait}, {"lock_wait_ms", st.LockWait}, {"io_wait_ms", st.IOWait},
		{"full_wait_ms", st.FullWait}, {"gil_wait_ms", st.GILWait}, {"lead_in_ms", st.LeadIn},
		{"fetch_time_ms", st.FetchTime}, {"compute_call_time_ms", st.ComputeCallTime},
		{"copy_time_ms", st.CopyTime}} {
		if m.v > 0 {
			e.msArg(m.key, m.v)
		}
	}
	if st.WaitedOn != "" {
		e.strArg("waited_on", st.WaitedOn)
	}
	if st.DataMeasured || st.DataTime > 0 {
		e.msArg("data_time_ms", st.DataTime)
		if st.DataSource != "" {
			e.strArg("data_source", string(st.DataSource))
		}
	}
	if st.ComputeSource != correlate.ComputeNone {
		e.msArg("compute_time_ms", st.ComputeTime)
		e.strArg("compute_source", string(st.ComputeSource))
	}
	if st.Readings > 0 {
		e.intArg("elapsed_readings", st.Readings)
	}
	e.msArg("sync_time_ms", st.SyncTime)
	e.intArg("syncs", st.Syncs)
	if st.LaunchesCounted {
		e.intArg("launches", st.Launches)
		e.intArg("graph_launches", st.GraphLaunches)
		e.intArg("other_launches", st.OtherLaunches)
		if st.CapturedLaunches > 0 {
			e.intArg("captured_launches", st.CapturedLaunches)
		}
	}
	if st.GraphKernelsKnown && st.GraphLaunches > 0 {
		e.intArg("graph_kernels", st.GraphKernels) // as --jsonl gives it
	}
	for _, m := range []struct {
		key string
		v   int
	}{{"fetch_calls", st.FetchCalls}, {"infer_calls", st.InferCalls}, {"infer_iterations", st.InferIterations},
		{"copies", st.Copies}} {
		if m.v > 0 {
			e.intArg(m.key, m.v)
		}
	}
	for _, m := range []struct {
		key string
		v   uint64
	}{{"h2d_bytes", st.H2DBytes}, {"d2h_bytes", st.D2HBytes}, {"d2d_bytes", st.D2DBytes},
		{"other_copy_bytes", st.OtherCopyBytes}, {"alloc_bytes", st.AllocBytes}, {"free_bytes", st.FreeBytes}} {
		if m.v > 0 {
			e.uintArg(m.key, m.v)
		}
	}
	if st.PoolMeasured {
		e.intArg("pool", st.Pool)
		if st.PoolKind != "" {
			e.strArg("pool_kind", st.PoolKind)
		}
	}
	if st.SamplesMeasured {
		e.intArg("samples", st.Samples)
	}
	if finite(st.TrainCapacity) && st.TrainCapacity > 0 {
		e.floatArg("train_capacity_per_s", st.TrainCapacity, 3)
	}
	if finite(st.Thru) && st.Thru > 0 {
		e.floatArg("thru_per_s", st.Thru, 3)
	}
	if g := st.GPU; g != nil {
		e.intArg("gpu_samples", g.Samples)
		for _, m := range []struct {
			key string
			v   float64
		}{{"gpu_util_pct", g.Util}, {"sm_active_pct", g.SMActive * 100}, {"sm_occupancy_pct", g.SMOccupancy * 100},
			{"tensor_active_pct", g.TensorActive * 100}, {"dram_active_pct", g.DRAMActive * 100},
			{"gpu_power_w", g.PowerW}, {"sm_clock_mhz", g.SMClockMHz}, {"gpu_temp_c", g.TempC},
			{"proc_sm_util_pct", g.ProcSMUtil}} {
			if events.Has(m.v) && finite(m.v) {
				e.floatArg(m.key, m.v, 2)
			}
		}
		if events.Has(g.ProcMemUsed) && finite(g.ProcMemUsed) {
			e.floatArg("proc_mem_used_gib", g.ProcMemUsed/(1<<30), 3)
		}
		if g.Throttle != 0 {
			e.uintArg("throttle_reasons", g.Throttle)
		}
	}
	e.endArgs()
	e.end()
}

// stepCounters adds the process's counters at the step's end to w.ev:
// "step_time ms", and "pool items" and "launches per step" where measured.
func (w *Writer) stepCounters(st correlate.Step) int {
	n := w.counter(st.PID, st.EndNS, "step_time", "ms", st.StepTime*1e3, 6)
	if st.PoolMeasured {
		n += w.counter(st.PID, st.EndNS, "pool", "items", float64(st.Pool), 0)
	}
	if st.LaunchesCounted {
		n += w.counter(st.PID, st.EndNS, "launches", "per step", float64(st.Launches+st.GraphLaunches), 0)
	}
	return n
}

// counter adds one counter value, on process pid; Perfetto names its
// track "name unit".
func (w *Writer) counter(pid uint32, t uint64, name, unit string, v float64, prec int) int {
	if !finite(v) {
		return 0
	}
	e := &w.ev
	e.begin('C')
	e.strField("name", name)
	e.uintField("pid", uint64(pid))
	e.uintField("tid", uint64(pid))
	e.usField("ts", t-w.origin)
	e.args()
	e.floatArg(unit, v, prec)
	e.endArgs()
	e.end()
	return 1
}

// Note takes a finding of the loop's (control.Output): a global instant
// with the note, at the latest time seen (the event that made it).
func (w *Writer) Note(msg string) {
	if w.stopped() {
		return
	}
	if !w.started {
		if len(w.notes) < 64 {
			w.notes = append(w.notes, msg)
		}
		return
	}
	w.ev.reset()
	e := &w.ev
	e.begin('i')
	e.strField("s", "g")
	e.strField("name", msg)
	e.uintField("pid", 0)
	e.uintField("tid", 0)
	e.usField("ts", w.last-w.origin)
	e.end()
	w.emit(w.last)
}

// Processes is control.Output's count of processes: the file names each
// process as its events come, so it needs nothing of it.
func (w *Writer) Processes(int) {}

func appendInt(b []byte, v int) []byte { return strconv.AppendInt(b, int64(v), 10) }
