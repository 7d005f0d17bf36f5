package correlate

import (
	"cmp"
	"slices"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// measure turns the current step's calls into a Step.
func (b *builder) measure() Step {
	s := Step{Index: b.index, PID: b.boundary.PID, TID: b.boundary.TID, StartNS: b.prevEnd, EndNS: b.pendingEnd,
		OtherLaunches: b.others, LaunchesCounted: b.complete && !b.byCalls, WaitKindsCounted: b.waitsObserved && b.waitsComplete}
	s.WallTime = seconds(s.EndNS - s.StartNS)
	var readings, waits, takes []item
	var writes [][2]uint64                   // start, and end once the GIL is back
	var data, dataWaits, calls, syncs []span // calls: the thread's calls, gets that were no wait included
	var toks []phaseToken
	var launchStarts, probeStarts, launchEnds, probeEnds []uint64
	var firstLaunch, lastSyncAfter, firstCall, computeStart uint64
	graphKnown := 0 // graph launches whose kernels are known
	for i := range b.cur {
		it := &b.cur[i]
		e := &it.ev
		if e.Kind == events.KindWrite {
			writes = append(writes, [2]uint64{e.Start, e.End})
			continue
		}
		if isDataEvent(it) {
			data = append(data, span{e.Start, e.End})
			if it.isWait {
				dataWaits = append(dataWaits, span{e.Start, e.End})
			}
		}
		if isPhaseToken(it) {
			toks = append(toks, phaseToken{k: keyOf(e.Desc(), e), start: e.Start, end: e.End})
		}
		if it.isWait {
			waits = append(waits, *it)
			continue
		}
		calls = append(calls, span{e.Start, e.End})
		switch it.role {
		case events.RoleData, events.RoleFetch:
			s.FetchTime += seconds(e.Duration())
			s.FetchCalls++
			continue
		case events.RoleCompute:
			s.ComputeCallTime += seconds(e.Duration())
			if computeStart == 0 {
				computeStart = e.Start
			}
			probeStarts, probeEnds = append(probeStarts, e.Start), append(probeEnds, e.End)
			continue
		case events.RoleGet: // a get that is no wait (correlator.Add)
			takes = append(takes, *it)
			continue
		case events.RoleInfer, events.RoleStep:
			continue
		}
		if firstCall == 0 {
			firstCall = e.Start
		}
		a := e.Desc()
		s.Launches += int(e.Launches - it.captured)
		s.CapturedLaunches += int(it.captured)
		s.GraphLaunches += int(e.GraphLaunches)
		s.GraphKernels += int(it.graphKernels)
		graphKnown += int(it.graphKnown)
		if e.Launches+e.GraphLaunches > 0 {
			launchStarts, launchEnds = append(launchStarts, e.LaunchFirst), append(launchEnds, e.LaunchLast)
			if firstLaunch == 0 || e.LaunchFirst < firstLaunch {
				firstLaunch = e.LaunchFirst
			}
		}
		switch a.Class {
		case cudaapi.ClassSync:
			s.Syncs++
			s.SyncTime += seconds(e.Duration())
			syncs = append(syncs, span{e.Start, e.End})
			if firstLaunch != 0 && e.Start >= firstLaunch {
				lastSyncAfter = e.End
			}
		case cudaapi.ClassCopy:
			s.Copies++
			s.CopyTime += seconds(e.Duration())
			addCopy(&s, e.Dir(), e.Bytes())
		case cudaapi.ClassAlloc:
			if e.OK() {
				s.AllocBytes += e.Bytes()
			}
		case cudaapi.ClassFree:
			s.FreeBytes += it.freed
		case cudaapi.ClassElapsed:
			if e.OK() && !(b.freshReading && b.othersReading(it, b.prevEnd)) {
				readings = append(readings, *it)
			}
		}
	}
	s.GraphKernelsKnown = s.LaunchesCounted && graphKnown == s.GraphLaunches
	b.measurePool(&s, b.poolRead())
	s.Readings = len(readings)
	switch {
	case len(readings) > 0:
		s.ComputeTime, _ = outermost(readings)
		s.ComputeSource = ComputeEvents
	case computeStart != 0:
		s.ComputeTime, s.ComputeSource = s.ComputeCallTime, ComputeProbe
	case lastSyncAfter != 0:
		s.ComputeTime, s.ComputeSource = seconds(lastSyncAfter-firstLaunch), ComputeDerived
	}
	b.infer.measure(&s)
	if firstLaunch != 0 && (firstCall == 0 || firstLaunch < firstCall) {
		firstCall = firstLaunch
	}
	begin, dispatch := b.measureWaits(&s, waits, takes, calls, writes, firstCall)
	var marks, markEnds []uint64 // the readings' start and end events' records
	for _, r := range readings {
		if r.mark > begin {
			marks = append(marks, r.mark)
		}
		if r.span[1] != 0 {
			markEnds = append(markEnds, r.span[1])
		}
	}
	slices.SortFunc(data, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	var phases []span
	switch {
	case len(marks) > 0:
		phases, s.DataSource = dataPhases(begin, s.EndNS, sortedStarts(marks), markEnds, data), DataEvents
	case len(probeStarts) > 0:
		phases, s.DataSource = dataPhases(begin, s.EndNS, sortedStarts(probeStarts), probeEnds, data), DataProbe
	case s.LaunchesCounted:
		phases, s.DataSource = dataPhases(begin, s.EndNS, sortedStarts(launchStarts), launchEnds, data), DataLaunches
		endAtLastCall(phases, toks, data)
		if sh, ok := learnShape(toks, phases, begin, dataWaits); ok {
			b.shape = sh
		}
	default:
		var ok bool
		if phases, ok = b.shape.apply(toks, begin, s.EndNS, dataWaits); ok {
			s.DataSource = DataCalibrated
		}
	}
	if len(phases) == 0 {
		s.DataSource = DataNone
	} else {
		s.DataTime, s.DataMeasured = seconds(phaseTime(phases, dispatch)), true
	}
	if s.ComputeSource == ComputeNone && s.DataSource == DataCalibrated {
		// The GPU work begins where the data phases end: derived as with
		// counted launches, to the last sync after it.
		from := phases[len(phases)-1].end
		for _, t := range toks {
			if t.k.class == cudaapi.ClassSync && t.start >= from {
				s.ComputeTime, s.ComputeSource = seconds(t.end-from), ComputeDerived
			}
		}
	}
	// Launches by other threads (autograd's backward) are the step's
	// compute too: the step thread waits for them.
	computing := s.ComputeSource != ComputeNone || s.Launches+s.GraphLaunches+s.OtherLaunches > 0
	s.Phases = timeline(s.StartNS, s.EndNS, begin, dispatch, phases, syncs, computing)
	batch := b.batch
	switch {
	case batch > 0:
	case s.SamplesMeasured:
		batch, b.lastSamples = s.Samples, s.Samples
	case !b.waitsComplete:
		// Items are counted only while the waits are probed: a step
		// between takes what the latest counted one did.
		batch = b.lastSamples
	}
	if batch > 0 && s.StepTime > 0 {
		s.TrainCapacity = float64(batch) / s.StepTime
		s.Thru = float64(batch) / s.WallTime
	}
	return s
}

// poolRead is the pool's length and state counter as BPF read them.
type poolRead struct {
	n     int
	state uint32 // + 1; 0: no counter
	gets  uint32 // items taken so far + 1; 0: not counted
	ok    bool
}

// poolRead is the current step's pool reading: at the loop's logging
// write after the boundary (the pool as its log shows it), else as the
// step's last call returned.
func (b *builder) poolRead() poolRead {
	for _, it := range b.limbo {
		if e := &it.ev; e.Kind == events.KindWrite && e.Pool != 0 {
			return poolRead{n: int(e.Pool - 1), state: e.PoolState, gets: e.PoolGets, ok: true}
		}
	}
	for i := len(b.cur) - 1; i >= 0; i-- {
		if e := &b.cur[i].ev; e.Kind == events.KindCall && e.Pool != 0 {
			return poolRead{n: int(e.Pool - 1), state: e.PoolState, gets: e.PoolGets, ok: true}
		}
	}
	return poolRead{}
}

// measurePool sets the step's pool, and the samples taken from it since
// the previous step's reading: a deque counts its appends and poplefts
// (state), so gets = (Δstate - Δlength) / 2 whatever the engines put
// meanwhile; a multiprocessing queue's gets are counted as such (gets;
// the count starts afresh when the pool's word is set again, so a count
// that went down says nothing).
func (b *builder) measurePool(s *Step, r poolRead) {
	prev := b.prevPool
	b.prevPool = r
	if !r.ok {
		return
	}
	s.Pool, s.PoolMeasured = r.n, true
	if !prev.ok {
		return
	}
	if r.gets != 0 && prev.gets != 0 {
		// Counted at the interpreter's reads, which go with the launch
		// probes where the waits do.
		if r.gets >= prev.gets && b.waitsComplete {
			s.Samples, s.SamplesMeasured = int(r.gets-prev.gets), true
		}
		return
	}
	if r.state == 0 || prev.state == 0 {
		return
	}
	if twice := int(r.state-prev.state) - (r.n - prev.n); twice >= 0 && twice%2 == 0 {
		s.Samples, s.SamplesMeasured = twice/2, true
	}
}

// measureWaits adds the step thread's Python waits, clipped to the step:
// waiting for work to arrive is dispatch wait, taken out of step time.
// What the thread does between the previous boundary and its first act of
// this step is the loop's bookkeeping, neither waiting nor working on this
// step (LeadIn): the step begins after the last write (the loop logging
// the step it finished, until it had the GIL back) before its first call
// or wait, and at its first wait if that is a dispatch wait. It returns
// that beginning, where the data phases start (phases.go), and the dispatch
// waits, which they leave out.
func (b *builder) measureWaits(s *Step, waits, takes []item, calls []span, writes [][2]uint64, firstCall uint64) (begin uint64, dispatch []span) {
	s.WaitsObserved = b.waitsObserved
	slices.SortStableFunc(waits, func(a, b item) int { return cmp.Compare(a.ev.Start, b.ev.Start) })
	begin = s.StartNS
	firstAct := firstCall
	if len(waits) > 0 && (firstAct == 0 || waits[0].ev.Start < firstAct) {
		firstAct = waits[0].ev.Start
	}
	fromWrite := false // the lead-in ends at a write
	for _, w := range writes {
		if w[0] > begin && (firstAct == 0 || w[0] <= firstAct) {
			begin, fromWrite = w[1], true
			if firstAct != 0 {
				begin = min(begin, firstAct)
			}
		}
	}
	if len(waits) > 0 && waits[0].wait == WaitDispatch && waits[0].ev.Start > begin &&
		(firstCall == 0 || waits[0].ev.Start <= firstCall) {
		begin, fromWrite = waits[0].ev.Start, false
	}
	s.LeadIn = seconds(begin - s.StartNS)
	if s.WaitsObserved && b.waitsComplete {
		b.needs.note(waits, takes, fromWrite && begin != s.StartNS)
	}
	var covered, polling uint64 // polling: the end of the last sleep for samples, nothing else since
	longest := map[string]uint64{}
	// A wait inside another (a semaphore wait inside a timed queue get,
	// --probe dispatch=py:queue:Queue.get) is part of the outer one:
	// counted once, as the outer one's kind (waits are in start order).
	for _, w := range waits {
		lo, hi := max(w.ev.Start, s.StartNS, covered), min(w.ev.End, s.EndNS)
		if hi <= lo {
			continue
		}
		covered = hi
		d := hi - lo
		s.GILWait += seconds(min(w.gil, d))
		sleep := w.wait == WaitDispatch && isSleep(&w.ev)
		switch w.wait {
		case WaitDispatch:
			if sleep && polling != 0 && lo > polling && lo-polling <= pollGap && !anyIn(calls, polling, lo) {
				// The loop checking its pool between two sleeps is
				// waiting all the same.
				d += lo - polling
				lo = polling
			}
			s.DispatchWait += seconds(d)
			dispatch = append(dispatch, span{lo, hi})
		case WaitData:
			s.DataWait += seconds(d)
		case WaitLock:
			s.LockWait += seconds(d)
		case WaitIO:
			s.IOWait += seconds(d)
		case WaitFull:
			s.FullWait += seconds(d)
		}
		longest[w.what] += d
		polling = 0
		if sleep {
			polling = hi
		}
	}
	s.WaitedOn, _ = largest(longest)
	s.StepTime = s.WallTime - s.DispatchWait - s.LeadIn
	return begin, dispatch
}

// pollGap bounds the time between two sleeps for samples that counts as
// waiting too: a loop polling its pool's qsize() in a sleep loop
// (AngelSpec's controller; it logs the whole loop as its wait).
const pollGap = 1e6

// anyIn says whether a call ran between a and b.
func anyIn(calls []span, a, b uint64) bool {
	for _, c := range calls {
		if c.start < b && c.end > a {
			return true
		}
	}
	return false
}

// outermost sums the readings that no other reading of the step contains,
// so that a loop timing forward, backward and the whole step counts the
// whole step once, and one timing forward and backward apart counts both.
// Readings whose events' record times are unknown count on their own. It
// also returns when the earliest counted reading's start event was recorded.
func outermost(rs []item) (float64, uint64) {
	slices.SortStableFunc(rs, func(a, b item) int {
		la, lb := a.span[1]-a.span[0], b.span[1]-b.span[0]
		switch {
		case la > lb:
			return -1
		case la < lb:
			return 1
		}
		return 0
	})
	total, mark := 0.0, uint64(0)
	for i, r := range rs {
		known := r.span[0] != 0 && r.span[1] != 0 && r.span[1] >= r.span[0]
		inside := false
		for j := 0; j < i && known; j++ {
			o := rs[j].span
			if o[0] != 0 && o[1] >= o[0] && o[0] <= r.span[0] && r.span[1] <= o[1] {
				inside = true
				break
			}
		}
		if !inside {
			total += r.ev.ElapsedMS() / 1e3
			if r.mark != 0 && (mark == 0 || r.mark < mark) {
				mark = r.mark
			}
		}
	}
	return total, mark
}

func seconds(ns uint64) float64 { return float64(ns) / 1e9 }

// inferStats gathers a step's inference figures, on any thread: the calls
// of the infer role (--probe infer=...), else the engines' iterations.
type inferStats struct {
	calls   int
	total   uint64
	threads map[uint32]bool
	iters   int
	busy    float64 // seconds of the iterations, less full-pool waits
}

func (is *inferStats) add(e *events.Event) {
	if is.threads == nil {
		is.threads = map[uint32]bool{}
	}
	is.calls++
	is.total += e.Duration()
	is.threads[e.TID] = true
}

func (is *inferStats) merge(o inferStats) {
	is.calls += o.calls
	is.total += o.total
	is.iters += o.iters
	is.busy += o.busy
	for tid := range o.threads {
		if is.threads == nil {
			is.threads = map[uint32]bool{}
		}
		is.threads[tid] = true
	}
}

// addIteration counts an engine iteration that ended at end into the step
// in which it ended.
func (b *builder) addIteration(end uint64, busy float64) {
	is := &b.infer
	if b.pending && end > b.pendingEnd {
		is = &b.inferNext
	}
	is.iters++
	is.busy += busy
}

// measure sets the step's inference figures: the mean generate call (or
// engine iteration), and the calls a second the engines seen could make
// back to back. For iterations the correlator counts the engines.
func (is *inferStats) measure(s *Step) {
	switch {
	case is.calls > 0:
		s.InferCalls = is.calls
		s.InferBatchTime = seconds(is.total) / float64(is.calls)
		s.InferEngines = len(is.threads)
		s.InferCapacity = float64(len(is.threads)) / s.InferBatchTime
	case is.iters > 0:
		s.InferIterations = is.iters
		s.InferBatchTime = is.busy / float64(is.iters)
	}
}
