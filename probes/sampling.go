package probes

import (
	"errors"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/events"
)

// Counting every kernel launch puts a uprobe on each one: ~0.5-0.7 µs of
// trap on the launching thread. A PyTorch step launching a few hundred
// kernels pays more than 1% for that (measured on the H200 host), so once
// the steps are known launches are counted only part of the time: the
// launch probes are attached for On out of every Period. Calls stay probed
// all the time. Marker events tell the correlator when counts are complete.
type launchSampler struct {
	enabled    bool
	period, on time.Duration
	off        bool      // launch probes detached now
	since      time.Time // when the current phase began
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
	s.mu.Lock()
	var due []*target
	for _, t := range s.targets {
		sp := &t.sampler
		phase := sp.on
		if sp.off {
			phase = sp.period - sp.on
		}
		if sp.enabled && !t.exited && now.Sub(sp.since) >= phase {
			due = append(due, t)
		}
	}
	s.mu.Unlock()
	var marks []events.Event
	for _, t := range due {
		marks = append(marks, s.switchLaunches(t, now))
	}
	return marks
}

// switchLaunches attaches or detaches t's launch probes, the other of what
// they are, and returns the marker.
func (s *Session) switchLaunches(t *target, now time.Time) events.Event {
	s.mu.Lock()
	sp := &t.sampler
	sp.since = now
	sp.off = !sp.off
	off := sp.off
	libs := make([]*attachedLib, 0, len(t.libs))
	for _, l := range t.libs {
		libs = append(libs, l)
	}
	s.mu.Unlock()
	// The marker must bracket the probes conservatively: "off" is stamped
	// before the probes go, "on" once they are all in place, so that no
	// event inside an "on" stretch misses launches.
	mark := events.Event{Kind: events.KindLaunchProbes, PID: uint32(t.pid)}
	if off {
		mark.End = monotonicNow()
	}
	for _, l := range libs {
		if off {
			closeLinks(l.launch)
			l.launch = nil
			continue
		}
		links, err := attachPrograms(s.objs, t.pid, l.plan, ProgLaunch)
		if err != nil {
			s.cfg.Log.Warn("reattach launch probes", "pid", t.pid, "file", l.plan.File.Path, "err", err)
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

func closeLinks(links []link.Link) error {
	var errs []error
	for _, l := range links {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}
