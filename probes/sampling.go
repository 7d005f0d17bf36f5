package probes

import (
	"slices"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Counting every kernel launch puts a uprobe on each one: ~0.9 µs of trap
// and program on the launching thread. A PyTorch step launching a few
// hundred kernels pays more than 1% for that (measured on the H200 host), so once
// the steps are known launches are counted only part of the time: the
// launch probes are attached for On out of every Period. Calls stay probed
// all the time, but for device-to-device copies (below). Marker events tell
// the correlator when counts are complete.
type launchSampler struct {
	enabled    bool
	period, on time.Duration
	off        bool      // launch probes detached now
	since      time.Time // when the current phase began
	// waits: the Python wait probes go with the launch probes (below).
	waits bool
	// learnWaits: all of them go with the launch probes while the steps
	// are learned (LearnLaunches).
	learnWaits bool
	// cpuOnly: a process with no CUDA library whose Python wait probes
	// alone are sampled (cpuonly.go); its launch probes, once it loads
	// CUDA, are attached at once.
	cpuOnly bool
	// learning: the process's steps are not found yet (LearnLaunches):
	// each on phase is twice the last, its period with it, until they are.
	learning bool
	// ending: the sampler stops once the probes are attached (at once if
	// they are): every launch is counted from then on.
	ending bool
}

// Device-to-device copies at the driver are probed with the launches, part
// of the time once steps are found: they are no phase of a step (the host
// never waits for one on a stream), and DDP's gradient buckets make ~140 a
// step on the autograd thread of each H200 rank, the largest share of its
// probe traps. A step's device-to-device bytes are then complete only where
// its launches are (Step.LaunchesCounted). A job whose step boundary is a
// device-to-device copy keeps every launch counted (the caller does not
// sample it). With launch counting off (--no-launches) they stay with the
// other calls.

// Kernel lookups (cuKernelGetFunction) name launched kernels, and torch's
// runtime makes one before many launches (~17 a step on the autograd
// thread of each H200 rank): they go with the launch probes they name.

// sampledCall says whether a call probe of a library of layer is attached
// with the launch probes, launch counting being on.
func sampledCall(p Probe, layer cudaapi.Layer) bool {
	if layer != cudaapi.LayerDriver {
		return false
	}
	a := p.API
	return a.Class == cudaapi.ClassCopy && a.Dir == cudaapi.DirDtoD ||
		a.Class == cudaapi.ClassKernelName && a.Name == "cuKernelGetFunction"
}

// splitSampled separates the probes attached with the launch probes
// (launches, and sampled calls while launches are counted) from the rest.
func splitSampled(lp LibraryPlan, launches bool) (calls, sampled LibraryPlan) {
	calls, sampled = lp, lp
	calls.Probes, sampled.Probes = nil, nil
	for _, p := range lp.Probes {
		switch {
		case slices.Contains(p.Programs(), ProgLaunch), launches && sampledCall(p, lp.Layer):
			sampled.Probes = append(sampled.Probes, p)
		default:
			calls.Probes = append(calls.Probes, p)
		}
	}
	return calls, sampled
}

// Sampling attaches probes part of the time, process by process: a
// process's launch probes once its steps are found (SampleLaunches), its
// Python wait probes with them but for those its steps need
// (SamplePythonWaits), and the wait probes of a process that loads no
// CUDA (cpuonly.go). Its per-process state is the target's sampler and
// Python links, under mu.
type Sampling struct{ *core }

func (m *Sampling) observe([]events.Event) {}

func (m *Sampling) forget(int) {}

// tick switches the probes whose phase is over, with the markers that
// say so.
func (m *Sampling) tick(now time.Time) {
	m.sampleCPUOnly(now)
	if marks := m.switchDue(now); len(marks) > 0 {
		m.addMarks(marks...)
	}
}

// attachSampled attaches a library's probes that go with the launch
// probes.
func (m *Sampling) attachSampled(pid int, lp LibraryPlan) ([]link.Link, error) {
	_, sampled := splitSampled(lp, m.cfg.Launches)
	return attachPrograms(m.objs, pid, sampled, slices.Concat([]Program{ProgLaunch}, callPrograms)...)
}

// SampleLaunches starts counting pid's launches only on of every period
// once its steps are found; on >= period counts every launch from then
// on. A process's launch probes are attached in full until this or
// LearnLaunches is called for it, so one process of a job (an engine)
// finding its steps does not thin out the launches of another (a rank
// still loading its model).
func (m *Sampling) SampleLaunches(pid int, period, on time.Duration) {
	if !m.cfg.Launches {
		return
	}
	m.mu.Lock()
	t := m.targets[pid]
	var learnWaits bool
	switch {
	case t == nil:
	case on >= period:
		// Its boundary needs every launch (a device-to-device copy): a
		// learning sampler ends with its launches attached.
		if t.sampler.learning {
			learnWaits = t.sampler.learnWaits
			t.sampler.learning, t.sampler.learnWaits, t.sampler.ending = false, false, true
		}
	case t.sampler.learning:
		// The phase it is in goes on; those after are the steady ones.
		learnWaits = t.sampler.learnWaits
		t.sampler.learning, t.sampler.learnWaits, t.sampler.period, t.sampler.on = false, false, period, on
	default:
		t.sampler = launchSampler{enabled: true, period: period, on: on, since: time.Now()}
	}
	m.mu.Unlock()
	if learnWaits {
		m.resumeWaitsMarked(t)
	}
}

// LearnLaunches counts pid's launches only on of every period while its
// step boundary is still being learned, from now: the on phase it is in
// (the probes have been attached since pid's first launch) ends at once.
// Each cycle that passes without SampleLaunches doubles the phases, the
// period with them, up to maxLaunchOn: a loop of steps longer than a
// phase gets whole ones counted in a later one. On >= period keeps
// every launch counted; so does a process already sampled.
//
// The boundary is found from the counted stretches (correlate's learn),
// so what the learning costs is the duty the caller picks: on a
// launch-bound loop (~100k launches a second, FACTS.md §3) every launch
// probed costs ~6% of the step rate, for the seconds it took to find the
// steps (issue 29: ~3 s an attach).
//
// Its Python wait probes go with the launch probes while it learns, all
// of them: what the learning costs is then the duty for them too (on the
// H200's launch-bound loop `--no-launches`, which keeps them and the
// driver's kernel lookups attached throughout, cost ~4-5% more than the
// default: docs/benchmark.md, 2026-12-03), and the learning reads waits
// only from the counted stretches. Once the boundary is found
// (SampleLaunches) they are all attached again until its steps say which
// it needs (SamplePythonWaits): those steps must have every wait probed.
func (m *Sampling) LearnLaunches(pid int, period, on time.Duration) {
	if on >= period || !m.cfg.Launches {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.targets[pid]; t != nil && !t.sampler.enabled {
		now := time.Now()
		t.sampler = launchSampler{enabled: true, learning: true, period: period, on: on, since: now.Add(-on),
			learnWaits: t.pyLinks != nil}
		m.cfg.Log.Debug("launches counted part of the time while the steps are learned", "pid", pid, "on", on, "period", period,
			"python waits too", t.sampler.learnWaits)
	}
}

// Steps are counted only where the launch probes were attached all
// through them, so an on phase shorter than a step counts none, and one
// must last two steps to hold a whole one wherever it begins. A loop of
// 1.5 s steps would never have its launches counted after its boundary
// was found. FitLaunchPhases lengthens the phases to phasePerStep steps,
// their period with them, so that the share of the time counted (the
// duty) stays as it was.
const (
	phasePerStep = 2.5
	maxLaunchOn  = 2 * time.Minute
)

// fit lengthens the sampler's on phase to hold whole steps of step,
// keeping its duty; false if it holds them already (phases only grow: a
// longer phase at the same duty costs no more).
func (sp *launchSampler) fit(step time.Duration) bool {
	on := min(time.Duration(phasePerStep*float64(step)), maxLaunchOn)
	if !sp.enabled || sp.cpuOnly || on <= sp.on {
		return false
	}
	sp.period = time.Duration(float64(sp.period) * float64(on) / float64(sp.on))
	sp.on = on
	return true
}

// grow doubles a learning sampler's phases, keeping its duty.
func (sp *launchSampler) grow() {
	on := min(2*sp.on, maxLaunchOn)
	sp.period = time.Duration(float64(sp.period) * float64(on) / float64(sp.on))
	sp.on = on
}

// FitLaunchPhases tells pid's launch sampling how long its steps take
// (their median wall time): its on phases grow to hold whole ones.
func (m *Sampling) FitLaunchPhases(pid int, step time.Duration) {
	m.mu.Lock()
	t := m.targets[pid]
	if t == nil || !t.sampler.fit(step) {
		m.mu.Unlock()
		return
	}
	on, period := t.sampler.on, t.sampler.period
	m.mu.Unlock()
	m.cfg.Log.Debug("launch phases lengthened to hold whole steps", "pid", pid, "step", step, "on", on, "period", period)
}

// launchesOn reports whether t's launches are being counted now.
func (m *Sampling) launchesOn(t *target) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.Launches && (!t.sampler.off || t.sampler.cpuOnly)
}

// switchDue switches the targets' launch probes at their phase ends
// and returns the marker events that say so, one a switched target.
func (m *Sampling) switchDue(now time.Time) []events.Event {
	type switched struct {
		t     *target
		off   bool // probes going off (else on)
		waits bool // the Python wait probes too
		libs  []*attachedLib
	}
	var due []switched
	m.mu.Lock()
	for _, t := range m.targets {
		sp := &t.sampler
		phase := sp.on
		if sp.off {
			phase = sp.period - sp.on
		}
		var sw switched
		switch {
		case sp.ending:
			// Switched on for good, where they are off.
			off := sp.off
			*sp = launchSampler{}
			if !off || t.exited {
				continue
			}
			sw = switched{t: t}
		case !sp.enabled || t.exited || now.Sub(sp.since) < phase:
			continue
		default:
			sp.since, sp.off = now, !sp.off
			if sp.learning && !sp.off {
				sp.grow()
			}
			sw = switched{t: t, off: sp.off, waits: sp.waits || sp.learnWaits}
		}
		for _, l := range t.libs {
			sw.libs = append(sw.libs, l)
		}
		due = append(due, sw)
	}
	m.mu.Unlock()
	var marks []events.Event
	for _, sw := range due {
		marks = append(marks, m.switchLaunches(sw.t, sw.off, sw.waits, sw.libs))
	}
	return marks
}

// switchLaunches attaches (or, off, detaches) a target's launch probes in
// libs, and with waits its Python wait probes, and returns the marker.
func (m *Sampling) switchLaunches(t *target, off, waits bool, libs []*attachedLib) events.Event {
	pid := t.pid
	// The marker must bracket the probes conservatively: "off" is stamped
	// before the probes go, "on" once they are all in place, so that no
	// event inside an "on" stretch misses launches.
	mark := events.Event{Kind: events.KindLaunchProbes, PID: uint32(pid)}
	if waits {
		mark.Args[0] = 1
	}
	if off {
		mark.End = monotonicNow()
	}
	switch {
	case waits && off:
		m.pausePythonWaits(t)
	case waits:
		m.resumePythonWaits(t)
	}
	for _, l := range libs {
		if off {
			m.closer.close(l.launch, nil, func(err error) { m.cfg.Log.Warn("launch probes not all detached", "pid", pid, "err", err) })
			l.launch = nil
			continue
		}
		links, err := m.attachSampled(pid, l.plan)
		if err != nil {
			m.warnUnlessExited(t, "reattach launch probes", err, "pid", pid, "file", l.plan.File.Path)
			continue
		}
		l.launch = links
	}
	if !off {
		mark.End, mark.Out = monotonicNow(), 1
	}
	mark.Start = mark.End
	return mark
}

// monotonicNow reads CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
func monotonicNow() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
