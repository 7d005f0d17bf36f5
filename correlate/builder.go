package correlate

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// builder cuts the anchor thread's calls into steps. A step ends at the
// return of the last boundary call of a cluster; calls that follow a
// boundary call with no launch in between wait in limbo: if another
// boundary call comes before any launch they join the cluster (and this
// step), otherwise they open the next step.
type builder struct {
	anchor     Anchor
	byCalls    bool // the anchor thread has no launch counts
	started    bool // a first boundary was seen; steps before it are partial
	index      int
	prevEnd    uint64
	pending    bool
	pendingEnd uint64
	cur, limbo []item
	others     int // launches by other threads of the process in this step
	infer      inferStats
	inferNext  inferStats // infer calls that returned past a pending boundary
	batch      int        // samples a step, if known
	prevPool   poolRead   // the previous step's pool reading

	waitsObserved bool // Python waits are probed in this process

	// Launch counting is sampled (KindLaunchProbes markers): counted is
	// whether it is on now, complete whether it was on all through the
	// current step.
	counted, complete bool
	// The Python wait probes may go with the launch probes (a marker's
	// Args[0] 1): waitsOn whether they are attached now, waitsComplete
	// whether they were all through the current step.
	waitsOn, waitsComplete bool
	needs                  waitNeeds
	// lastSamples: the items the latest step that counted them took.
	lastSamples int
	// shape: where the data phases ended in the latest step whose
	// launches were counted, for the steps whose were not (phases.go).
	shape phaseShape

	// A data event after a pending boundary (a get, a DataLoader wait, a
	// copy in) means the next step's fetch has begun: a boundary call
	// after it ends no cluster of this step (limboData). The step closes
	// there, and a boundary call is none until work comes (needWork): a
	// loop syncing after its copy in and after its optimizer ends its
	// steps at the second sync, so that a step begins with its fetch.
	limboData, needWork bool
	// armed: a cut boundary's step has begun its compute since its fetch
	// (cuts.go arms).
	armed bool

	// freshReading: the last elapsed-time reading that ended a step timed
	// that step (its events were recorded after the step began). While
	// they do, a reading of an earlier step's events is passed over
	// (staleSkipped, at skippedAt).
	freshReading, staleSkipped bool
	skippedAt                  uint64
	workSinceSkip              uint32
}

// staleReading says whether an elapsed-time reading times events recorded
// before stepStart: an earlier step's. DistributedDataParallel times
// forward and backward on some iterations and reads them at the next
// forward; while the loop's own readings time the step they end, such a
// reading is neither a boundary nor the step's compute. A loop that reads
// its previous step's timing on purpose (to spare a sync) reads late
// every step: then each of its readings is the boundary.
func staleReading(it *item, stepStart uint64) bool {
	return it.span[1] != 0 && it.span[1] <= stepStart
}

// othersReading says whether a reading, in a step that began at
// stepStart, is not the loop's own: stale, or, where the loop's readings
// time events whose records are seen (freshReading), one whose records
// were not seen. Those are a library's, recorded where gpuprof leaves the
// records unprobed once the loop's are known (probes/recordsites.go):
// DistributedDataParallel's sampled timings, recorded among its
// collectives' records.
func (b *builder) othersReading(it *item, stepStart uint64) bool {
	return staleReading(it, stepStart) || b.freshReading && it.span[1] == 0
}

// elapsedBoundary says whether an elapsed-time reading of the boundary's
// kind ends a step (see freshReading), given the step it is in.
func (b *builder) elapsedBoundary(it *item, stepStart uint64) bool {
	if b.staleSkipped {
		// The reading after one passed over: the loop's own if it times
		// work since; one more of the same batch if no work came between;
		// else the loop reads its timings late, and this one ends a step.
		switch {
		case it.span[1] != 0 && !staleReading(it, b.skippedAt):
			b.staleSkipped, b.freshReading = false, it.span[1] != 0
			return true
		case b.workSinceSkip == 0:
			return false
		}
		b.staleSkipped, b.freshReading = false, false
		return true
	}
	switch stale := b.othersReading(it, stepStart); {
	case stale && b.freshReading:
		b.staleSkipped, b.skippedAt, b.workSinceSkip = true, it.ev.End, 0
		return false
	case stale:
		b.freshReading = false
	case it.span[1] != 0:
		b.freshReading = true
	}
	return true
}

func newBuilder(a Anchor, counted, waitsGated bool, batch int) *builder {
	// The first boundary must follow work, as each cluster end learned
	// did: a loop's sync after its copy in is no step's end.
	b := &builder{anchor: a, byCalls: a.byCalls, batch: batch, needWork: true}
	b.launchProbes(counted, waitsGated)
	b.complete, b.waitsComplete = counted, b.waitsOn
	return b
}

// launchProbes notes launch counting switching on or off, and with waits
// the Python wait probes with it (else they are attached all the time).
func (b *builder) launchProbes(on, waits bool) {
	b.counted = on
	if !on {
		b.complete = false
	}
	b.waitsOn = on || !waits
	if !b.waitsOn {
		b.waitsComplete = false
	}
}

