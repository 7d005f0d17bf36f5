package control

import "log/slog"

// waitKeeper keeps each process's Python wait probes its steps need (its
// step thread's waits outside whole gets) attached, and lets the rest go
// with its launch probes. A step that needs one of the rest has it kept
// too; one that needs all (an engine thread) brings them all back for
// good. (A boundary that moves starts the count afresh: that needs
// nothing new.)
type waitKeeper struct {
	probes Probes
	log    *slog.Logger
	given  map[uint32]WaitProbes // kept, by PID, once sampled
	all    map[uint32]bool       // all attached for good
}

func newWaitKeeper(p Probes, log *slog.Logger) *waitKeeper {
	return &waitKeeper{probes: p, log: log, given: map[uint32]WaitProbes{}, all: map[uint32]bool{}}
}

// need takes what pid's steps need now.
func (k *waitKeeper) need(pid uint32, need WaitProbes) {
	g, sampled := k.given[pid]
	switch {
	case k.all[pid]:
	case !sampled:
		if !need.All && k.probes.SamplePythonWaits(int(pid), need.Funcs, need.Writes) {
			k.given[pid] = need
			k.log.Debug("Python wait probes go with the launch probes", "pid", pid, "kept", need.Funcs, "writes kept", need.Writes)
		}
	case g.Covers(need):
	case !need.All:
		more := g.Union(need)
		if k.probes.KeepMorePythonWaits(int(pid), more.Funcs, more.Writes) {
			k.given[pid] = more
			k.log.Info("Python wait probes kept attached: a step waited in one that had been paused", "pid", pid,
				"kept", more.Funcs, "writes kept", more.Writes, "were", g.Funcs)
		}
	case k.probes.KeepPythonWaits(int(pid)):
		k.all[pid] = true
		k.log.Info("Python wait probes all kept attached: a step needs them all", "pid", pid, "kept before", g.Funcs)
	}
}
