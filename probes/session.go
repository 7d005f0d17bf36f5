package probes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/pymem"
)

// Config configures a Session.
type Config struct {
	ProcRoot string        // "/proc" unless testing
	Poll     time.Duration // how often the ring buffer is drained
	Rescan   time.Duration // how often maps are re-read even without a loader notice
	// PyMinWait: Python lock waits shorter than this are not reported (an
	// uncontended handoff is no wait worth a frame walk).
	PyMinWait time.Duration
	// PoolInterval is how often the sample pools found are read (pool.go).
	PoolInterval time.Duration
	// CPUOnlyAfter: a Python process attached this long without loading
	// CUDA has its wait probes attached only CPUOnlyOn of every
	// CPUOnlyPeriod (cpuonly.go); 0: never.
	CPUOnlyAfter, CPUOnlyPeriod, CPUOnlyOn time.Duration
	// CountWaits counts the Python wait probes' hits by process and
	// function (Session.Objects().WaitCounts), for --probe-stats.
	CountWaits bool
	Options
	Log *slog.Logger
}

// DefaultConfig is what gpuprof attach uses.
func DefaultConfig() Config {
	return Config{ProcRoot: "/proc", Poll: 20 * time.Millisecond, Rescan: time.Second, PyMinWait: 50 * time.Microsecond,
		PoolInterval: 10 * time.Millisecond,
		Options:      Options{Launches: true}, Log: slog.Default()}
}

// Session holds the loaded BPF objects and everything attached to targets.
type Session struct {
	cfg    Config
	objs   *bpf.Objects
	reader *ringbuf.Reader
	drain  *drainer // reads reader, from the first Run on (drain.go)
	closer *backgroundCloser
	// pyPaused, where set (the tests), hears when a pause has closed the
	// last of a process's Python wait probes, on the events' clock: the
	// close runs in the background, for a time the host's load decides.
	pyPaused func(pid int, at uint64)

	mu           sync.Mutex
	targets      map[int]*target
	delivered    atomic.Uint64 // events handed to the sink (Stats, from any goroutine)
	closed       bool
	lastChildren time.Time
	follow       []int      // processes to attach to at the next poll (Follow)
	marks        []heldMark // launch-probe markers and pool readings for a coming batch
	pools        *poolWatch
	// twinCalls counts, by process, the calls deciding whether its
	// driver twins go (twins.go); under mu.
	twinCalls map[int]twinCounts
	// twinLayers are the twin groups decided, by process (twins.go);
	// under mu.
	twinLayers map[int]map[string]twinLayer
	// poolLearning: Python processes whose short waits are reported until
	// their pool is seen, until when (poollearn.go); under mu.
	poolLearning map[int]time.Time
	poolLearners atomic.Int32 // len(poolLearning), read with no lock
}

type target struct {
	python    *PythonPlan             // the interpreter, once found
	sems      *SemaphorePlan          // libc's semaphore waits, once found
	pyDone    bool                    // Python wait probes attached (or not to be)
	pyMu      sync.Mutex              // pyCalls and waitedIn: attach and the event loop both reach them
	pyCalls   map[uint16]*pyCallWatch // Python functions the user named, by probe (pycall.go)
	waitedIn  map[uint64]map[int]bool // threads seen waiting in each code object (pycall.go)
	pyMem     *pymem.Reader
	pid       int
	pidfd     int
	libs      map[string]*attachedLib // by file key
	lastScan  time.Time
	exited    bool
	cudaReady bool
	attached  time.Time
	sampler   launchSampler // launch counting part of the time (sampling.go)
	// pyLinks are the Python wait probes (libc's waits, the GIL, the
	// interpreter's reads and writes), nil while paused; once they go with
	// the launch probes, those the step thread needs outside its gets
	// (pyKeep) are pyKept, attached all the time (sampling.go);
	// pyKeptNames are those pyKept holds so far.
	pyLinks, pyKept     []link.Link
	pyKeep, pyKeptNames pyProbeSet
}

