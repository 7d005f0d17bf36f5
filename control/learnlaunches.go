package control

import (
	"fmt"
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// Until a process's step boundary is found its launches are all probed:
// the boundary is learned from the kernels launched between calls. On a
// launch-bound loop (~100k launches a second) that cost ~6% of the step
// rate for the ~3 s the learning took (issue 29), all of a 10 s look's
// cost, its Python wait probes and the driver's kernel lookups all
// attached too. So each process's launches and the waits and lookups it
// reports are measured over its first rateWindow, and where probing them
// all would cost more than Config.LearnBudget of its time (at
// LaunchProbeCost a launch, ReportCost a wait or lookup), they are all
// probed only a share of the time that costs about that
// (Probes.LearnLaunches: the wait probes and lookups go with the launch
// probes), and the boundary is learned from the stretches counted. A
// process probed little keeps everything probed, and is measured again
// each window: a job's launches grow once training starts.

// LaunchProbeCost is what one probed launch costs its thread: the trap of
// a count-only uprobe on a `push %rbp` first instruction on the GPU host
// (FACTS.md §2: 670 ns) and launch_entry's own run, which counts by
// kernel and reads the launch's site: 233-257 ns a run on the H200's
// launch-bound loop (`--probe-stats`, 2026-12-03, docs/benchmark.md).
// At 700 ns (the trap alone) the learning cost ~30% over its budget.
const LaunchProbeCost = 900 * time.Nanosecond

// ReportCost is what one Python wait or kernel lookup reported costs its
// thread at least: an entry and a return probe and a ring-buffer event on
// the GPU host (FACTS.md §2: 2,090 ns). Traps that report nothing (a wait
// too short to tell) are not seen, so this is a floor: on the H200's
// launch-bound loop the ~70-105 waits a second reported in the rate window
// (build 8ac6797, which priced waits alone) came to ~0.02% of its time,
// beside its launches' ~1.7-2.6%.
const ReportCost = 2100 * time.Nanosecond

// DefaultLearnBudget is the default Config.LearnBudget: issue 29's target
// for an attach's cost from its first second.
const DefaultLearnBudget = 0.005

// rateWindow is how long a process's launches are measured for at most,
// in event time: 0.5 s of a loop of ~300 launches a step holds ~140 of its
// steps, enough to propose its boundary. A window ends sooner once its
// probes have cost the learning budget of a second (Config.windowCost):
// every launch is probed while it lasts, and on the H200 host a
// launch-bound loop (~66k launches a second) paid ~23 ms for a whole
// window, about half of what its first second lost (docs/benchmark.md,
// 2026-12-03).
const rateWindow = uint64(500 * time.Millisecond)

// minRateSpan is the shortest window a rate is given for: enough calls to
// average over a loop's steps of a few milliseconds.
const minRateSpan = uint64(20 * time.Millisecond)

// windowCost is the probes' cost that ends a rate window early: what
// Config.LearnBudget of a second is (5 ms at the default 0.5%, ~5,600
// launches). 0 leaves windows their whole length.
func (c Config) windowCost() time.Duration {
	if c.LearnBudget <= 0 || c.LearnBudget >= 1 {
		return 0
	}
	return time.Duration(c.LearnBudget * float64(time.Second))
}

// probeRate is how often a process's launch probes run and its wait and
// lookup probes report, a second.
type probeRate struct{ launches, reports float64 }

// cost is the share of its time probing them all costs.
func (r probeRate) cost() float64 {
	return r.launches*LaunchProbeCost.Seconds() + r.reports*ReportCost.Seconds()
}

// launchMeter measures a process's launch and report rates from the
// launch counts its calls carry and the waits and lookups it reports,
// until its learning is sampled.
type launchMeter struct {
	since    uint64 // when the window began (the first call carrying launches)
	launches uint64
	reports  uint64 // Python waits, GIL waits, writes and kernel lookups reported
	done     bool   // its learning was sampled, or its boundary found
	sampled  bool   // Probes.LearnLaunches was called for it
	told     string // what it was told, in words
}

// isPhasedReport says whether e was reported by a probe that goes with
// the launch probes while the steps are learned: a Python wait probe's,
// or a kernel lookup's (not a name gpuprof read from a launch's site).
func isPhasedReport(e *events.Event) bool {
	switch e.Kind {
	case events.KindPyWait, events.KindPyGIL, events.KindWrite:
		return true
	case events.KindKernelName:
		return e.Args[events.KernelNameArg] != events.KernelNameFromSite
	}
	return false
}

// add counts e and returns the window's rates once it is over: rateWindow
// long, or its probes' cost maxCost (if not 0) over at least minRateSpan.
// Only a call ends a window, and a window ends with it.
func (m *launchMeter) add(e *events.Event, maxCost time.Duration) (probeRate, bool) {
	if m.done {
		return probeRate{}, false
	}
	if isPhasedReport(e) {
		if m.since != 0 && e.End > m.since {
			m.reports++
		}
		return probeRate{}, false
	}
	n := uint64(e.Launches + e.GraphLaunches)
	if e.Kind != events.KindCall || n == 0 && m.since == 0 {
		return probeRate{}, false
	}
	if m.since == 0 {
		// The launches this call carries were made before it: the window
		// begins at it, and they are not in it.
		m.since = e.End
		return probeRate{}, false
	}
	m.launches += n
	span := e.End - m.since
	cost := time.Duration(m.launches)*LaunchProbeCost + time.Duration(m.reports)*ReportCost
	enough := maxCost > 0 && cost >= maxCost && span >= minRateSpan
	if span < rateWindow && !enough {
		return probeRate{}, false
	}
	secs := float64(span) / 1e9
	r := probeRate{launches: float64(m.launches) / secs, reports: float64(m.reports) / secs}
	m.since, m.launches, m.reports = e.End, 0, 0
	return r, true
}

// learnCycle is the cycle of launch counting (the wait probes with it),
// while the steps are learned, of a process whose probes report at rate
// r: the share of the time that costs Config.LearnBudget, no less than
// LaunchDuty; false where everything is to be probed.
func (c Config) learnCycle(r probeRate) (period, on time.Duration, sample bool) {
	cost := r.cost()
	if c.LaunchDuty >= 1 || c.LearnBudget >= 1 || cost <= c.LearnBudget || c.LaunchOn <= 0 {
		return 0, 0, false
	}
	duty := max(c.LearnBudget/cost, c.LaunchDuty)
	if duty >= 1 {
		return 0, 0, false
	}
	return time.Duration(float64(c.LaunchOn) / duty), c.LaunchOn, true
}

// meterLaunches measures pid's launch and wait rates while its boundary
// is not found, and thins out its launch and wait probes where they cost
// too much.
func (l *Loop) meterLaunches(pid uint32, p *proc, e *events.Event) {
	if p.boundary.TID != 0 {
		p.meter.done = true
		return
	}
	r, ok := p.meter.add(e, l.cfg.windowCost())
	if !ok {
		return
	}
	period, on, sample := l.cfg.learnCycle(r)
	if !sample {
		return
	}
	p.meter.done, p.meter.sampled = true, true
	rates := fmt.Sprintf("~%.0f launches and ~%.0f Python waits and kernel lookups a second, each probed would cost ~%.1f%% of its time", r.launches, r.reports, 100*r.cost())
	p.meter.told = fmt.Sprintf("%v in every %v, the phases doubling each cycle, at %s", on, period.Round(100*time.Millisecond), rates)
	l.probes.LearnLaunches(int(pid), period, on)
	l.out.Note(fmt.Sprintf("PID %d: %s: launches, waits and lookups probed %v in every %v, the phases doubling each cycle, while its steps are learned",
		pid, rates, on, period.Round(100*time.Millisecond)))
}

// LearnSampling says how pid's launches were counted while its steps were
// learned, where not all were; "" where they were.
func (l *Loop) LearnSampling(pid uint32) string {
	if p := l.procs[pid]; p != nil {
		return p.meter.told
	}
	return ""
}
