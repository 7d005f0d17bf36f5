package correlate

import (
	"slices"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Inference engines, seen from the calls they make: a thread other than the
// step thread (in any process attached) that runs GPU work in a loop of its
// own and brings each iteration's results to the host (a sync or a
// device-to-host copy: sampled tokens, hidden states). PyTorch's autograd
// threads launch the trainer's backward pass but never wait on the GPU, so
// they are not engines. An engine's iterations are cut the way steps are,
// at a boundary learned from its own calls.
//
// infer_batch_time is an iteration's time less the waits for room in a full
// pool (a blocked put: the engine could have gone on); infer_capacity the
// iterations a second the engines could make back to back, each producing
// one pool item. A sleep inside an iteration counts as engine time.

// engineTier finds an engine's iterations: the kernels launched between
// boundaries must be regular, the other calls need not be (PyTorch's
// pinned-memory allocator records an event in some iterations and not in
// others). Of the regular boundaries the highest-priority one wins: a sync
// before an event record.
var engineTier = tier{tol: tiers[0].tol, frac: tiers[0].frac, anySig: true}

// engineActive is how long after its last iteration an engine still counts
// towards infer_capacity.
const engineActive = 2e9

// Engine is one inference engine thread over the run.
type Engine struct {
	PID, TID   uint32
	Boundary   string  // the calls that end an iteration
	Iterations int     // seen whole
	Busy       Dist    // seconds an iteration, less waits on a full pool (the last keepIterations)
	FullWait   float64 // seconds waiting for room in a full pool
}

// keepIterations bounds the iteration times an engine keeps for Busy.
const keepIterations = 4096

type engineThread struct {
	b *builder
	Engine
	last uint64    // when its latest iteration ended
	busy []float64 // the last keepIterations, a ring once full
	next int       // where the ring is written next
}

// learnEngines finds the engines among the threads of items: not the step
// thread, results brought to the host, a loop of their own.
func (c *Correlator) learnEngines(items []item) {
	if c.b == nil || (!c.counted && !c.cfg.NoLaunchCounts) {
		// Iterations are told apart by the kernels launched between them.
		return
	}
	if len(c.candidates) == 0 {
		return
	}
	var theirs []item
	for i := range items {
		if c.candidates[threadID(items[i].ev.PID, items[i].ev.TID)] {
			theirs = append(theirs, items[i])
		}
	}
	clear(c.candidates)
	for _, th := range collect(theirs) {
		id := threadID(th.pid, th.tid)
		if th.pid == c.b.boundary.PID && th.tid == c.b.boundary.TID || c.engines[id] != nil || th.toHost == 0 {
			continue
		}
		cfg := c.cfg
		cfg.Thread = th.tid
		cand, ok := bestKey(th, cfg, engineTier)
		if !ok {
			continue
		}
		a := boundaryFor(th, cand, engineTier, cfg)
		b := newBuilder(a, c.counted, c.waitsGated, 0)
		b.waitsObserved = c.waits
		c.engines[id] = &engineThread{b: b, Engine: Engine{PID: th.pid, TID: th.tid, Boundary: a.Calls}}
	}
}

// toEngine passes an item to its thread's engine, if it is one, and counts
// the iterations it completes into the current step.
func (c *Correlator) toEngine(it *item) {
	id := threadID(it.ev.PID, it.ev.TID)
	en := c.engines[id]
	if en == nil {
		c.noteCandidate(it)
		return
	}
	if en.TID == c.b.boundary.TID && en.PID == c.b.boundary.PID {
		// The step boundary moved to this thread (review).
		delete(c.engines, id)
		return
	}
	for _, s := range en.b.add(it) {
		busy := s.WallTime - s.FullWait
		en.Iterations++
		en.FullWait += s.FullWait
		if len(en.busy) < keepIterations {
			en.busy = append(en.busy, busy)
		} else {
			en.busy[en.next%keepIterations] = busy
			en.next++
		}
		en.last = s.EndNS
		c.b.addIteration(s.EndNS, busy)
	}
}

// noteCandidate marks the thread of a call that brings results to the host,
// if it is not the step thread: it may be an engine not yet learned, for
// the next attempt to look at.
func (c *Correlator) noteCandidate(it *item) {
	e := &it.ev
	if e.Kind != events.KindCall || e.PID == c.b.boundary.PID && e.TID == c.b.boundary.TID {
		return
	}
	if toHost(keyOf(e.Desc(), e)) {
		c.candidates[threadID(e.PID, e.TID)] = true
	}
}

// activeEngines counts the engines with an iteration within engineActive of
// t.
func (c *Correlator) activeEngines(t uint64) int {
	n := 0
	for _, en := range c.engines {
		if en.last != 0 && en.last+engineActive >= t {
			n++
		}
	}
	return n
}

// Engines returns the engines seen so far, with their iteration times.
func (c *Correlator) Engines() []Engine {
	var out []Engine
	for _, en := range c.engines {
		if en.Iterations == 0 {
			continue
		}
		e := en.Engine
		e.Busy = dist(en.busy)
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Engine) int {
		if a.PID != b.PID {
			return int(a.PID) - int(b.PID)
		}
		return int(a.TID) - int(b.TID)
	})
	return out
}

// toHost says whether a call brings the GPU's results to the host.
func toHost(k key) bool {
	return k.class == cudaapi.ClassSync || k.class == cudaapi.ClassCopy && k.dir == cudaapi.DirDtoH
}
