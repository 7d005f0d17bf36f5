package probes

import (
	"github.com/cilium/ebpf/link"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Driver twins. A CUDA runtime's copies, syncs and event calls reach the
// driver's entry points of the same kind, so in a process whose runtime
// is probed each such call traps four times (runtime and driver, entry and
// return) while only the runtime's probes time it: the driver's see they
// are underneath and stay quiet. On the H200 host, DDP ranks made ~48% of
// their CUDA call probe hits in such driver twins (each backward step's
// ~130 gradient-bucket copies among them). The driver's probes still
// catch what calls the driver directly (JAX, NCCL's own runtime), so they
// are attached in groups of their own, and a group is detached once the
// process has made twinEvidence runtime calls of its kind with at most 1
// in twinDirectShare of as many straight to the driver in between.
const (
	twinEvidence    = 200
	twinDirectShare = 100
)

// twinGroup is the kind of call a driver entry point shares with the
// runtime, "" for those it does not (launches, memory, module loading).
func twinGroup(a cudaapi.API) string {
	switch a.Class {
	case cudaapi.ClassCopy:
		return "copies"
	case cudaapi.ClassSync:
		return "syncs"
	case cudaapi.ClassRecord, cudaapi.ClassElapsed:
		return "event calls"
	}
	return ""
}

// splitTwins separates a driver plan's twin probes, by group, from the
// rest.
func splitTwins(lp LibraryPlan) (rest LibraryPlan, twins map[string]LibraryPlan) {
	rest = lp
	if lp.Layer != cudaapi.LayerDriver {
		return rest, nil
	}
	rest.Probes = nil
	for _, p := range lp.Probes {
		g := twinGroup(p.API)
		if g == "" {
			rest.Probes = append(rest.Probes, p)
			continue
		}
		if twins == nil {
			twins = map[string]LibraryPlan{}
		}
		tp := twins[g]
		if tp.Probes == nil {
			tp = lp
			tp.Probes = nil
		}
		tp.Probes = append(tp.Probes, p)
		twins[g] = tp
	}
	return rest, twins
}

// twinCounts are one process's calls of each twin group attached, in the
// current window, by the layer that timed them: [0] the runtime, [1] the
// driver directly; nil once the group is detached.
type twinCounts map[string]*[2]uint64

// countTwin notes a call event for its process's twin decision.
func (c twinCounts) count(ev *events.Event) {
	a, ok := cudaapi.ByID(ev.API)
	if !ok {
		return
	}
	g := twinGroup(a)
	if g == "" {
		return
	}
	n := c[g]
	if n == nil {
		return // not attached, or decided
	}
	switch a.Layer {
	case cudaapi.LayerRuntime:
		n[0]++
	case cudaapi.LayerDriver:
		n[1]++
	}
}

// twinVerdict says, at the end of a window of twinEvidence runtime calls,
// whether a group's driver probes can go (detach) or a new window starts
// (the driver was called directly too often in this one). A window that
// is not full yet decides nothing. Windows, not a running total: the calls
// a job makes while it sets up (NCCL's straight to the driver as it
// connects the ranks) say nothing of the loop that follows, and a group
// whose direct calls go on (DDP's event records, NCCL's own) only stays.
func twinVerdict(n [2]uint64) (detach, restart bool) {
	if n[0] < twinEvidence {
		return false, false
	}
	if n[1]*twinDirectShare <= n[0] {
		return true, false
	}
	return false, true
}

// decideTwins detaches the twin groups of t's driver libraries that its
// calls show redundant, and starts a new window for those they do not.
func (s *Session) decideTwins(t *target) {
	var gone []link.Link
	s.mu.Lock()
	counts := s.twinCalls[t.pid]
	for g, n := range counts {
		if n == nil {
			continue
		}
		detach, restart := twinVerdict(*n)
		if restart {
			s.cfg.Log.Debug("driver probes kept for now: calls made straight to the driver", "pid", t.pid, "calls", g, "runtime", n[0], "straight to the driver", n[1])
			*n = [2]uint64{}
		}
		if !detach {
			continue
		}
		for _, l := range t.libs {
			gone = append(gone, l.twins[g]...)
			delete(l.twins, g)
		}
		s.cfg.Log.Info("driver probes detached: the CUDA runtime's probes time these calls", "pid", t.pid, "calls", g, "runtime", n[0], "straight to the driver", n[1])
		counts[g] = nil
	}
	s.mu.Unlock()
	closeLinks(gone)
}

// countTwins counts the call events of a batch for their processes' twin
// decisions, and makes the decisions due.
func (s *Session) countTwins(batch []events.Event) {
	s.mu.Lock()
	// The processes with a group still undecided: once all are decided
	// (the usual state), a batch costs nothing here.
	var counting map[int]twinCounts
	for pid, c := range s.twinCalls {
		for _, n := range c {
			if n != nil {
				if counting == nil {
					counting = map[int]twinCounts{}
				}
				counting[pid] = c
				break
			}
		}
	}
	if counting == nil {
		s.mu.Unlock()
		return
	}
	seen := map[*target]bool{}
	for i := range batch {
		ev := &batch[i]
		if ev.Kind != events.KindCall {
			continue
		}
		c := counting[int(ev.PID)]
		if c == nil {
			continue
		}
		c.count(ev)
		if t := s.targets[int(ev.PID)]; t != nil {
			seen[t] = true
		}
	}
	s.mu.Unlock()
	for t := range seen {
		s.decideTwins(t)
	}
}
