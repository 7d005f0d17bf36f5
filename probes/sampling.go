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

// SampleLaunches starts counting launches only on of every period; on >=
// period keeps counting every launch. Launch probes are attached in full
// until this is called: finding the step boundary needs them.
func (s *Session) SampleLaunches(period, on time.Duration) {
	if on >= period || !s.cfg.Launches {
		return
	}
	s.sampler = launchSampler{enabled: true, period: period, on: on, since: time.Now()}
}

func (s *Session) launchesOn() bool { return s.cfg.Launches && !s.sampler.off }

// sampleLaunches switches the launch probes at phase ends and returns the
// marker event that says so.
func (s *Session) sampleLaunches(now time.Time) (events.Event, bool) {
	sp := &s.sampler
	if !sp.enabled {
		return events.Event{}, false
	}
	phase := sp.on
	if sp.off {
		phase = sp.period - sp.on
	}
	if now.Sub(sp.since) < phase {
		return events.Event{}, false
	}
	sp.since = now
	sp.off = !sp.off
	s.mu.Lock()
	libs := []*attachedLib{}
	pids := []int{}
	for _, t := range s.targets {
		for _, l := range t.libs {
			libs = append(libs, l)
			pids = append(pids, t.pid)
		}
	}
	s.mu.Unlock()
	// The marker must bracket the probes conservatively: "off" is stamped
	// before the probes go, "on" once they are all in place, so that no
	// event inside an "on" stretch misses launches.
	mark := events.Event{Kind: events.KindLaunchProbes}
	if sp.off {
		mark.End = monotonicNow()
	}
	for i, l := range libs {
		if sp.off {
			closeLinks(l.launch)
			l.launch = nil
			continue
		}
		links, err := attachPrograms(s.objs, pids[i], l.plan, ProgLaunch)
		if err != nil {
			s.cfg.Log.Warn("reattach launch probes", "file", l.plan.File.Path, "err", err)
			continue
		}
		l.launch = links
	}
	if !sp.off {
		mark.End, mark.Out = monotonicNow(), 1
	}
	mark.Start = mark.End
	return mark, true
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