func (b *builder) add(it *item) []Step {
	e := &it.ev
	if e.PID != b.anchor.PID {
		return nil
	}
	// Other threads' work lands in the step in which it returns: past a
	// boundary that waits to be closed, that is the next one.
	infer := &b.infer
	if b.pending && e.End > b.pendingEnd {
		infer = &b.inferNext
	}
	if it.role == "infer" {
		infer.add(e)
	}
	if e.TID != b.anchor.TID {
		// Launches ride on a thread's next call, so they land in the step
		// in which that call returns.
		b.others += int(e.Launches + e.GraphLaunches)
		return nil
	}
	if it.isWait || e.Kind == events.KindWrite {
		// A wait (or a write) does not end a cluster; after a boundary it
		// belongs to the next step, which it begins.
		if b.pending && b.anchor.m.cut && isDataEvent(it) {
			out := b.close()
			b.cur = append(b.cur, *it)
			b.armed = false
			return out
		}
		if b.pending {
			b.limbo = append(b.limbo, *it)
			b.limboData = b.limboData || isDataEvent(it)
		} else {
			b.cur = append(b.cur, *it)
		}
		return nil
	}
	k := keyOf(e.Desc(), e)
	match := b.anchor.m.match(k)
	work := e.Launches + e.GraphLaunches
	if b.staleSkipped {
		b.workSinceSkip += work
	}
	if b.anchor.m.cut {
		return b.addCut(it, match)
	}
	switch {
	case !match || work != 0:
	case b.counted && b.needWork:
		match = false
	case !b.counted && b.anchor.afterData && b.fetchedSinceBoundary():
		// Without launch counts no work shows: the loop's sync after its
		// copy in is known from where learning saw it.
		match = false
	}
	if match && e.Desc().Class == cudaapi.ClassElapsed {
		// The step the reading is in: the pending one's cluster, or,
		// past work, the next.
		start := b.prevEnd
		if b.pending && work > 0 {
			start = b.pendingEnd
		}
		match = b.elapsedBoundary(it, start)
	}
	switch {
	case b.byCalls && !match:
		work = 1
	case !b.counted && !match && !b.anchor.inCluster[k]:
		// No launch counts now: a kind of call never seen inside a
		// cluster ends it.
		work = 1
	}
	if work > 0 {
		b.needWork = false
	}
	var out []Step
	if b.pending {
		if work == 0 && match && b.limboData {
			out = b.close()
			b.needWork = true
			b.cur = append(b.cur, *it)
			return out
		}
		if work == 0 {
			if match {
				b.cur = append(b.cur, b.limbo...)
				b.cur = append(b.cur, *it)
				b.limbo = b.limbo[:0]
				b.infer.merge(b.inferNext)
				b.inferNext = inferStats{}
				b.pendingEnd = e.End
			} else {
				b.limbo = append(b.limbo, *it)
				b.limboData = b.limboData || isDataEvent(it)
			}
			return nil
		}
		out = b.close()
	}
	b.cur = append(b.cur, *it)
	if match {
		b.pending, b.pendingEnd = true, e.End
	}
	return out
}

// addCut adds a call for a cut boundary (cuts.go): each boundary call
// extends the step, whatever work came between; a data event after one
// closes it there.
func (b *builder) addCut(it *item, match bool) []Step {
	var out []Step
	e := &it.ev
	work := e.Launches + e.GraphLaunches
	key := match
	if match {
		b.armed = b.armed || work > 0
		match = b.armed
	}
	switch {
	case match:
		if b.pending {
			b.cur = append(b.cur, b.limbo...)
			b.limbo = b.limbo[:0]
			b.infer.merge(b.inferNext)
			b.inferNext = inferStats{}
		}
		b.cur = append(b.cur, *it)
		b.pending, b.pendingEnd = true, it.ev.End
	case b.pending && isDataEvent(it):
		out = b.close()
		b.cur = append(b.cur, *it)
		b.armed = false
	case b.pending:
		b.limbo = append(b.limbo, *it)
	default:
		b.cur = append(b.cur, *it)
	}
	if !key {
		b.armed = b.armed || arms(keyOf(e.Desc(), e), work, isDataEvent(it))
	}
	return out
}

// fetchedSinceBoundary says whether the current step holds a data event
// after its last boundary-kind call.
func (b *builder) fetchedSinceBoundary() bool {
	for i := len(b.cur) - 1; i >= 0; i-- {
		it := &b.cur[i]
		if isDataEvent(it) {
			return true
		}
		if it.ev.Kind == events.KindCall && b.anchor.m.match(keyOf(it.ev.Desc(), &it.ev)) {
			return false
		}
	}
	return false
}

// finish closes a step whose boundary was seen; a partial step after the
// last boundary is dropped.
func (b *builder) finish() []Step {
	if !b.pending || b.anchor.m.cut {
		// A cut step ends at its last boundary call before the next
		// fetch: without that fetch its end is not known.
		return nil
	}
	return b.close()
}

