package probes

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/bpf"
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
	// function, and ProgramStats turns on the kernel's BPF statistics
	// while the session is open (Session.ProbeStats), for --probe-stats.
	CountWaits, ProgramStats bool
	// NoNativeAnchors times every Python function named with
	// watchpoints, as where its native anchors cannot be found (for
	// measuring the two ways against each other).
	NoNativeAnchors bool
	// Stacks are the stack samples read for the profiles (stacks.go).
	Stacks StackConfig
	Options
	Log *slog.Logger
}

// features are the BPF programs' features the session uses.
func (cfg Config) features() bpf.Features {
	var f bpf.Features
	if !cfg.NoPython {
		f |= bpf.FeaturePyWaits
		if slices.ContainsFunc(cfg.User, func(u UserProbe) bool { _, _, ok := u.Python(); return ok }) {
			f |= bpf.FeaturePyFunctions
		}
	}
	if cfg.Stacks.Period() > 0 {
		f |= bpf.FeatureOnCPU
	}
	if cfg.Stacks.OffPeriod() > 0 {
		f |= bpf.FeatureOffCPU
	}
	return f
}

// DefaultConfig is what gpuprof attach uses.
func DefaultConfig() Config {
	return Config{ProcRoot: "/proc", Poll: 20 * time.Millisecond, Rescan: time.Second, PyMinWait: 50 * time.Microsecond,
		PoolInterval: 10 * time.Millisecond,
		Options:      Options{Launches: true}, Log: slog.Default()}
}

// Session holds the loaded BPF objects and everything attached to
// targets: it plans and attaches each process's probes (scan.go), reads
// their events (run.go), and hands the events to the controllers that
// change what stays attached.
type Session struct {
	*core
	reader    *ringbuf.Reader
	delivered atomic.Uint64 // events handed to the sink (Stats, from any goroutine)
	losses    *losses       // what the full ring buffer cost, by kind and time
	fullSeen  uint64        // the ring-buffer-full count as Run last read it
	closed    bool
	progStats io.Closer // the kernel's BPF statistics, with Config.ProgramStats

	lastChildren time.Time
	follow       []int // processes to attach to at the next poll (Follow); under mu

	python   *cpython
	twins    *twinDecider
	records  *Records
	sampling *Sampling
	stacks   *stackSampler // nil: no stacks read (Config.Stacks)
	sites    *siteNamer    // names kernels by their launches' call sites (kernelsite.go)
	// controllers are the above that steer probes from the events, and
	// the pool learning, in the order Run hands them a batch.
	controllers []controller
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
	program   uint64                  // the program it runs (programID; 0: unknown), to tell an exec (exec.go)
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
	// recordSites are the probes on the call sites of the event records
	// the job reads, while its records' functions go unprobed
	// (recordsites.go); under mu.
	recordSites []link.Link
}

type attachedLib struct {
	plan   LibraryPlan
	links  []link.Link            // calls and the loader hook
	launch []link.Link            // launch counting and sampled calls (sampling.go), attached only while launches are counted
	twins  map[string][]link.Link // calls the runtime and driver share, by group, until decided (twins.go)
	// records are the runtime's event-record probes once the runtime
	// times the event calls, apart so that they can go while the records
	// are probed at their call sites (recordsites.go); recordPlan brings
	// them back.
	records    []link.Link
	recordPlan LibraryPlan
}

// close detaches everything attached in the library.
func (l *attachedLib) close() error {
	return closeLinks(l.take())
}

// takeLinksLocked returns every link attached to the target, in its
// libraries and for its Python waits, and forgets them; under mu.
func (t *target) takeLinksLocked() []link.Link {
	var links []link.Link
	for _, l := range t.libs {
		links = append(links, l.take()...)
	}
	links = slices.Concat(links, t.pyLinks, t.pyKept, t.recordSites)
	t.pyLinks, t.pyKept, t.recordSites = nil, nil, nil
	return links
}

// take returns every link attached in the library, and forgets them.
func (l *attachedLib) take() []link.Link {
	all := slices.Concat(l.links, l.launch, l.records)
	for _, tl := range l.twins {
		all = append(all, tl...)
	}
	l.links, l.launch, l.twins, l.records = nil, nil, nil, nil
	return all
}

