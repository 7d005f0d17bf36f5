package probes

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/watchpoint"
	"github.com/gpuprof/gpuprof/pymem"
)

// Python functions the user names (--probe ROLE=py:MODULE:QUALNAME). From
// 3.11 a Python-to-Python call runs no native function of its own, and a
// uprobe inside the interpreter's loop would fire on every Python call of
// the job. What is cheap and exact on 3.10 to 3.13 alike: x86 hardware
// watchpoints on the function's bytecode, read by the interpreter once as
// each call starts (RESUME 0; 3.10: the first instruction) and at each
// return instruction. Only calls of that function trap, twice each: ~9 µs
// a trap on the dev VM (`make bench` has the numbers), which suits a
// function called a few times a step, not one called in a tight loop.
//
// A watchpoint is a perf breakpoint event on one thread. A function the
// user named is watched in every thread, each watchpoint opened with
// inherit set so that threads the job starts later get them too. A
// watched thread pays at each of its context switches, as its debug
// registers are switched with it (+14 µs a round of two blocking waits on
// the dev VM, ~3 µs a switch: BenchmarkWatchedThreadSwitch), and a
// training process runs dozens of threads (CUDA's, NCCL's, autograd's), so
// gpuprof's own whole gets watch only the threads seen waiting inside the
// function, once seen (watchWaitingThread). x86 has
// four debug registers a thread, so a function with more than three
// return instructions, or several functions with more than four sites
// together, cannot all be watched. Calls that end in an exception are
// not timed; on 3.10 such a call merges with the next call in the same
// frame.

const (
	debugRegisters = 4 // DR0-DR3 a thread
	// pyResolveBackoff bounds how often a function not yet found (its
	// module not imported yet) is looked for again: each look reads the
	// job's memory, which is not free for it (pool.go).
	pyResolveBackoff = 30 * time.Second
)

// pyCallWatch is one Python function probe in one target.
type pyCallWatch struct {
	probe    UserProbe
	fn       *pymem.Function
	events   []int // perf event fds
	reason   string
	next     time.Time // when to look for it again
	backoff  time.Duration
	finished bool // watched, or given up
	// threads are the threads watched; with lazy (gpuprof's own probes)
	// only those seen waiting inside the function are, as they are seen.
	threads map[int]bool
	lazy    bool
	// anchors time the function by native anchors instead (pyanchor.go),
	// once attached; anchorable says it has some not yet found wanting.
	// A lazy probe's are attached when its first thread is seen waiting
	// in it, so that processes that never call it (the engine putting
	// into the queue a trainer gets from) pay nothing.
	anchors    []link.Link
	anchorable bool
	anchorSet  string // callAnchors.name; empty anchors: another's serve it
	// anchorPlaces: where each anchor's probe went, starts then end.
	anchorPlaces []Placement
}

// sites are the debug registers the function takes in a watched thread:
// none while its native anchors time it, or will once a thread waits in it.
func (w *pyCallWatch) sites() int {
	if w.fn == nil || w.anchors != nil || w.anchorable {
		return 0
	}
	return 1 + len(w.fn.Returns)
}

// freeRegisters makes sure need debug registers are left in t's threads
// for w beside the other functions', taking gpuprof's own from them
// where w is the user's: theirs come first. Where watchpoints do not trap
// on this machine (watchpoint.Fires) there are none to give: looking
// again will not help.
func (py *cpython) freeRegisters(t *target, w *pyCallWatch, need int) error {
	if err := watchpoint.Fires(); err != nil {
		return err
	}
	used := 0
	for _, o := range t.pyCalls {
		if o != w {
			used += o.sites()
		}
	}
	if used+need > debugRegisters && !w.probe.Default {
		used -= py.yieldDefaults(t, used+need-debugRegisters)
	}
	if used+need > debugRegisters {
		return errNoRegisters{need, debugRegisters - used}
	}
	return nil
}

