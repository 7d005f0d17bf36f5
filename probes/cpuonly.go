package probes

import (
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// A Python process that has loaded no CUDA library (a CPU-only producer,
// a DataLoader worker) has no steps of its own: its waits give no step's
// time, only the summary's tables and where a sample pool is. Yet on the
// data path its probes cost the trainer: an engine process handing out
// shared tensors answers each get on its resource-sharer thread, which
// traps in reads, writes and the GIL (+0.2 ms a step of four gets on
// the dev VM, testdata/python/fd_handoff.py). So once such a process has
// been attached Config.CPUOnlyAfter without loading CUDA, its Python wait
// probes are attached only Config.CPUOnlyOn of every CPUOnlyPeriod, like
// the launch probes of a process whose steps are found (sampling.go).
// Loading CUDA ends it: from then on its steps may be found, and need
// every wait. A job naming Python functions of its own (--probe) may time
// steps without CUDA, and keeps them all.

// sampleCPUOnly starts sampling the Python wait probes of the targets
// CPU-only for long enough.
func (m *Sampling) sampleCPUOnly(now time.Time) {
	if m.cfg.CPUOnlyAfter <= 0 || m.cfg.CPUOnlyOn >= m.cfg.CPUOnlyPeriod {
		return
	}
	for _, u := range m.cfg.User {
		if !u.Default {
			return
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.targets {
		if t.cudaReady || t.exited || t.sampler.enabled || t.pyLinks == nil || now.Sub(t.attached) < m.cfg.CPUOnlyAfter {
			continue
		}
		t.sampler = launchSampler{enabled: true, period: m.cfg.CPUOnlyPeriod, on: m.cfg.CPUOnlyOn, since: now,
			waits: true, cpuOnly: true}
		t.pyKeep = nil
		m.cfg.Log.Debug("Python wait probes part of the time: no CUDA library loaded", "pid", t.pid)
	}
}

// endCPUOnly attaches t's Python wait probes for good if they were
// thinned for want of CUDA (scan calls it as it attaches a CUDA library),
// with the marker that says so.
func (m *Sampling) endCPUOnly(t *target) {
	m.mu.Lock()
	if !t.sampler.cpuOnly {
		m.mu.Unlock()
		return
	}
	t.sampler = launchSampler{}
	m.mu.Unlock()
	m.resumePythonWaits(t)
	now := monotonicNow() // once they are in place
	m.mu.Lock()
	m.addMarksLocked(events.Event{Kind: events.KindLaunchProbes, PID: uint32(t.pid), Start: now, End: now, Out: 1})
	m.mu.Unlock()
	m.cfg.Log.Debug("Python wait probes attached for good: CUDA loaded", "pid", t.pid)
}

// cpuOnly says whether pid's wait probes are thinned as a CPU-only
// process's: it has loaded no CUDA for Config.CPUOnlyAfter (cpuonly.go).
func (m *Sampling) cpuOnly(pid int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.targets[pid]
	return t != nil && t.sampler.enabled && t.sampler.cpuOnly
}