type attachedLib struct {
	plan   LibraryPlan
	links  []link.Link            // calls and the loader hook
	launch []link.Link            // launch counting and sampled calls (sampling.go), attached only while launches are counted
	twins  map[string][]link.Link // calls the runtime and driver share, by group, until decided (twins.go)
}

// close detaches everything attached in the library.
func (l *attachedLib) close() error {
	return closeLinks(l.take())
}

// take returns every link attached in the library, and forgets them.
func (l *attachedLib) take() []link.Link {
	all := slices.Concat(l.links, l.launch)
	for _, tl := range l.twins {
		all = append(all, tl...)
	}
	l.links, l.launch, l.twins = nil, nil, nil
	return all
}

// Stats counts what was lost or odd on the way from the probes.
type Stats struct {
	RingbufFull   uint64 // events dropped because the ring buffer was full
	KernelMapFull uint64 // launches not counted per kernel: too many kernels
	StaleCalls    uint64 // calls whose return was never seen
	NoThreadState uint64 // probe hits with no per-thread state
	BadRecords    uint64 // records the reader could not decode
	Events        uint64 // events delivered
}

// Lost is the number of events or counts that did not make it.
func (s Stats) Lost() uint64 { return s.RingbufFull + s.BadRecords }

// Open loads the BPF programs and maps and opens the ring buffer.
func Open(cfg Config) (*Session, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	size, err := bpf.RingbufSize()
	if err != nil {
		return nil, err
	}
	objs, err := bpf.Load(bpf.Settings{WakeupBytes: uint64(size) / 4, PyMinWaitNS: uint64(cfg.PyMinWait),
		PyLearnWaitNS: uint64(min(poolLearnWait, cfg.PyMinWait)),
		PyReadCookie:  uint64(readCookie), CountWaits: cfg.CountWaits})
	if err != nil {
		return nil, err
	}
	rd, err := ringbuf.NewReader(objs.Events)
	if err != nil {
		objs.Close()
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	sess := &Session{cfg: cfg, objs: objs, reader: rd, closer: newBackgroundCloser(), targets: map[int]*target{}, twinCalls: map[int]twinCounts{},
		twinLayers: map[int]map[string]twinLayer{}}
	if !cfg.NoPython {
		sess.pools = newPoolWatch(func(pid uint32, p bpfPool) error {
			if p.addr == 0 {
				return objs.Pools.Delete(pid)
			}
			// Put starts the items-taken count (Gets) afresh: readers
			// take differences, and skip one that goes down.
			return objs.Pools.Put(pid, bpf.PoolWord{Addr: p.addr, Max: p.max, State: p.state, ReadFd: p.readFD})
		})
		sess.pools.procRoot, sess.pools.peers = cfg.ProcRoot, sess.otherTargets
	}
	return sess, nil
}

// Objects exposes the loaded programs (for benchmarks).
func (s *Session) Objects() *bpf.Objects { return s.objs }

// Attach starts following pid: the loader hook, and every CUDA library it
// has mapped. Libraries it maps later are attached as they appear.
func (s *Session) Attach(pid int) ([]LibraryPlan, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("no process with PID %d", pid)
		}
		return nil, fmt.Errorf("open PID %d: %w", pid, err)
	}
	t := &target{pid: pid, pidfd: fd, libs: map[string]*attachedLib{}, attached: time.Now()}
	s.mu.Lock()
	s.targets[pid] = t
	s.mu.Unlock()
	plans, err := s.scan(t)
	if err != nil {
		if s.exitedNow(t) {
			return plans, nil // gone while we looked: Run reports the exit
		}
		return plans, err
	}
	// Read the maps once more now that the loader hook is in place: a
	// library loaded between the first read and the hook shows up here,
	// any later one fires the hook.
	more, err := s.scan(t)
	if err != nil && s.exitedNow(t) {
		err = nil
	}
	return append(plans, more...), err
}