// Open loads the BPF programs and maps and opens the ring buffer.
func Open(cfg Config) (*Session, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	size, err := bpf.RingbufSize()
	if err != nil {
		return nil, err
	}
	startReleaser(cfg.Log)
	objs, err := bpf.Load(bpf.Settings{Features: cfg.features(), WakeupBytes: uint64(size) / 4, PyMinWaitNS: uint64(cfg.PyMinWait),
		PyLearnWaitNS: uint64(min(poolLearnWait, cfg.PyMinWait)),
		PyReadCookie:  uint64(readCookie), CountWaits: cfg.CountWaits,
		LaunchStackEvery: uint32(max(cfg.Stacks.LaunchEvery, 0)), StackCalls: cfg.Stacks.Calls,
		StackCallMinNS: uint64(cfg.Stacks.CallMin), CPUPeriodNS: cfg.Stacks.Period(),
		OffCPUPeriodNS: cfg.Stacks.OffPeriod()})
	if err != nil {
		return nil, err
	}
	rd, err := ringbuf.NewReader(objs.Events)
	if err != nil {
		objs.Close()
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	c := &core{cfg: cfg, objs: objs, closer: newBackgroundCloser(), targets: map[int]*target{}}
	sess := &Session{core: c, reader: rd, twins: newTwinDecider(c), sampling: &Sampling{c},
		losses: newLosses(objs.Losses, monotonicNow)}
	sess.records = newRecords(c, sess.twins)
	sess.sites = newSiteNamer(cfg.ProcRoot, func(ev events.Event) { c.addMarks(ev) }, monotonicNow)
	learning := newPoolLearner(c)
	sess.python = &cpython{core: c, learning: learning}
	sess.controllers = []controller{sess.twins, sess.records, learning, sess.sampling}
	if cfg.Stacks.On() {
		if sess.stacks, err = newStackSampler(c); err != nil {
			sess.Close()
			return nil, err
		}
		sess.controllers = append(sess.controllers, sess.stacks)
		// One copy of each file's symbols (libtorch_cuda.so's are large);
		// the symbolizer has a lock of its own.
		sess.sites.syms = sess.stacks.syms
	}
	if !cfg.NoPython {
		pools := newPoolWatch(func(pid uint32, p bpfPool) error {
			if p.addr == 0 {
				return objs.Pools.Delete(pid)
			}
			// Put starts the items-taken count (Gets) afresh: readers
			// take differences, and skip one that goes down.
			return objs.Pools.Put(pid, bpf.PoolWord{Addr: p.addr, Max: p.max, State: p.state, ReadFd: p.readFD})
		})
		pools.procRoot, pools.peers, pools.stepless = cfg.ProcRoot, c.otherTargets, sess.sampling.cpuOnly
		sess.python.pools = pools
	}
	if cfg.ProgramStats {
		if sess.progStats, err = bpf.EnableStats(); err != nil {
			sess.Close()
			return nil, err
		}
	}
	return sess, nil
}

// Sampling is what attaches the session's probes part of the time.
func (s *Session) Sampling() *Sampling { return s.sampling }

// Records is what narrows the session's record probes to their readers'
// call sites.
func (s *Session) Records() *Records { return s.records }

// NoProcessError is Attach's error for a process that is gone, or never
// was.
type NoProcessError struct{ PID int }

func (e NoProcessError) Error() string { return fmt.Sprintf("no process with PID %d", e.PID) }

// Attach starts following pid: the loader hook, and every CUDA library it
// has mapped. Libraries it maps later are attached as they appear.
func (s *Session) Attach(pid int) ([]LibraryPlan, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, NoProcessError{pid}
		}
		return nil, fmt.Errorf("open PID %d: %w", pid, err)
	}
	return s.attachFD(pid, fd)
}

// attachFD attaches to pid, held by its pidfd fd (which the session then
// owns).
func (s *Session) attachFD(pid, fd int) ([]LibraryPlan, error) {
	t := &target{pid: pid, pidfd: fd, libs: map[string]*attachedLib{}, attached: time.Now()}
	t.program, _ = programID(s.cfg.ProcRoot, pid) // before the maps: an exec after it is seen at the next rescan
	s.mu.Lock()
	s.targets[pid] = t
	s.mu.Unlock()
	plans, err := s.scan(t)
	if err != nil {
		if exitedWithin(t, 0) {
			return plans, nil // gone while we looked: Run reports the exit
		}
		return plans, err
	}
	// Read the maps once more now that the loader hook is in place: a
	// library loaded between the first read and the hook shows up here,
	// any later one fires the hook.
	more, err := s.scan(t)
	if err != nil && exitedWithin(t, 0) {
		err = nil
	}
	return append(plans, more...), err
}

// exitedWithin reports whether t's process has exited, waiting up to d
// for it to.
func exitedWithin(t *target, d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(t.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(d.Milliseconds()))
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

// SetStepThread says which thread of a target runs its training loop: its
// sample pool's length is then read at each of its CUDA call returns
// (Event.Pool).
func (s *Session) SetStepThread(pid int, tid uint32) {
	if s.python.pools != nil {
		s.python.pools.setStepThread(pid, tid)
	}
}

// quiesce detaches every probe from every target, keeping the targets
// (Detach and Close find nothing left to close), so that Run can read
// what is left in the ring buffer and every event produced is delivered
// or counted lost.
func (s *Session) quiesce() {
	var links []link.Link
	s.mu.Lock()
	for _, t := range s.targets {
		links = append(links, t.takeLinksLocked()...)
	}
	s.mu.Unlock()
	if err := closeAtOnce(links); err != nil {
		s.cfg.Log.Debug("detach at the end of the run", "err", err)
	}
	s.closer.wait()
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
	s.mu.Unlock()
	for _, c := range s.controllers {
		c.forget(pid)
	}
	if t == nil {
		return nil
	}
	s.mu.Lock()
	links := t.takeLinksLocked()
	s.mu.Unlock()
	// All at once: the target is let go of, its events no longer matter.
	errs := []error{closeAtOnce(links)}
	s.python.unwatchCalls(t)
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
	if s.stacks != nil {
		errs = append(errs, s.stacks.close())
	}
	s.closer.wait()
	if s.progStats != nil {
		errs = append(errs, s.progStats.Close())
	}
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}
