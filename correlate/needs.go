package correlate

import (
	"slices"

	"github.com/gpuprof/gpuprof/events"
)

// StepWaits is what a process's step thread blocked in over its latest
// steps, of those whose waits were probed all through: what a policy for
// the Python wait probes (which to keep attached) is built from.
type StepWaits struct {
	// Funcs are the wait functions it blocked in outside whole gets, by
	// name, sorted: waits inside a get are part of the get, which times
	// them.
	Funcs []string
	// Writes: its loop logs as it steps (writeStepsNeeded of the latest
	// steps had their lead-in end at a write).
	Writes bool
	// Engines: the process runs inference-engine threads, which time
	// their iterations with their waits, whatever its step thread did.
	Engines bool
}

// covers says whether w holds every wait function of n, and its writes.
func (w StepWaits) covers(n StepWaits) bool {
	if n.Writes && !w.Writes {
		return false
	}
	for _, f := range n.Funcs {
		if !slices.Contains(w.Funcs, f) {
			return false
		}
	}
	return true
}

// withFuncs is w with funcs added, sorted.
func (w StepWaits) withFuncs(funcs []string) StepWaits {
	out := slices.Clone(w.Funcs)
	for _, f := range funcs {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	w.Funcs = out
	return w
}

// waitNeeds is what the step thread's latest steps, of those whose
// waits were probed all through, blocked in: the wait functions outside
// whole gets (waits inside one are part of the get, which times them),
// and the writes where the loop logs as it steps (writeStepsNeeded of
// them had their lead-in end at a write). Only the latest needStepsKept
// count: a whole get is watched from its thread's first wait in it on,
// and the steps before need what the gets then cover.
type waitNeeds struct {
	recent []stepWaits // the latest steps', oldest first
	stable int         // steps in a row that waited in nothing the ones before them did not
	all    StepWaits   // what recent blocked in together, the functions sorted
}

// stepWaits is what one step's thread blocked in.
type stepWaits struct {
	funcs         []string // outside whole gets, in start order
	leadInAtWrite bool
}

// needStepsKept is how many steps' waits are kept.
const needStepsKept = 16

// writeStepsNeeded is how many of the latest steps must have had their
// lead-in end at a write for the loop to count as logging as it steps. A
// write probe traps at every write of every thread of the process: an
// H200 engine process whose main thread printed once in ~180 iterations
// kept them, and its resource-sharer thread, answering each get of two
// DDP ranks, then reported ~760 writes a second. Without them such a
// step's lead-in is counted as step time, which a median does not see.
const writeStepsNeeded = needStepsKept / 4

// note adds a step's waits (in start order), and the gets that were no
// wait: the waits inside any get are the get's.
func (n *waitNeeds) note(waits, takes []item, leadInAtWrite bool) {
	step := stepWaits{leadInAtWrite: leadInAtWrite}
	var gets [][2]uint64
	for _, g := range [][]item{waits, takes} {
		for i := range g {
			if e := &g[i].ev; g[i].role == events.RoleGet {
				gets = append(gets, [2]uint64{e.Start, e.End})
			}
		}
	}
	for i := range waits {
		e := &waits[i].ev
		if waits[i].role == events.RoleGet {
			continue
		}
		if e.Kind != events.KindPyWait || slices.Contains(step.funcs, e.Name) ||
			slices.ContainsFunc(gets, func(g [2]uint64) bool { return g[0] <= e.Start && e.End <= g[1] }) {
			continue
		}
		step.funcs = append(step.funcs, e.Name)
	}
	n.recent = append(n.recent, step)
	if len(n.recent) > needStepsKept {
		n.recent = slices.Delete(n.recent, 0, 1)
	}
	before := n.all
	n.all = StepWaits{}
	writes := 0
	for _, s := range n.recent {
		n.all = n.all.withFuncs(s.funcs)
		if s.leadInAtWrite {
			writes++
		}
	}
	n.all.Writes = writes >= writeStepsNeeded
	if before.covers(n.all) {
		n.stable++
	} else {
		n.stable = 0
	}
}

// stableSteps is how many steps in a row, their waits probed all
// through, must have blocked in nothing new for StepWaits to answer
// (what the latest needStepsKept blocked in).
const stableSteps = 8

// StepWaits says what the process's step thread blocks in (ok once its
// steps have blocked in nothing new for stableSteps steps, or at once
// where the process runs engine threads). Wait functions it does not
// block in give no part of a step's time.
func (c *Correlator) StepWaits() (StepWaits, bool) {
	switch {
	case c.b == nil:
		return StepWaits{}, false
	case len(c.engines) > 0:
		return StepWaits{Engines: true}, true
	case c.b.needs.stable < stableSteps || len(c.b.needs.recent) < needStepsKept:
		return StepWaits{}, false
	}
	return c.b.needs.all, true
}