// exitedNow reports whether t's process has exited.
func (s *Session) exitedNow(t *target) bool {
	fds := []unix.PollFd{{Fd: int32(t.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// CUDALoaded reports whether pid has a CUDA runtime or driver attached.
func (s *Session) CUDALoaded(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[pid]
	return t != nil && t.cudaReady
}

// Libraries lists the plans attached to pid.
func (s *Session) Libraries(pid int) []LibraryPlan {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LibraryPlan
	if t := s.targets[pid]; t != nil {
		for _, l := range t.libs {
			out = append(out, l.plan)
		}
	}
	slices.SortFunc(out, func(a, b LibraryPlan) int { return int(a.Layer) - int(b.Layer) })
	return out
}

// scan reads pid's maps and attaches to every CUDA or loader file not yet
// attached. It returns the plans it attached.
func (s *Session) scan(t *target) ([]LibraryPlan, error) {
	t.lastScan = time.Now()
	files, err := ExecutableFiles(s.cfg.ProcRoot, t.pid)
	if err != nil {
		if _, statErr := os.Stat(fmt.Sprintf("%s/%d", s.cfg.ProcRoot, t.pid)); statErr != nil {
			return nil, fmt.Errorf("no process with PID %d", t.pid)
		}
		return nil, err
	}
	var added []LibraryPlan
	for _, f := range files {
		python := t.python == nil && isPythonFile(f.Base())
		libc := t.sems == nil && IsLibc(f.Base())
		user := s.userFile(f)
		if !python && !libc && !user && cudaapi.LayerOf(f.Base()) == cudaapi.LayerNone {
			continue
		}
		s.mu.Lock()
		_, done := t.libs[f.Key()]
		s.mu.Unlock()
		if done {
			continue
		}
		if user && cudaapi.LayerOf(f.Base()) == cudaapi.LayerNone {
			lp, err := s.scanUser(t, f)
			if err != nil {
				return added, err
			}
			if lp != nil {
				added = append(added, *lp)
			}
			continue
		}
		if python || libc {
			if err := s.scanPython(t, f, python); err != nil {
				return added, err
			}
			continue
		}
		lp, err := PlanFile(f, s.cfg.Options)
		if err != nil {
			return added, err
		}
		lp.PID = t.pid
		calls, _ := splitSampled(lp, s.cfg.Launches)
		rest, twins := splitTwins(calls)
		links, err := attachPrograms(s.objs, t.pid, rest, slices.Concat(callPrograms, []Program{ProgLibLoad})...)
		if err != nil {
			return added, err
		}
		lib := &attachedLib{plan: lp, links: links}
		if err := s.attachTwins(t, lib, twins); err != nil {
			return added, err
		}
		if s.launchesOn(t) {
			if lib.launch, err = s.attachSampled(t.pid, lp); err != nil {
				lib.close()
				return added, err
			}
		}
		cuda := lp.Layer == cudaapi.LayerRuntime || lp.Layer == cudaapi.LayerDriver
		s.mu.Lock()
		t.libs[f.Key()] = lib
		t.cudaReady = t.cudaReady || cuda
		s.mu.Unlock()
		if cuda {
			s.endCPUOnly(t)
		}
		added = append(added, lp)
		s.cfg.Log.Debug("attached", "pid", t.pid, "file", f.Path, "probes", len(lp.Probes))
	}
	if lp, err := s.attachPythonWaits(t); err != nil {
		return added, err
	} else if lp != nil {
		added = append(added, *lp)
	}
	s.watchPythonCalls(t)
	return added, nil
}

// userFile says whether a user-named probe may be in f.
func (s *Session) userFile(f MappedFile) bool {
	for _, u := range s.cfg.User {
		if u.matchesFile(f) {
			return true
		}
	}
	return false
}

// scanUser attaches the user-named probes found in f.
func (s *Session) scanUser(t *target, f MappedFile) (*LibraryPlan, error) {
	probes, err := PlanUserProbes(f, s.cfg.User)
	if err != nil {
		return nil, err
	}
	lp := LibraryPlan{PID: t.pid, File: f, Layer: cudaapi.LayerUser, Probes: probes}
	lib := &attachedLib{plan: lp}
	if len(probes) > 0 {
		if lib.links, err = attachPrograms(s.objs, t.pid, lp, callPrograms...); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	t.libs[f.Key()] = lib
	s.mu.Unlock()
	if len(probes) == 0 {
		return nil, nil
	}
	return &lp, nil
}

// scanPython looks at a file that may hold the interpreter (python) or be
// the C library, and remembers what it found.
func (s *Session) scanPython(t *target, f MappedFile, python bool) error {
	lib := &attachedLib{} // looked at
	if python {
		p, err := PlanPython(s.cfg.ProcRoot, t.pid, f)
		s.cfg.Log.Debug("python", "pid", t.pid, "file", f.Path, "found", p != nil, "err", err)
		if err != nil {
			return err
		}
		if p != nil {
			t.python = p
			lib.plan = LibraryPlan{PID: t.pid, File: f, Python: p}
		}
	} else {
		sp, err := PlanSemaphores(f)
		if err != nil {
			return err
		}
		t.sems = &sp
	}
	s.mu.Lock()
	t.libs[f.Key()] = lib
	s.mu.Unlock()
	return nil
}

// attachPythonWaits puts the wait probes in once both the interpreter and
// libc are known, and returns the interpreter's plan to report. A Python
// gpuprof cannot read is reported in the plan, not as an error: CUDA
// profiling goes on.
func (s *Session) attachPythonWaits(t *target) (*LibraryPlan, error) {
	p := t.python
	if t.pyDone || p == nil || (p.Err == nil && t.sems == nil) {
		return nil, nil
	}
	t.pyDone = true
	lp := &LibraryPlan{PID: t.pid, File: p.File, Python: p}
	if p.Err != nil || s.cfg.NoPython {
		return lp, nil
	}
	links, err := attachPython(s.objs, p, *t.sems, nil, nil)
	if err != nil {
		return nil, err
	}
	now := monotonicNow()
	s.mu.Lock()
	t.pyLinks = links
	s.addMarksLocked(events.Event{Kind: events.KindPyAttached, PID: uint32(t.pid), Start: now, End: now})
	s.mu.Unlock()
	s.startPoolLearning(t.pid, time.Now())
	return lp, nil
}

// Sink receives batches of events in End-time order; the slice is reused
// after Sink returns. attached reports libraries attached since the last
// batch.
type Sink func(batch []events.Event, attached []LibraryPlan)

// ErrTargetsExited is returned by Run when every target process has exited.
var ErrTargetsExited = errors.New("every target process exited")

// Run hands the sink the events the drainer read (drain.go), as they come
// and at least every Poll interval, until ctx is done or all targets have
// exited, re-reading the targets' maps when the loader reports a change
// and every Rescan interval.
func (s *Session) Run(ctx context.Context, sink Sink) error {
	var batch, heldBack []events.Event
	var pooled []uint32
	var rescan bool
	var emptied uint64
	var err error
	s.mu.Lock() // Attach may add markers from another goroutine (addMarksLocked)
	if s.drain == nil {
		s.drain = newDrainer(s.reader, s.cfg.Poll)
	}
	s.mu.Unlock()
	exiting := false
	var drainedAt uint64 // the drainer's empty reads when the targets had all exited
	if s.pools != nil && s.cfg.PoolInterval > 0 {
		poolCtx, stop := context.WithCancel(ctx)
		defer stop()
		go s.pools.run(poolCtx, s.cfg.PoolInterval, func(evs []events.Event) {
			s.mu.Lock()
			s.addMarksLocked(evs...)
			s.mu.Unlock()
		})
	}
	poll := time.NewTimer(s.cfg.Poll)
	defer poll.Stop()
	for {
		select {
		case <-s.drain.ready:
		case <-poll.C:
		case <-ctx.Done():
		}
		poll.Reset(s.cfg.Poll)
		batch, rescan, emptied, err = s.drain.take(batch[:0])
		if err != nil {
			return fmt.Errorf("read ring buffer: %w", err)
		}
		kept := batch[:0]
		for _, ev := range batch {
			if ev.Kind == events.KindPyWait && !s.namePyWait(&ev) {
				continue // its process is gone, its code never named
			}
			kept = append(kept, ev)
		}
		batch = kept
		if s.pools != nil {
			s.pools.sawBPFReadings(pidsWithPool(batch, &pooled), time.Now())
		}
		s.countTwins(batch)
		if s.poolLearners.Load() > 0 {
			s.expirePoolLearning(time.Now())
		}
		// Events after a marker not yet due wait with it (heldBack), so
		// that the sink sees every event in End order, markers included.
		s.mu.Lock()
		var cut uint64
		batch, cut = s.dueMarksLocked(append(batch, heldBack...), emptied)
		s.mu.Unlock()
		slices.SortStableFunc(batch, events.CompareEnd)
		i, _ := slices.BinarySearchFunc(batch, cut, func(e events.Event, cut uint64) int { return cmp.Compare(e.End, cut) })
		heldBack = append(heldBack[:0], batch[i:]...)
		batch = batch[:i]
		attached := s.rescan(rescan)
		attached = append(attached, s.followChildren()...)
		attached = append(attached, s.followNamed()...)
		s.sampleCPUOnly(time.Now())
		if marks := s.sampleLaunches(time.Now()); len(marks) > 0 {
			s.mu.Lock()
			s.addMarksLocked(marks...)
			s.mu.Unlock()
		}
		s.delivered.Add(uint64(len(batch)))
		if len(batch) > 0 || len(attached) > 0 {
			sink(batch, attached)
		}
		if s.allExited() {
			if !exiting {
				// What the targets wrote between the last read and their
				// exit may still be in the ring buffer (a job's last
				// step, for one): go on until the drainer has twice found
				// it empty since.
				exiting, drainedAt = true, emptied
				continue
			}
			if emptied >= drainedAt+2 {
				s.flushHeld(sink, heldBack)
				return ErrTargetsExited
			}
		}
		if ctx.Err() != nil {
			s.flushHeld(sink, heldBack)
			return nil
		}
	}
}

// flushHeld hands the sink what Run still holds as it returns: the events
// held back and every marker, due or not.
func (s *Session) flushHeld(sink Sink, held []events.Event) {
	s.mu.Lock()
	batch, _ := s.dueMarksLocked(held, math.MaxUint64)
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	slices.SortStableFunc(batch, events.CompareEnd)
	s.delivered.Add(uint64(len(batch)))
	sink(batch, nil)
}

// heldMark is an event gpuprof makes itself (a marker, a pool reading),
// held until the drainer has read what the probes wrote before it.
type heldMark struct {
	ev  events.Event
	due uint64 // the drainer's empty reads from which it is due
}

// addMarksLocked holds markers until every event written before them is
// read, so that each sorts in among the events about it: the ring buffer
// read empty twice after now holds all of them. Under mu.
func (s *Session) addMarksLocked(evs ...events.Event) {
	due := uint64(0)
	if s.drain != nil {
		due = s.drain.emptiedNow() + 2
	}
	for _, ev := range evs {
		s.marks = append(s.marks, heldMark{ev: ev, due: due})
	}
}

// dueMarksLocked moves the markers due at emptied empty reads into batch,
// and returns the earliest End of those not yet due (the events from
// which on must wait for them), MaxUint64 if none. Under mu.
func (s *Session) dueMarksLocked(batch []events.Event, emptied uint64) ([]events.Event, uint64) {
	kept := s.marks[:0]
	cut := uint64(math.MaxUint64)
	for _, m := range s.marks {
		if m.due <= emptied {
			batch = append(batch, m.ev)
		} else {
			kept = append(kept, m)
			cut = min(cut, m.ev.End)
		}
	}
	clear(s.marks[len(kept):])
	s.marks = kept
	return batch, cut
}

// namePyWait names a Python wait's frames and notes the wait for the
// watchers of its thread and of the sample pool; false if no frame could
// be named.
func (s *Session) namePyWait(ev *events.Event) bool {
	t, mem, minor := s.pyTargetOf(ev.PID)
	if !nameFrames(mem, ev, time.Now()) {
		return false
	}
	s.watchWaitingThread(t, ev)
	if s.pools != nil {
		s.pools.note(ev, minor)
		s.notePoolLearning(ev)
	}
	return true
}

// pidsWithPool are the processes of batch's events that carry a BPF pool
// reading, into buf.
func pidsWithPool(batch []events.Event, buf *[]uint32) []uint32 {
	*buf = (*buf)[:0]
	for i := range batch {
		if batch[i].Pool != 0 && !slices.Contains(*buf, batch[i].PID) {
			*buf = append(*buf, batch[i].PID)
		}
	}
	return *buf
}

// SetStepThread says which thread of a target runs its training loop: its
// sample pool's length is then read at each of its CUDA call returns
// (Event.Pool).
func (s *Session) SetStepThread(pid int, tid uint32) {
	if s.pools != nil {
		s.pools.setStepThread(pid, tid)
	}
}

// otherTargets are the targets still running other than pid.
func (s *Session) otherTargets(pid int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for p, t := range s.targets {
		if p != pid && !t.exited {
			out = append(out, p)
		}
	}
	return out
}

// pyTargetOf is, in one look, the target of a Python wait's process, the
// reader of its CPython objects and its minor version; a nil reader once
// the process is gone.
func (s *Session) pyTargetOf(pid uint32) (*target, *pymem.Reader, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[int(pid)]
	if t == nil || t.python == nil {
		return t, nil, 0
	}
	return t, t.pyMemLocked(), t.python.Minor
}

// targetPyMem is the reader of a target's CPython objects, nil if it runs
// none (or it is gone).
func (s *Session) targetPyMem(t *target) *pymem.Reader {
	if t == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.python == nil {
		return nil
	}
	return t.pyMemLocked()
}

// pyMemLocked is the target's reader of CPython objects, opened the first
// time; nil if it cannot be. Under mu, with t.python known.
func (t *target) pyMemLocked() *pymem.Reader {
	if t.pyMem == nil {
		r, err := pymem.NewReader(t.pid, t.python.Minor)
		if err != nil {
			return nil
		}
		t.pyMem = r
	}
	return t.pyMem
}

// nameFrames reads the names of a Python wait's frames from their code
// objects with r, keeping the frames it could name in order. It says
// whether any was.
func nameFrames(r *pymem.Reader, ev *events.Event, now time.Time) bool {
	if r == nil {
		return false
	}
	named := ev.Frames[:0]
	for _, f := range ev.Frames {
		c, err := r.Code(f.Code, now)
		if err != nil {
			continue
		}
		f.Func, f.File = c.Func, c.File
		named = append(named, f)
	}
	ev.Frames = named
	return len(named) > 0
}

func (s *Session) rescan(force bool) []LibraryPlan {
	var added []LibraryPlan
	s.mu.Lock()
	ts := make([]*target, 0, len(s.targets))
	for _, t := range s.targets {
		ts = append(ts, t)
	}
	s.mu.Unlock()
	for _, t := range ts {
		if t.exited || (!force && time.Since(t.lastScan) < s.cfg.Rescan) {
			continue
		}
		plans, err := s.scan(t)
		if err != nil && !t.exited {
			// A process that exited since the last poll (a DataLoader
			// worker at the end of an epoch) is no failure to report.
			s.mu.Lock()
			gone := s.exitedNow(t)
			t.exited = t.exited || gone
			s.mu.Unlock()
			if !gone {
				s.cfg.Log.Warn("rescan failed", "pid", t.pid, "err", err)
			}
		}
		added = append(added, plans...)
	}
	return added
}

// allExited polls the targets' pidfds, which become readable on exit.
func (s *Session) allExited() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.targets) == 0 {
		return false
	}
	all := true
	for _, t := range s.targets {
		if !t.exited && s.exitedNow(t) {
			t.exited = true
		}
		all = all && t.exited
	}
	return all
}

// Stats returns the loss counters, summed over CPUs.
func (s *Session) Stats() Stats {
	st := Stats{Events: s.delivered.Load()}
	s.mu.Lock()
	d := s.drain
	s.mu.Unlock()
	if d != nil {
		st.BadRecords = d.bad.Load()
	}
	var vals []uint64
	for i := uint32(0); i < bpf.NumStats; i++ {
		if err := s.objs.Stats.Lookup(i, &vals); err != nil {
			continue
		}
		var sum uint64
		for _, v := range vals {
			sum += v
		}
		switch i {
		case bpf.StatRingbufFull:
			st.RingbufFull = sum
		case bpf.StatKernelMapFull:
			st.KernelMapFull = sum
		case bpf.StatStaleCall:
			st.StaleCalls = sum
		case bpf.StatNoThreadState:
			st.NoThreadState = sum
		}
	}
	return st
}

// KernelLaunch is a launch count for one kernel handle in one process.
type KernelLaunch struct {
	PID    uint32
	Handle uint64
	Count  uint64
}

// KernelLaunches reads the per-kernel launch counts.
func (s *Session) KernelLaunches() ([]KernelLaunch, error) {
	var out []KernelLaunch
	var k bpf.KernelKey
	var perCPU []uint64
	it := s.objs.Kernels.Iterate()
	for it.Next(&k, &perCPU) {
		var n uint64
		for _, v := range perCPU {
			n += v
		}
		out = append(out, KernelLaunch{PID: k.Pid, Handle: k.Func, Count: n})
	}
	if err := it.Err(); err != nil {
		return out, fmt.Errorf("read kernel launch counts: %w", err)
	}
	slices.SortFunc(out, func(a, b KernelLaunch) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		return int(a.Handle>>1) - int(b.Handle>>1)
	})
	return out, nil
}

// Detach removes every probe from pid; the process carries on as before.
func (s *Session) Detach(pid int) error {
	s.mu.Lock()
	t := s.targets[pid]
	delete(s.targets, pid)
	delete(s.twinCalls, pid)
	delete(s.twinLayers, pid)
	if _, ok := s.poolLearning[pid]; ok {
		delete(s.poolLearning, pid)
		s.setPoolLearning(pid, false)
	}
	s.mu.Unlock()
	s.objs.ForgetTwins(uint32(pid))
	if t == nil {
		return nil
	}
	var links []link.Link
	for _, l := range t.libs {
		links = append(links, l.take()...)
	}
	s.mu.Lock()
	links = slices.Concat(links, t.pyLinks, t.pyKept)
	t.pyLinks, t.pyKept = nil, nil
	s.mu.Unlock()
	// All at once: the target is let go of, its events no longer matter.
	errs := []error{closeAtOnce(links)}
	s.unwatchPythonCalls(t)
	if t.python != nil {
		s.objs.Python.Delete(uint32(pid))
	}
	unix.Close(t.pidfd)
	s.closer.wait() // links already let go of (twins settled, launches paused)
	return errors.Join(errs...)
}

// Close detaches from every target and frees the BPF objects. Only the
// first call does anything.
func (s *Session) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	errs = append(errs, s.reader.Close())
	s.mu.Lock()
	d := s.drain
	s.mu.Unlock()
	if d != nil {
		d.stop()
	}
	s.mu.Lock()
	pids := make([]int, 0, len(s.targets))
	for pid := range s.targets {
		pids = append(pids, pid)
	}
	s.mu.Unlock()
	// Every target at once: each close waits on the kernel (closeLinks).
	start := time.Now()
	defer func() { s.cfg.Log.Debug("detached", "processes", len(pids), "took", time.Since(start)) }()
	detached := make([]error, len(pids))
	var wg sync.WaitGroup
	for i, pid := range pids {
		wg.Go(func() { detached[i] = s.Detach(pid) })
	}
	wg.Wait()
	errs = append(errs, detached...)
	s.closer.wait()
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}
