package correlate

import (
	"slices"

	"github.com/gpuprof/gpuprof/events"
)

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

// stableSteps is how many steps in a row, their waits probed all
// through, must have needed nothing new of the Python wait probes for
// WaitProbesNeeded to answer (what the latest needStepsKept need).
const stableSteps = 8

// WaitProbes is what a process's steps need of its Python wait probes.
type WaitProbes struct {
	Funcs  []string // the wait functions its step thread blocked in outside whole gets, by name
	Writes bool     // a step's lead-in ended at a logging write
	// All: every one, whatever the step thread did: the process's
	// inference-engine threads time their iterations with their waits.
	All bool
}

// Covers says whether the probes kept for w serve steps that need n.
func (w WaitProbes) Covers(n WaitProbes) bool {
	if w.All {
		return true
	}
	if n.All || n.Writes && !w.Writes {
		return false
	}
	for _, f := range n.Funcs {
		if !slices.Contains(w.Funcs, f) {
			return false
		}
	}
	return true
}

// Equal says whether w and n need the same probes.
func (w WaitProbes) Equal(n WaitProbes) bool {
	return w.Writes == n.Writes && w.All == n.All && slices.Equal(w.Funcs, n.Funcs)
}

// Union is what w and n need together.
func (w WaitProbes) Union(n WaitProbes) WaitProbes {
	funcs := slices.Clone(w.Funcs)
	for _, f := range n.Funcs {
		if !slices.Contains(funcs, f) {
			funcs = append(funcs, f)
		}
	}
	slices.Sort(funcs)
	return WaitProbes{Funcs: funcs, Writes: w.Writes || n.Writes, All: w.All || n.All}
}

// WaitProbesNeeded says which Python wait probes the process's steps need
// (ok once they have needed nothing new for stableSteps steps, or at once
// where they need all). The rest give no part of a step's time and may go
// with the launch probes (probes.Session.SamplePythonWaits).
func (c *Correlator) WaitProbesNeeded() (WaitProbes, bool) {
	switch {
	case c.b == nil:
		return WaitProbes{}, false
	case len(c.engines) > 0:
		return WaitProbes{All: true}, true
	case c.b.needs.stable < stableSteps || len(c.b.needs.recent) < needStepsKept:
		return WaitProbes{}, false
	}
	return c.b.needs.all, true
}
