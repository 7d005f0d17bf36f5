package control

import (
	"slices"

	"github.com/gpuprof/gpuprof/correlate"
)

// WaitProbes is what a process's steps need of its Python wait probes:
// those kept attached while the rest go with its launch probes.
type WaitProbes struct {
	Funcs  []string // the wait functions its step thread blocked in outside whole gets, by name
	Writes bool     // its steps' lead-ins end at logging writes
	// All: every one, whatever the step thread did: the process's
	// inference-engine threads time their iterations with their waits.
	All bool
}

// waitProbesFor is what steps that blocked in w need: the functions they
// blocked in, the writes where they log, all where engine threads time
// their iterations with their waits.
func waitProbesFor(w correlate.StepWaits) WaitProbes {
	if w.Engines {
		return WaitProbes{All: true}
	}
	return WaitProbes{Funcs: w.Funcs, Writes: w.Writes}
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
