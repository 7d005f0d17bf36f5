package probes

import (
	"maps"
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// Python's wait probes can go with the launch probes (sampling.go) too.
// Waits inside a whole get (a multiprocessing queue's, timed by its
// watchpoints) are no part of a
// step's time but through the get: a training thread whose every wait
// sits inside one needs them only for what a get waited on inside (the
// descriptor from the engine, the pipe, the GIL) and the items taken, and
// on the H200 host they are ~100 traps a step a rank (reads, writes,
// recvmsg, and every thread's condition waits for the GIL). Other
// threads' waits are no part of any step's time at all: an engine's
// resource-sharer thread serving the ranks' descriptors traps in reads,
// writes and the GIL at each of their gets. So once the steps show which
// wait functions the step thread blocks in outside its gets (correlate.s
// WaitProbesNeeded), those stay attached, with the GIL's and the writes
// where needed, and the rest go with the launch probes. The markers then
// say so (Args[0] 1): a step's kinds of wait count as complete only where
// every wait probe was attached all through it.

// SamplePythonWaits makes pid's Python wait probes go with its launch
// probes, but for the wait functions its step thread blocks in outside its
// gets (keep, by WaitFunc's names), the GIL's with them, and the writes
// with writes: those stay attached. False where its launches are not
// sampled, or it has no Python wait probes.
//
// With the launch probes off now, the rest go at once, with a marker that
// says so. Left to the next switch off, they would stay for up to a whole
// period more (the on phase ahead comes first), and the needs take 16
// steps to be known: a loop slower than ~16 steps a second learns them
// after its first on phase of 1 s, and kept every wait probed for ~10 s
// more. Called where the switches are made (Run's sink), so that no
// switch comes between.
func (m *Sampling) SamplePythonWaits(pid int, keep []string, writes bool) bool {
	m.mu.Lock()
	t := m.targets[pid]
	if t == nil || !t.sampler.enabled || t.sampler.ending || t.sampler.waits || t.pyLinks == nil {
		m.mu.Unlock()
		return false
	}
	t.pyKeep = pyProbeSet{}
	addKept(t.pyKeep, keep, writes)
	t.sampler.waits = true
	off := t.sampler.off
	if off {
		// Stamped before the probes go, as switchLaunches stamps "off".
		now := monotonicNow()
		mark := events.Event{Kind: events.KindLaunchProbes, PID: uint32(pid), Start: now, End: now}
		mark.Args[0] = 1 // launches off, waits gated
		m.addMarksLocked(mark)
	}
	m.mu.Unlock()
	if off {
		m.pausePythonWaits(t)
	}
	return true
}

// KeepPythonWaits attaches pid's Python wait probes for good, where they
// went with its launch probes (a step needed one of those); false if they
// did not. The marker says the waits are probed from then on.
func (m *Sampling) KeepPythonWaits(pid int) bool {
	m.mu.Lock()
	t := m.targets[pid]
	if t == nil || !t.sampler.waits {
		m.mu.Unlock()
		return false
	}
	t.sampler.waits = false
	m.mu.Unlock()
	m.resumeWaitsMarked(t)
	return true
}

// resumeWaitsMarked attaches t's Python wait probes again (resumePython
// Waits), with the marker that says they are probed from then on, launch
// counting as it is: stamped once they are in place. SampleLaunches calls
// it where they went with the launch probes while the steps were learned
// (LearnLaunches): the steps found are to say which waits they need.
func (m *Sampling) resumeWaitsMarked(t *target) {
	m.resumePythonWaits(t)
	now := monotonicNow()
	m.mu.Lock()
	defer m.mu.Unlock()
	mark := events.Event{Kind: events.KindLaunchProbes, PID: uint32(t.pid), Start: now, End: now}
	if !t.sampler.off {
		mark.Out = 1
	}
	m.addMarksLocked(mark)
}

// KeepMorePythonWaits adds wait functions (keep, by WaitFunc's names, the
// GIL's with them) and the writes (with writes) to those pid keeps
// attached while the rest go with its launch probes: a step needed one of
// those paused. The rest still go: an engine's step thread that once
// blocked in a put it had not blocked in before would otherwise bring back
// every wait of the process for good, its resource-sharer thread's reads,
// writes and GIL included (~2,000 a second on the H200 host, in the path
// of every rank's get). False where its waits do not go with its launches.
func (m *Sampling) KeepMorePythonWaits(pid int, keep []string, writes bool) bool {
	m.mu.Lock()
	t := m.targets[pid]
	if t == nil || !t.sampler.waits || t.sampler.cpuOnly {
		m.mu.Unlock()
		return false
	}
	addKept(t.pyKeep, keep, writes)
	paused := t.pyLinks == nil
	m.mu.Unlock()
	if paused {
		m.attachKept(t) // else as the waits next pause
	}
	return true
}

// addKept adds to set the wait functions keep names, the GIL's with them
// (the tails of those waits), and the writes with writes.
func addKept(set pyProbeSet, keep []string, writes bool) {
	for _, name := range keep {
		set[name] = true
	}
	if len(keep) > 0 {
		set["gil"] = true
	}
	if writes {
		set["write"] = true
	}
}

// attachKept attaches those of t's kept wait probes not attached as kept
// yet; false if it could not.
func (m *Sampling) attachKept(t *target) bool {
	m.mu.Lock()
	add := pyProbeSet{}
	for name := range t.pyKeep {
		if !t.pyKeptNames[name] {
			add[name] = true
		}
	}
	m.mu.Unlock()
	if len(add) == 0 {
		return true
	}
	links, err := attachPython(m.objs, t.python, *t.sems, add, nil)
	if err != nil {
		m.warnUnlessExited(t, "attach the Python wait probes kept", err, "pid", t.pid)
		return false
	}
	m.mu.Lock()
	if t.exited || m.targets[t.pid] != t {
		m.mu.Unlock()
		closeLinks(links) // waits for the kernel: not under mu
		return false
	}
	if t.pyKeptNames == nil {
		t.pyKeptNames = pyProbeSet{}
	}
	for name := range add {
		t.pyKeptNames[name] = true
	}
	t.pyKept = append(t.pyKept, links...)
	m.mu.Unlock()
	return true
}

// pausePythonWaits detaches t's Python wait probes but those kept. It
// attaches the kept ones not attached apart yet first: for a moment both
// report them, which a step counts once (waits inside waits).
func (m *Sampling) pausePythonWaits(t *target) {
	if !m.attachKept(t) {
		return // all stay attached
	}
	m.mu.Lock()
	links := t.pyLinks
	t.pyLinks = nil
	m.mu.Unlock()
	began := time.Now()
	m.closer.close(links, func() {
		// at: on the events' clock, for telling which events came
		// while they were paused (the close runs in the background, for
		// a time the host's load decides).
		m.cfg.Log.Debug(logPaused, "pid", t.pid, "links", len(links), "took", time.Since(began), "at", monotonicNow())
	}, func(err error) { m.cfg.Log.Warn("Python wait probes not all detached", "pid", t.pid, "err", err) })
}

// The debug lines that say when a process's Python wait probes were
// paused and began to be attached again, with when on the events' clock.
const (
	logPaused   = "Python wait probes paused"
	logResuming = "Python wait probes being attached again"
)

// resumePythonWaits attaches t's Python wait probes again, but those kept
// attached; nothing if they are attached.
func (m *Sampling) resumePythonWaits(t *target) {
	m.mu.Lock()
	attached, except := t.pyLinks != nil, maps.Clone(t.pyKeptNames)
	m.mu.Unlock()
	if attached {
		return
	}
	// They report from now on, before the marker that says so (stamped
	// once all are in place).
	m.cfg.Log.Debug(logResuming, "pid", t.pid, "at", monotonicNow())
	links, err := attachPython(m.objs, t.python, *t.sems, nil, except)
	if err != nil {
		m.warnUnlessExited(t, "reattach Python wait probes", err, "pid", t.pid)
		return
	}
	m.mu.Lock()
	if t.exited || m.targets[t.pid] != t {
		m.mu.Unlock()
		closeLinks(links)
		return
	}
	t.pyLinks = links
	m.mu.Unlock()
}