// watchCalls finds the Python functions the user named in t and
// puts watchpoints on them, once the interpreter is known.
func (py *cpython) watchCalls(t *target) {
	p := t.python
	if p == nil || p.Err != nil || py.cfg.NoPython {
		return
	}
	t.pyMu.Lock()
	defer t.pyMu.Unlock()
	now := time.Now()
	for _, u := range py.cfg.User {
		module, qualname, ok := u.Python()
		if !ok {
			continue
		}
		if t.pyCalls == nil {
			t.pyCalls = map[uint16]*pyCallWatch{}
		}
		w := t.pyCalls[u.ID]
		if w == nil {
			w = &pyCallWatch{probe: u, backoff: time.Second}
			t.pyCalls[u.ID] = w
		}
		if w.finished || now.Before(w.next) {
			continue
		}
		if err := py.watchCall(t, w, module, qualname); err != nil {
			w.next, w.backoff = now.Add(w.backoff), min(2*w.backoff, pyResolveBackoff)
			msg := "Python function not watched yet: looking again"
			if w.finished {
				msg = "Python function not watched"
			}
			if err.Error() != w.reason {
				level := slog.LevelWarn
				if u.Default {
					level = slog.LevelDebug
				}
				py.cfg.Log.Log(context.Background(), level, msg, "pid", t.pid, "probe", u.Spec(), "why", err)
			}
			w.reason = err.Error()
			continue
		}
		w.finished, w.reason = true, ""
		level := slog.LevelInfo
		if u.Default {
			level = slog.LevelDebug
		}
		if w.anchors != nil {
			py.cfg.Log.Log(context.Background(), level, "timing Python function by native anchors", "pid", t.pid, "probe", u.Spec())
			continue
		}
		if w.anchorable {
			py.cfg.Log.Log(context.Background(), level, "Python function found: its native anchors go in once a thread waits in it", "pid", t.pid, "probe", u.Spec())
			continue
		}
		py.cfg.Log.Log(context.Background(), level, "watching Python function", "pid", t.pid, "probe", u.Spec(),
			"returns", len(w.fn.Returns), "threads", len(w.threads), "lazy", w.lazy)
	}
}

// FindPythonFunction reads where a Python function's watchpoints would
// go in a process (gpuprof probes).
func FindPythonFunction(pid int, p *PythonPlan, module, qualname string) (*pymem.Function, error) {
	if p.Err != nil {
		return nil, p.Err
	}
	r, err := pymem.NewReader(pid, p.Minor)
	if err != nil {
		return nil, err
	}
	return r.Function(p.Runtime, module, qualname)
}

// errNoRegisters means a function cannot be watched at all: looking again
// will not help.
type errNoRegisters struct{ need, free int }

func (e errNoRegisters) Error() string {
	return fmt.Sprintf("needs %d hardware watchpoints (its start and returns), %d of the thread's %d left", e.need, e.free, debugRegisters)
}

func (py *cpython) watchCall(t *target, w *pyCallWatch, module, qualname string) error {
	mem := py.mem(t)
	if mem == nil {
		w.finished = true
		return fmt.Errorf("PID %d: its CPython objects cannot be read", t.pid)
	}
	fn, err := mem.Function(t.python.Runtime, module, qualname)
	if err != nil {
		return err
	}
	// A function with native anchors takes no debug register unless they
	// are not found: its registers are counted then (anchorOrWatch).
	anchorable := NativeAnchors(module, qualname) != nil && !py.cfg.NoNativeAnchors
	if !anchorable {
		if err := py.freeRegisters(t, w, 1+len(fn.Returns)); err != nil {
			w.finished = true
			return err
		}
	}
	sites := map[uint64]bpf.PySite{fn.Entry: {Api: w.probe.ID, Resume: boolByte(fn.EntryIsResume)}}
	for _, r := range fn.Returns {
		sites[r] = bpf.PySite{Api: w.probe.ID, IsReturn: 1}
	}
	for addr, site := range sites {
		if err := py.objs.PySites.Put(bpf.PySiteKey{Pid: uint32(t.pid), Addr: addr}, site); err != nil {
			return fmt.Errorf("BPF map py_sites: %w", err)
		}
	}
	w.fn, w.threads, w.lazy, w.anchorable = fn, map[int]bool{}, w.probe.Default, anchorable
	if w.anchorable && !w.lazy {
		anchored, err := py.anchorOrWatch(t, w)
		if err != nil {
			w.finished = true
			py.unwatchCall(t, w)
			return err
		}
		if anchored {
			return nil
		}
	}
	if w.lazy {
		// The threads seen waiting in it before it was found now, later
		// ones as they are seen (watchWaitingThread).
		for tid := range t.waitedIn[fn.Code] {
			py.watchThread(t, w, tid)
		}
		return nil
	}
	events, err := watchThreads(py.cfg.ProcRoot, t.pid, sites, py.objs.PyCallSite.FD(), w.threads)
	if err != nil {
		closeFDs(events)
		py.unwatchCall(t, w)
		return err
	}
	w.events = events
	return nil
}