func (b *builder) close() []Step {
	var out []Step
	if b.started {
		out = append(out, b.measure())
		b.index++
	} else {
		b.prevPool = b.poolRead() // where the first step's samples count from
	}
	b.others = 0
	b.infer, b.inferNext = b.inferNext, inferStats{}
	b.started = true
	b.complete = b.counted
	b.waitsComplete = b.waitsOn
	b.prevEnd = b.pendingEnd
	b.cur = append(b.cur[:0], b.limbo...)
	b.limbo = b.limbo[:0]
	b.pending, b.limboData = false, false
	return out
}

// measure turns the current step's calls into a Step.
func (b *builder) measure() Step {
	s := Step{Index: b.index, PID: b.anchor.PID, TID: b.anchor.TID, StartNS: b.prevEnd, EndNS: b.pendingEnd,
		OtherLaunches: b.others, LaunchesCounted: b.complete && !b.byCalls, WaitKindsCounted: b.waitsObserved && b.waitsComplete}
	s.WallTime = seconds(s.EndNS - s.StartNS)
	var readings, waits, takes []item
	var writes [][2]uint64            // start, and end once the GIL is back
	var data, dataWaits, calls []span // calls: the thread's calls, gets that were no wait included
	var toks []phaseToken
	var launchStarts, probeStarts, launchEnds, probeEnds []uint64
	var firstLaunch, lastSyncAfter, firstCall, computeStart uint64
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
		case "data", "fetch":
			s.FetchTime += seconds(e.Duration())
			s.FetchCalls++
			continue
		case "compute":
			s.ComputeCallTime += seconds(e.Duration())
			if computeStart == 0 {
				computeStart = e.Start
			}
			probeStarts, probeEnds = append(probeStarts, e.Start), append(probeEnds, e.End)
			continue
		case "get": // a get that is no wait (correlator.Add)
			takes = append(takes, *it)
			continue
		case "infer", "step":
			continue
		}
		if firstCall == 0 {
			firstCall = e.Start
		}
		a := e.Desc()
		s.Launches += int(e.Launches)
		s.GraphLaunches += int(e.GraphLaunches)
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
		sleep := w.wait == WaitDispatch && strings.HasPrefix(w.what, "time.sleep")
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

// waitNeeds is what the step thread's latest steps, of those whose
// waits were probed all through, need of the Python wait probes: the wait
// functions it blocked in outside whole gets (waits inside one are part of
// the get, which times them), and the writes where the loop logs as it
// steps (writeStepsNeeded of them had their lead-in end at a write).
// Only the latest needStepsKept count: a whole get is watched from its
// thread's first wait in it on, and the steps before need what the gets
// then cover.
type waitNeeds struct {
	recent []WaitProbes // the latest steps' needs, oldest first
	stable int          // steps in a row that needed nothing the ones before them did not
	all    WaitProbes   // what recent need together, the functions sorted
}

// needStepsKept is how many steps' needs are kept.
const needStepsKept = 16

// writeStepsNeeded is how many of the latest steps must have had their
// lead-in end at a write for the writes to be needed. A write probe
// traps at every write of every thread of the process: an H200 engine
// process whose main thread printed once in ~180 iterations kept them,
// and its resource-sharer thread, answering each get of two DDP ranks,
// then reported ~760 writes a second. Without them such a step's lead-in
// is counted as step time, which a median does not see.
const writeStepsNeeded = needStepsKept / 4

// note adds a step's waits (in start order), and the gets that were no
// wait: the waits inside any get are the get's.
func (n *waitNeeds) note(waits, takes []item, leadInAtWrite bool) {
	step := WaitProbes{Writes: leadInAtWrite}
	var gets [][2]uint64
	for _, g := range [][]item{waits, takes} {
		for i := range g {
			if e := &g[i].ev; g[i].role == "get" {
				gets = append(gets, [2]uint64{e.Start, e.End})
			}
		}
	}
	for i := range waits {
		e := &waits[i].ev
		if waits[i].role == "get" {
			continue
		}
		if e.Kind != events.KindPyWait || slices.Contains(step.Funcs, e.Name) ||
			slices.ContainsFunc(gets, func(g [2]uint64) bool { return g[0] <= e.Start && e.End <= g[1] }) {
			continue
		}
		step.Funcs = append(step.Funcs, e.Name)
	}
	n.recent = append(n.recent, step)
	if len(n.recent) > needStepsKept {
		n.recent = slices.Delete(n.recent, 0, 1)
	}
	before := n.all
	n.all = WaitProbes{}
	writes := 0
	for _, s := range n.recent {
		n.all = n.all.Union(WaitProbes{Funcs: s.Funcs})
		if s.Writes {
			writes++
		}
	}
	n.all.Writes = writes >= writeStepsNeeded
	if before.Covers(n.all) {
		n.stable++
	} else {
		n.stable = 0
	}
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
