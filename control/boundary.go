package control

import (
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
)

// boundaryPlan is what a process's probes are told when its step boundary
// is found or moves, besides its step thread.
type boundaryPlan struct {
	sampleLaunches bool // count its launches period, on (Probes.SampleLaunches)
	period, on     time.Duration
	narrowRecords  bool // probe its records at their readers' call sites (Probes.NarrowRecords)
}

// planBoundary says what a process whose boundary is calls of kind k
// needs of its probes: first, where the boundary was found just now
// rather than moved, its launches counted part of the time and its event
// records narrowed, unless the boundary is one of those.
func (c Config) planBoundary(first bool, k correlate.CallKind) boundaryPlan {
	var p boundaryPlan
	if !first {
		return p // the probes were told when it was found
	}
	// A job whose boundary is a device-to-device copy keeps them, and so
	// the launches, probed all the time (probes/sampling.go probes them
	// with the launches).
	if c.LaunchDuty < 1 && !matchesDeviceCopies(k) {
		p.sampleLaunches = true
		p.period, p.on = c.LaunchCycle()
	}
	// A job whose boundary is an event record keeps its records probed at
	// their functions (probes/recordsites.go probes the others' at their
	// readers' call sites).
	p.narrowRecords = c.RecordSites && !matchesRecords(k)
	return p
}

// matchesDeviceCopies says whether device-to-device copies can be calls
// of kind k.
func matchesDeviceCopies(k correlate.CallKind) bool {
	return k.Class == cudaapi.ClassCopy && (k.AnyDir || k.Dir == cudaapi.DirDtoD)
}

// matchesRecords says whether calls of kind k are event records.
func matchesRecords(k correlate.CallKind) bool { return k.Class == cudaapi.ClassRecord }

// boundaryFound tells pid's probes of its step boundary a, found just
// now (first) or moved; learning: its launches were counted part of the
// time while it was learned (Probes.LearnLaunches).
func (l *Loop) boundaryFound(first, learning bool, a correlate.Boundary) {
	// Timed, for telling a late boundary from a steady cost
	// (overhead.py --logs); the output's note says it untimed.
	l.log.Debug("step boundary", "pid", a.PID, "tid", a.TID, "calls", a.Calls, "first", first)
	pid := int(a.PID)
	l.probes.SetStepThread(pid, a.TID)
	plan := l.cfg.planBoundary(first, a.CallKind())
	switch {
	case plan.sampleLaunches:
		l.probes.SampleLaunches(pid, plan.period, plan.on)
	case first && learning:
		l.probes.SampleLaunches(pid, 0, 0) // every launch from now on
	}
	if plan.narrowRecords {
		l.probes.NarrowRecords(pid)
	}
}