// siteAddrs are the function's watched addresses: its start, then its
// returns.
func (w *pyCallWatch) siteAddrs() []uint64 {
	return append([]uint64{w.fn.Entry}, w.fn.Returns...)
}

// maxWaitedIn bounds the code objects remembered as waited in, by target.
const maxWaitedIn = 4096

// watchWaitingThread starts watching, in the thread of a Python wait, the
// lazily watched functions the wait is inside of (its frames run their
// code). While one of gpuprof's own functions is not found yet, it also
// remembers which code the thread waited in, for when it is.
func (py *cpython) watchWaitingThread(t *target, ev *events.Event) {
	if t == nil {
		return
	}
	t.pyMu.Lock()
	defer t.pyMu.Unlock()
	tid := int(ev.TID)
	for _, w := range t.pyCalls {
		if w.pending() {
			t.noteWaitedIn(tid, ev.Frames)
		}
		// Anchored, a function is timed in every thread already.
		if w.lazy && w.fn != nil && w.anchors == nil && !w.threads[tid] &&
			slices.ContainsFunc(ev.Frames, func(f events.PyFrame) bool { return f.Code == w.fn.Code }) {
			py.watchThread(t, w, tid)
		}
	}
}

// pending says whether w is gpuprof's own function, to be watched lazily,
// and not found yet.
func (w *pyCallWatch) pending() bool { return w.probe.Default && w.fn == nil && !w.finished }

// noteWaitedIn remembers that thread tid waited in the frames' code.
func (t *target) noteWaitedIn(tid int, frames []events.PyFrame) {
	if t.waitedIn == nil {
		t.waitedIn = map[uint64]map[int]bool{}
	}
	for _, f := range frames {
		in := t.waitedIn[f.Code]
		if in == nil && len(t.waitedIn) < maxWaitedIn {
			in = map[int]bool{}
			t.waitedIn[f.Code] = in
		}
		if in != nil {
			in[tid] = true
		}
	}
}

// watchThread puts all of a function's watchpoints in one thread, or
// none: a start with no return would time nothing. A thread is tried
// once.
func (py *cpython) watchThread(t *target, w *pyCallWatch, tid int) {
	if w.anchors != nil {
		return
	}
	if w.anchorable {
		anchored, err := py.anchorOrWatch(t, w)
		if err != nil {
			py.cfg.Log.Debug("Python function not watched", "pid", t.pid, "probe", w.probe.Spec(), "why", err)
			py.unwatchCall(t, w)
			return
		}
		if anchored {
			return
		}
	}
	w.threads[tid] = true
	var fds []int
	var err error
	for _, addr := range w.siteAddrs() {
		var fd int
		if fd, err = openWatchpoint(tid, addr, py.objs.PyCallSite.FD(), false); err != nil {
			break
		}
		fds = append(fds, fd)
	}
	if err != nil {
		closeFDs(fds)
		py.cfg.Log.Debug("thread not watched", "pid", t.pid, "tid", tid, "probe", w.probe.Spec(), "err", err)
		return
	}
	w.events = append(w.events, fds...)
	py.cfg.Log.Debug("watching a thread seen waiting in a Python function", "pid", t.pid, "tid", tid, "probe", w.probe.Spec())
}

