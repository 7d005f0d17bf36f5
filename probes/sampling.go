package probes

import (
	"slices"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Counting every kernel launch puts a uprobe on each one: ~0.5-0.7 µs of
// trap on the launching thread. A PyTorch step launching a few hundred
// kernels pays more than 1% for that (measured on the H200 host), so once
// the steps are known launches are counted only part of the time: the
// launch probes are attached for On out of every Period. Calls stay probed
// all the time, but for device-to-device copies (below). Marker events tell
// the correlator when counts are complete.
type launchSampler struct {
	enabled    bool
	period, on time.Duration
	off        bool      // launch probes detached now
	since      time.Time // when the current phase began
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

// sampledCall says whether a call probe of a library of layer is attached
// with the launch probes, launch counting being on.
func sampledCall(p Probe, layer cudaapi.Layer) bool {
	return layer == cudaapi.LayerDriver && p.API.Class == cudaapi.ClassCopy && p.API.Dir == cudaapi.DirDtoD
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

// attachSampled attaches a library's probes that go with the launch
// probes.
func (s *Session) attachSampled(pid int, lp LibraryPlan) ([]link.Link, error) {
	_, sampled := splitSampled(lp, s.cfg.Launches)
	return attachPrograms(s.objs, pid, sampled, slices.Concat([]Program{ProgLaunch}, callPrograms)...)
}

// SampleLaunches starts counting pid's launches only on of every period;
// on >= period keeps counting every launch. A process's launch probes are
// attached in full until this is called for it: finding its step boundary
// needs them, so one process of a job (an engine) finding its steps must
// not thin out the launches of another (a rank still loading its model).
func (s *Session) SampleLaunches(pid int, period, on time.Duration) {
	if on >= period || !s.cfg.Launches {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.targets[pid]; t != nil {
		t.sampler = launchSampler{enabled: true, period: period, on: on, since: time.Now()}
	}
}

// launchesOn reports whether t's launches are being counted now.
func (s *Session) launchesOn(t *target) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Launches && !t.sampler.off
}

// sampleLaunches switches the targets' launch probes at their phase ends
// and returns the marker events that say so, one a switched target.
func (s *Session) sampleLaunches(now time.Time) []events.Event {
	type switched struct {
		pid  int
		off  bool // probes going off (else on)
		libs []*attachedLib
	}
	var due []switched
	s.mu.Lock()
	for _, t := range s.targets {
		sp := &t.sampler
		phase := sp.on
		if sp.off {
			phase = sp.period - sp.on
		}
		if !sp.enabled || t.exited || now.Sub(sp.since) < phase {
			continue
		}
		sp.since, sp.off = now, !sp.off
		sw := switched{pid: t.pid, off: sp.off}
		for _, l := range t.libs {
			sw.libs = append(sw.libs, l)
		}
		due = append(due, sw)
	}
	s.mu.Unlock()
	var marks []events.Event
	for _, sw := range due {
		marks = append(marks, s.switchLaunches(sw.pid, sw.off, sw.libs))
	}
	return marks
}

// switchLaunches attaches (or, off, detaches) a target's launch probes in
// libs and returns the marker.
func (s *Session) switchLaunches(pid int, off bool, libs []*attachedLib) events.Event {
	// The marker must bracket the probes conservatively: "off" is stamped
	// before the probes go, "on" once they are all in place, so that no
	// event inside an "on" stretch misses launches.
	mark := events.Event{Kind: events.KindLaunchProbes, PID: uint32(pid)}
	if off {
		mark.End = monotonicNow()
	}
	for _, l := range libs {
		if off {
			s.closer.close(l.launch, nil, func(err error) { s.cfg.Log.Warn("launch probes not all detached", "pid", pid, "err", err) })
			l.launch = nil
			continue
		}
		links, err := s.attachSampled(pid, l.plan)
		if err != nil {
			s.cfg.Log.Warn("reattach launch probes", "pid", pid, "file", l.plan.File.Path, "err", err)
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
