package correlate

import (
	"fmt"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// learnEvery is how much event time passes between attempts to find the
// boundary.
const learnEvery = 250e6

// A boundary found is only a proposal until it has held for confirmSpan of
// event time and its calls came confirmClusters more times: a job starting
// up shows patterns that end (model set-up copying weights one by one,
// inference engines warming up before training starts) and steps are only
// reported for the loop that goes on. Until then events wait in the buffer
// and are replayed, so no step is lost.
const (
	confirmSpan     = 2e9
	confirmClusters = 3
)

type proposal struct {
	boundary Boundary
	since    uint64
	seen     int
}

// The boundary is reviewed every reviewEvery of event time over the last
// reviewWindow: a job whose training loop starts after its inference
// engines (or moves to another thread) gets its boundary moved to the loop.
const (
	reviewEvery  = 1e9
	reviewWindow = 5e9
	// A thread reading CUDA event timings while the boundary's thread does
	// not is the strongest sign the loop has moved: review within this.
	reviewUrgent = 100e6
)

// item is an event with what was known about it when it arrived.
type item struct {
	ev    events.Event
	freed uint64    // bytes a free released
	span  [2]uint64 // record times of an elapsed read's start and end events
	// mark is when the record of an elapsed read's start event began: where
	// the measured compute began, so where the step's data phase ended.
	mark   uint64
	isWait bool        // a wait (Python, or a user probe in the dispatch role)
	wait   WaitKind    // for a wait
	what   string      // what the wait waited in
	gil    uint64      // of which taking the GIL back after it
	role   events.Role // for a user probe
	// For a call (graphs.go): the launches it carries that a stream
	// capture took (no kernel ran), or for a graph launch the kernels the
	// graph ran, graphKnown 1 where that is known.
	captured     uint32
	graphKernels uint64
	graphKnown   uint32
}

type record struct{ start, end uint64 }

type handle struct {
	pid uint32
	h   uint64
}

// Correlator cuts events into steps. Add events in time order.
type Correlator struct {
	cfg     Config
	fixed   *matcher
	buf     []item
	lastTry uint64
	lastLen int
	prop    *proposal
	b       *builder

	counted       bool   // launch probes attached now
	waitsGated    bool   // the Python wait probes go with them (the latest marker's Args[0] 1)
	waits         bool   // Python waits are probed
	window        []item // recent events, for reviewing the boundary
	lastReview    uint64
	boundaryTimes bool // the boundary's thread reads CUDA event timings

	engines      map[uint64]*engineThread // by pid<<32|tid
	candidates   map[uint64]bool          // threads that may be engines, to learn at the next review
	countedSince uint64                   // when launch counting last went on
	countedUntil uint64                   // when it last went off after that; 0: on now
	// learnMarks are the launch-probe markers seen while the boundary is
	// still being learned: the buffer is cut into steps with each switch
	// in its place once it is found.
	learnMarks []events.Event

	pools pools     // the sample pool's readings
	gets  wholeGets // what whole gets wait for

	records map[handle]record // event handle -> its last record call
	allocs  map[handle]uint64 // pointer -> bytes
	names   map[handle]string // kernel handle -> name
	graphs  graphs            // CUDA graphs captured while attached
	sum     summaryAcc
	dropped Dropped
}

// New returns a Correlator, or an error for a bad boundary name.
func New(cfg Config) (*Correlator, error) {
	if cfg.LearnMin <= 0 {
		cfg.LearnMin = 6
	}
	if cfg.MaxBuffer <= 0 {
		cfg.MaxBuffer = DefaultMaxBuffer
	}
	c := &Correlator{cfg: cfg, records: map[handle]record{}, allocs: map[handle]uint64{},
		names: map[handle]string{}, sum: newSummaryAcc(), counted: !cfg.NoLaunchCounts,
		engines: map[uint64]*engineThread{}, candidates: map[uint64]bool{}, pools: newPools(),
		gets: newWholeGets(cfg.User), graphs: newGraphs()}
	if cfg.Boundary != "" {
		m, err := parseBoundary(cfg.Boundary)
		if err != nil {
			return nil, err
		}
		c.fixed = &m
	}
	for id, up := range cfg.User {
		if up.Role == events.RoleStep {
			if c.fixed != nil {
				return nil, fmt.Errorf("two step boundaries: --step-boundary and --probe step=... (or two of those); name one")
			}
			c.fixed = &matcher{key: key{user: id}}
		}
	}
	return c, nil
}

// extendWait adds a GIL wait to the Python wait or write it follows on its
// thread: the wait lasted until the thread could run Python code again, as
// the job's own clock around queue.get() sees it; a loop's logging write
// ends once the loop runs on (on a busy GIL, up to ms after the write).
// A GIL wait is a tail only where it began within events.GILFollowNS of
// the wait's end: the bound the BPF programs report GIL waits by.
func (c *Correlator) extendWait(g *events.Event) {
	extend := func(items []item) bool {
		for i := len(items) - 1; i >= 0 && i >= len(items)-64; i-- {
			it := &items[i]
			if (it.ev.Kind != events.KindPyWait && it.ev.Kind != events.KindWrite) || it.ev.TID != g.TID || it.ev.PID != g.PID {
				continue
			}
			if g.Start >= it.ev.End && g.Start-it.ev.End <= events.GILFollowNS {
				it.gil += g.End - it.ev.End
				it.ev.End = g.End
			}
			return true
		}
		return false
	}
	if c.b != nil {
		if extend(c.b.limbo) || extend(c.b.cur) {
			return
		}
		extend(c.window)
		return
	}
	extend(c.buf)
}

// ObserveWaits says Python waits are probed in the job, so that steps
// without any report zero dispatch wait rather than none known.
func (c *Correlator) ObserveWaits() {
	c.waits = true
	if c.b != nil {
		c.b.waitsObserved = true
	}
}

// Boundary returns the step boundary in use, once found.
func (c *Correlator) Boundary() (Boundary, bool) {
	if c.b == nil {
		return Boundary{}, false
	}
	return c.b.boundary, true
}

// Add takes the next event and returns the steps it completed.
func (c *Correlator) Add(e *events.Event) []Step {
	switch e.Kind {
	case events.KindKernelName:
		c.addName(e)
		return nil
	case events.KindLaunchProbes:
		c.counted, c.waitsGated = e.Out == 1, e.Args[0] == 1
		c.graphs.launchProbes(c.counted)
		if c.counted {
			c.countedSince, c.countedUntil = e.End, 0
		} else if c.countedUntil == 0 {
			c.countedUntil = e.End
		}
		if c.b != nil {
			c.b.launchProbes(c.counted, c.waitsGated)
		} else {
			c.learnMarks = append(c.learnMarks, *e)
		}
		for _, en := range c.engines {
			en.b.launchProbes(c.counted, c.waitsGated)
		}
		return nil
	case events.KindPyAttached:
		c.ObserveWaits()
		return nil
	case events.KindPyGIL:
		c.extendWait(e)
		return nil
	case events.KindPool:
		c.pools.add(e)
		return nil
	case events.KindCall, events.KindPyWait, events.KindWrite:
	default:
		return nil
	}
	it := item{ev: *e}
	a := e.Desc()
	switch up, user := c.cfg.User[e.API]; {
	case e.Kind == events.KindWrite:
		// Only marks where a loop's logging ends (builder.measureWaits).
	case e.Kind == events.KindPyWait:
		var queue uint64
		it.wait, it.what, queue = classifyWait(e)
		it.isWait = true
		c.pools.noteWait(e.TID, it.wait, queue)
		if c.gets.noteWait(e, it.wait) && it.wait == WaitDispatch {
			// Part of taking a sample that was there (gets.go takes):
			// the step's data, not a wait for samples.
			it.wait = WaitData
		}
		c.sum.addWait(e, it.wait, it.what)
	case user:
		it.role = up.Role
		kind, wait := WaitDispatch, up.Role == events.RoleDispatch
		if up.Role == events.RoleGet {
			kind, wait = c.gets.kindOf(e)
		}
		if wait {
			it.wait, it.what, it.isWait = kind, up.Name, true
			c.sum.addWait(e, it.wait, it.what)
		}
		c.sum.addUser(e, up)
		// A get that is no wait took a sample that was there: part of the
		// step's data phase (isDataEvent), never a boundary.
	default:
		c.sum.addEvent(e, a)
	}
	switch a.Class {
	case cudaapi.ClassRecord:
		h := handle{e.PID, e.Handle()}
		if _, ok := c.records[h]; !ok && len(c.records) >= maxHandles {
			c.dropped.Handles += uint64(len(c.records))
			clear(c.records)
		}
		c.records[h] = record{e.Start, e.End}
	case cudaapi.ClassElapsed:
		first, second := c.records[handle{e.PID, e.Handle()}], c.records[handle{e.PID, e.Second()}]
		it.span, it.mark = [2]uint64{first.end, second.end}, first.start
	case cudaapi.ClassAlloc:
		if e.OK() && e.Out != 0 {
			h := handle{e.PID, e.Out}
			if _, ok := c.allocs[h]; !ok && len(c.allocs) >= maxHandles {
				c.dropped.Handles += uint64(len(c.allocs))
				clear(c.allocs)
			}
			c.allocs[h] = e.Bytes()
		}
	case cudaapi.ClassFree:
		h := handle{e.PID, e.Handle()}
		it.freed = c.allocs[h]
		delete(c.allocs, h)
	}
	c.graphs.note(&it, c.counted)
	if c.b != nil {
		steps := c.b.add(&it)
		c.toEngine(&it)
		return c.emit(append(steps, c.review(&it)...))
	}
	c.buf = append(c.buf, it)
	if len(c.buf) > c.cfg.MaxBuffer {
		c.dropped.Buffer += uint64(len(c.buf) / 2)
		c.buf = append(c.buf[:0], c.buf[len(c.buf)/2:]...)
	}
	// Attempts come every learnEvery of event time, or once the buffer has
	// doubled.
	if e.End < c.lastTry+learnEvery && len(c.buf) < max(64, 2*c.lastLen) {
		return nil
	}
	return c.emit(c.tryLearn(false))
}

// tryLearn looks for the boundary in the buffer, and commits to it once the
// proposal is confirmed (or at once when final, at the end of the events).
func (c *Correlator) tryLearn(final bool) []Step {
	now := c.buf[len(c.buf)-1].ev.End
	c.lastTry, c.lastLen = now, len(c.buf)
	boundary, ok := learn(c.countedStretches(c.buf), c.cfg, c.fixed)
	if !ok {
		c.prop = nil
		return nil
	}
	if !final {
		p := c.prop
		if p == nil || p.boundary.TID != boundary.TID || p.boundary.m != boundary.m {
			c.prop = &proposal{boundary: boundary, since: now, seen: boundary.seen}
			return nil
		}
		if now < p.since+confirmSpan || boundary.seen < p.seen+confirmClusters && !(c.uncountedSince(p.since) && c.goesOn(p)) {
			return nil
		}
	}
	learnable := c.lastCounted(c.buf)
	c.prop = nil
	marks := c.learnMarks
	c.learnMarks = nil
	counted, gated := true, false // launch counting at the buffer's start
	for len(marks) > 0 && marks[0].End <= c.buf[0].ev.End {
		counted, gated, marks = marks[0].Out == 1, marks[0].Args[0] == 1, marks[1:]
	}
	c.b = newBuilder(boundary, counted, gated, c.cfg.BatchSize)
	c.b.waitsObserved = c.waits
	for i := range c.buf {
		c.noteCandidate(&c.buf[i])
	}
	c.learnEngines(learnable)
	var steps []Step
	for i := range c.buf {
		for len(marks) > 0 && marks[0].End <= c.buf[i].ev.End {
			c.b.launchProbes(marks[0].Out == 1, marks[0].Args[0] == 1)
			marks = marks[1:]
		}
		steps = append(steps, c.b.add(&c.buf[i])...)
		c.toEngine(&c.buf[i])
	}
	c.b.launchProbes(c.counted, c.waitsGated)
	c.window = append(c.window[:0], c.buf...)
	c.lastReview = c.lastTry
	c.buf = nil
	return steps
}

// review moves the boundary to another thread when, over the recent
// window, that thread is clearly the training loop and the current one is
// not: it reads CUDA event timings and the current one does not, it waits
// for the GPU's results and the current one does not, or it launches at
// least twice the kernels (rank). Steps already reported stay;
// numbering continues.
func (c *Correlator) review(it *item) []Step {
	if len(c.window) >= c.cfg.MaxBuffer {
		// More than MaxBuffer events within reviewWindow: the review
		// sees the newer half.
		c.dropped.Window += uint64(len(c.window) / 2)
		c.window = append(c.window[:0], c.window[len(c.window)/2:]...)
	}
	c.window = append(c.window, *it)
	now := it.ev.End
	e := &it.ev
	if e.TID == c.b.boundary.TID && e.Desc().Class == cudaapi.ClassElapsed {
		c.boundaryTimes = true
	}
	urgent := !c.boundaryTimes && e.TID != c.b.boundary.TID && e.Desc().Class == cudaapi.ClassElapsed
	if now < c.lastReview+reviewEvery && !(urgent && now >= c.lastReview+reviewUrgent) {
		return nil
	}
	c.lastReview = now
	cut := 0
	for cut < len(c.window) && c.window[cut].ev.End+reviewWindow < now {
		cut++
	}
	c.window = append(c.window[:0], c.window[cut:]...)
	c.learnEngines(c.lastCounted(c.window))
	if c.cfg.Thread != 0 {
		return nil
	}
	threads := rank(collect(c.window))
	if len(threads) == 0 || threads[0].tid == c.b.boundary.TID {
		return nil
	}
	top, cur := threads[0], &threadTokens{}
	for _, th := range threads {
		if th.tid == c.b.boundary.TID {
			cur = th
		}
	}
	if !(top.elapsed > 0 && cur.elapsed == 0) && !(top.toHost > 0 && cur.toHost == 0) && top.launches < 2*max(cur.launches, 1) {
		return nil
	}
	cfg := c.cfg
	cfg.Thread = top.tid
	boundary, ok := learn([][]item{c.window}, cfg, c.fixed)
	if !ok {
		return nil
	}
	steps := c.b.finish()
	c.boundaryTimes = false
	nb := newBuilder(boundary, c.counted, c.waitsGated, c.cfg.BatchSize)
	nb.waitsObserved = c.waits
	nb.index = c.b.index
	c.b = nb
	for i := range c.window {
		steps = append(steps, nb.add(&c.window[i])...)
	}
	return steps
}

// Finish closes the last step, if its boundary was seen.
func (c *Correlator) Finish() []Step {
	var steps []Step
	if c.b == nil && len(c.buf) > 0 {
		steps = c.tryLearn(true)
	}
	if c.b != nil {
		steps = append(steps, c.b.finish()...)
	}
	return c.emit(steps)
}

// lastCounted returns the items of the last stretch in which launches
// were counted: the boundary and engines' iterations are learned from
// launch counts, and a stretch without them would make a whole step look
// like calls with no work between.
func (c *Correlator) lastCounted(items []item) []item {
	if c.cfg.NoLaunchCounts {
		return items
	}
	items = startingAfter(items, c.countedSince)
	j := len(items)
	for c.countedUntil != 0 && j > 0 && items[j-1].ev.End > c.countedUntil {
		j--
	}
	return items[:j]
}

func (c *Correlator) emit(steps []Step) []Step {
	for i := range steps {
		if s := &steps[i]; s.InferCalls == 0 && s.InferIterations > 0 {
			s.InferEngines = max(1, c.activeEngines(s.EndNS))
			s.InferCapacity = float64(s.InferEngines) / s.InferBatchTime
		}
		c.pools.measure(&steps[i], c.cfg.BatchSize > 0)
		if c.cfg.GPUs != nil {
			c.cfg.GPUs.join(&steps[i])
		}
		c.sum.addStep(&steps[i])
	}
	return steps
}

func (c *Correlator) addName(e *events.Event) {
	if e.Name != "" {
		h := handle{e.PID, e.Out}
		if _, named := c.names[h]; named && e.Args[events.KernelNameArg] == events.KernelNameFromSite {
			return // its registration named it: the kernel's own name
		}
		c.names[h] = e.Name
		return
	}
	// cuKernelGetFunction: the function is the kernel of that name.
	if n, ok := c.names[handle{e.PID, e.Args[1]}]; ok {
		c.names[handle{e.PID, e.Out}] = n
	}
}

// KernelName returns the name a kernel handle was looked up by, if seen.
func (c *Correlator) KernelName(pid uint32, h uint64) (string, bool) {
	n, ok := c.names[handle{pid, h}]
	return n, ok
}
