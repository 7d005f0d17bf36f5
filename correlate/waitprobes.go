package correlate

import "slices"

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
// (StepWaits). The rest give no part of a step's time and may go with the
// launch probes (probes.Session.SamplePythonWaits).
func (c *Correlator) WaitProbesNeeded() (WaitProbes, bool) {
	w, ok := c.StepWaits()
	return WaitProbes{Funcs: w.Funcs, Writes: w.Writes, All: w.Engines}, ok
}
