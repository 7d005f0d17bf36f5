package correlate

import (
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// builder cuts the step thread's calls into steps. A step ends at the
// return of the last boundary call of a cluster; calls that follow a
// boundary call with no launch in between wait in limbo: if another
// boundary call comes before any launch they join the cluster (and this
// step), otherwise they open the next step.
type builder struct {
	boundary   Boundary
	byCalls    bool // the step thread has no launch counts
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

func newBuilder(a Boundary, counted, waitsGated bool, batch int) *builder {
	// The first boundary must follow work, as each cluster end learned
	// did: a loop's sync after its copy in is no step's end.
	b := &builder{boundary: a, byCalls: a.byCalls, batch: batch, needWork: true}
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
	if e.PID != b.boundary.PID {
		return nil
	}
	// Other threads' work lands in the step in which it returns: past a
	// boundary that waits to be closed, that is the next one.
	infer := &b.infer
	if b.pending && e.End > b.pendingEnd {
		infer = &b.inferNext
	}
	if it.role == events.RoleInfer {
		infer.add(e)
	}
	if e.TID != b.boundary.TID {
		// Launches ride on a thread's next call, so they land in the step
		// in which that call returns.
		b.others += int(e.Launches - it.captured + e.GraphLaunches)
		return nil
	}
	if it.isWait || e.Kind == events.KindWrite {
		// A wait (or a write) does not end a cluster; after a boundary it
		// belongs to the next step, which it begins.
		if b.pending && b.boundary.m.cut && isDataEvent(it) {
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
	match := b.boundary.m.match(k)
	work := e.Launches + e.GraphLaunches
	if b.staleSkipped {
		b.workSinceSkip += work
	}
	if b.boundary.m.cut {
		return b.addCut(it, match)
	}
	switch {
	case !match || work != 0:
	case b.counted && b.needWork:
		match = false
	case !b.complete && b.boundary.afterData && b.fetchedSinceBoundary():
		// Without launch counts all through the step (they may have come
		// on since its fetch) no work shows: the loop's sync after its
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
	case !b.counted && !match && !b.boundary.inCluster[k]:
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
	boundaryKind := match
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
	if !boundaryKind {
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
		if it.ev.Kind == events.KindCall && b.boundary.m.match(keyOf(it.ev.Desc(), &it.ev)) {
			return false
		}
	}
	return false
}

// finish closes a step whose boundary was seen; a partial step after the
// last boundary is dropped.
func (b *builder) finish() []Step {
	if !b.pending || b.boundary.m.cut {
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
