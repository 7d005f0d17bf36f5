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
// cost. So each process's launch rate is measured over its first
// rateWindow of launches, and where probing every launch would cost more
// than Config.LearnBudget of its time (at LaunchProbeCost a launch), its
// launches are counted only a share of the time that costs about that
// (Probes.LearnLaunches), and the boundary is learned from the stretches
// counted. A process launching little keeps every launch counted, and is
// measured again each window: a job's launches grow once training starts.

// LaunchProbeCost is what one probed launch costs its thread: a
// count-only uprobe on a `push %rbp` first instruction on the GPU host
// (FACTS.md §2: 670 ns).
const LaunchProbeCost = 700 * time.Nanosecond

// DefaultLearnBudget is the default Config.LearnBudget: issue 29's target
// for an attach's cost from its first second.
const DefaultLearnBudget = 0.005

// rateWindow is how long a process's launches are measured for at most,
// in event time: 0.5 s of a loop of ~300 launches a step holds ~140 of its
// steps, enough to propose its boundary. A window ends sooner once its
// launches have cost the learning budget of a second (Config.
// rateLaunches): every launch is probed while it lasts, and on the H200
// host a launch-bound loop (~66k launches a second) paid ~23 ms for a
// whole window, about half of what its first second lost (docs/
// benchmark.md, 2026-12-03).
const rateWindow = uint64(500 * time.Millisecond)

// minRateSpan is the shortest window a rate is given for: enough calls to
// average over a loop's steps of a few milliseconds.
const minRateSpan = uint64(20 * time.Millisecond)

// rateLaunches is the launch count that ends a rate window early: what
// probing every launch costs in Config.LearnBudget of a second (~7,100
// launches at the default 0.5%). 0 leaves windows their whole length.
func (c Config) rateLaunches() uint64 {
	if c.LearnBudget <= 0 || c.LearnBudget >= 1 {
		return 0
	}
	return uint64(c.LearnBudget * float64(time.Second) / float64(LaunchProbeCost))
}

// launchMeter measures a process's launch rate from the launch counts its
// calls carry, until its learning is sampled.
type launchMeter struct {
	since    uint64 // when the window began (the first call carrying launches)
	launches uint64
	done     bool   // its learning was sampled, or its boundary found
	sampled  bool   // Probes.LearnLaunches was called for it
	told     string // what it was told, in words
}

// add counts e and returns the window's launch rate (a second) once it is
// over: rateWindow long, or maxLaunches launches (if not 0) over at least
// minRateSpan. A window ends with it.
func (m *launchMeter) add(e *events.Event, maxLaunches uint64) (float64, bool) {
	n := uint64(e.Launches + e.GraphLaunches)
	if m.done || e.Kind != events.KindCall || n == 0 && m.since == 0 {
		return 0, false
	}
	if m.since == 0 {
		// The launches this call carries were made before it: the window
		// begins at it, and they are not in it.
		m.since = e.End
		return 0, false
	}
	m.launches += n
	span := e.End - m.since
	enough := maxLaunches > 0 && m.launches >= maxLaunches && span >= minRateSpan
	if span < rateWindow && !enough {
		return 0, false
	}
	rate := float64(m.launches) / (float64(span) / 1e9)
	m.since, m.launches = e.End, 0
	return rate, true
}

// learnCycle is the cycle of launch counting, while the steps are
// learned, of a process launching rate kernels a second: the share of the
// time that costs Config.LearnBudget, no less than LaunchDuty; false
// where every launch is to be counted.
func (c Config) learnCycle(rate float64) (period, on time.Duration, sample bool) {
	cost := rate * LaunchProbeCost.Seconds()
	if c.LaunchDuty >= 1 || c.LearnBudget >= 1 || cost <= c.LearnBudget || c.LaunchOn <= 0 {
		return 0, 0, false
	}
	duty := max(c.LearnBudget/cost, c.LaunchDuty)
	if duty >= 1 {
		return 0, 0, false
	}
	return time.Duration(float64(c.LaunchOn) / duty), c.LaunchOn, true
}

// meterLaunches measures pid's launch rate while its boundary is not
// found, and thins out its launch probes where they cost too much.
func (l *Loop) meterLaunches(pid uint32, p *proc, e *events.Event) {
	if p.boundary.TID != 0 {
		p.meter.done = true
		return
	}
	rate, ok := p.meter.add(e, l.cfg.rateLaunches())
	if !ok {
		return
	}
	period, on, sample := l.cfg.learnCycle(rate)
	if !sample {
		return
	}
	p.meter.done, p.meter.sampled = true, true
	p.meter.told = fmt.Sprintf("%v in every %v, the phases doubling each cycle, at ~%.0f launches a second (~%.1f%% of its time had each been probed)",
		on, period.Round(100*time.Millisecond), rate, 100*rate*LaunchProbeCost.Seconds())
	l.probes.LearnLaunches(int(pid), period, on)
	l.out.Note(fmt.Sprintf("PID %d: ~%.0f launches a second, each probed would cost ~%.1f%% of its time: counted %v in every %v, the phases doubling each cycle, while its steps are learned",
		pid, rate, 100*rate*LaunchProbeCost.Seconds(), on, period.Round(100*time.Millisecond)))
}

// LearnSampling says how pid's launches were counted while its steps were
// learned, where not all were; "" where they were.
func (l *Loop) LearnSampling(pid uint32) string {
	if p := l.procs[pid]; p != nil {
		return p.meter.told
	}
	return ""
}