// watchThreads opens a watchpoint on every address in every thread of
// pid. Threads started meanwhile inherit them from the thread starting
// them; one started by a thread not yet watched is caught by a second
// look at the thread list.
func watchThreads(procRoot string, pid int, sites map[uint64]bpf.PySite, prog int, done map[int]bool) ([]int, error) {
	var fds []int
	for pass := 0; pass < 2; pass++ {
		tids, err := threadsOf(procRoot, pid)
		if err != nil {
			return fds, err
		}
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			done[tid] = true
			for addr := range sites {
				fd, err := openWatchpoint(tid, addr, prog, true)
				if err == unix.ESRCH {
					break // the thread ended
				}
				if err != nil {
					return fds, fmt.Errorf("watchpoint at %#x in thread %d: %w", addr, tid, err)
				}
				fds = append(fds, fd)
			}
		}
	}
	return fds, nil
}

func threadsOf(procRoot string, pid int) ([]int, error) {
	ents, err := os.ReadDir(filepath.Join(procRoot, strconv.Itoa(pid), "task"))
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

// openWatchpoint watches one byte of a thread's memory for reads and
// writes (each access runs prog) in user mode, inherited by the threads
// it starts if inherit.
func openWatchpoint(tid int, addr uint64, prog int, inherit bool) (int, error) {
	attr := watchpoint.Attr(addr)
	attr.Sample = 1 // every access
	attr.Bits |= unix.PerfBitDisabled
	if inherit {
		attr.Bits |= unix.PerfBitInherit
	}
	return openPerfBPF(&attr, tid, -1, prog)
}

// openPerfBPF opens a perf event (of thread tid, or every task on cpu),
// runs prog at each of its samples and enables it.
func openPerfBPF(attr *unix.PerfEventAttr, tid, cpu, prog int) (int, error) {
	fd, err := unix.PerfEventOpen(attr, tid, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return -1, err
	}
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_SET_BPF, prog); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("attach BPF program: %w", err)
	}
	if err := unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("enable: %w", err)
	}
	return fd, nil
}

// yieldDefaults stops watching gpuprof's own functions in t (whole gets)
// until at least want debug registers are free, for a function the user
// named: theirs come first. It returns the registers freed.
func (py *cpython) yieldDefaults(t *target, want int) int {
	freed := 0
	for _, w := range t.pyCalls {
		if freed >= want {
			break
		}
		if !w.probe.Default || w.sites() == 0 {
			continue
		}
		freed += w.sites()
		py.unwatchCall(t, w)
		py.cfg.Log.Debug("Python function no longer watched: its debug registers went to a --probe", "pid", t.pid, "probe", w.probe.Spec())
	}
	return freed
}

// unwatchCall closes one function's watchpoints in t and forgets
// its sites.
func (py *cpython) unwatchCall(t *target, w *pyCallWatch) {
	closeFDs(w.events)
	if w.anchors != nil {
		closeLinks(w.anchors)
		py.objs.PyAnchorCodes.Delete(bpf.PyAnchorKey{Pid: uint32(t.pid), Code: w.fn.Code})
		w.anchors = nil
	}
	if w.fn != nil {
		for _, addr := range w.siteAddrs() {
			py.objs.PySites.Delete(bpf.PySiteKey{Pid: uint32(t.pid), Addr: addr})
		}
	}
	w.events, w.fn, w.threads = nil, nil, nil
}

// unwatchCalls closes t's watchpoints and forgets their sites.
func (py *cpython) unwatchCalls(t *target) {
	t.pyMu.Lock()
	defer t.pyMu.Unlock()
	for _, w := range t.pyCalls {
		py.unwatchCall(t, w)
	}
	t.pyCalls = nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
