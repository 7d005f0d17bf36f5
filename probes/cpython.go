package probes

import (
	"slices"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/pymem"
)

// cpython is gpuprof's CPython support for the targets that run it: it
// finds the interpreter and libc's waits in a process's files, attaches
// the Python wait probes, names the frames of the waits they report, and
// watches the Python functions the user named (pycall.go, pyanchor.go).
// Its per-process state is the target's Python fields (python, sems,
// pyMem, pyCalls), under mu and pyMu.
type cpython struct {
	*core
	pools    *poolWatch   // the sample pools, nil with NoPython
	learning *poolLearner // short waits reported until a pool is seen
}

// scanFile looks at a file that may hold the interpreter (python) or be
// the C library, and remembers what it found.
func (py *cpython) scanFile(t *target, f MappedFile, python bool) error {
	lib := &attachedLib{} // looked at
	if python {
		p, err := PlanPython(py.cfg.ProcRoot, t.pid, f)
		py.cfg.Log.Debug("python", "pid", t.pid, "file", f.Path, "found", p != nil, "err", err)
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
	py.mu.Lock()
	t.libs[f.Key()] = lib
	py.mu.Unlock()
	return nil
}

// attachWaits puts the wait probes in once both the interpreter and
// libc are known, and returns the interpreter's plan to report. A Python
// gpuprof cannot read is reported in the plan, not as an error: CUDA
// profiling goes on.
func (py *cpython) attachWaits(t *target) (*LibraryPlan, error) {
	p := t.python
	if t.pyDone || p == nil || (p.Err == nil && t.sems == nil) {
		return nil, nil
	}
	t.pyDone = true
	lp := &LibraryPlan{PID: t.pid, File: p.File, Python: p}
	if p.Err != nil || py.cfg.NoPython {
		return lp, nil
	}
	links, err := attachPython(py.objs, p, *t.sems, nil, nil)
	if err != nil {
		return nil, err
	}
	now := monotonicNow()
	py.mu.Lock()
	t.pyLinks = links
	py.addMarksLocked(events.Event{Kind: events.KindPyAttached, PID: uint32(t.pid), Start: now, End: now})
	py.mu.Unlock()
	if py.pools != nil {
		py.learning.start(t.pid, time.Now())
	}
	return lp, nil
}

// nameWait names a Python wait's frames and notes the wait for the
// watchers of its thread and of the sample pool; false if no frame could
// be named.
func (py *cpython) nameWait(ev *events.Event) bool {
	t, mem, minor := py.targetOf(ev.PID)
	if !nameFrames(mem, ev, time.Now()) {
		return false
	}
	py.watchWaitingThread(t, ev)
	if py.pools != nil {
		py.pools.note(ev, minor)
		py.learning.note(ev)
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

// targetOf is, in one look, the target of a Python wait's process, the
// reader of its CPython objects and its minor version; a nil reader once
// the process is gone.
func (py *cpython) targetOf(pid uint32) (*target, *pymem.Reader, int) {
	py.mu.Lock()
	defer py.mu.Unlock()
	t := py.targets[int(pid)]
	if t == nil || t.python == nil {
		return t, nil, 0
	}
	return t, t.pyMemLocked(), t.python.Minor
}

// mem is the reader of a target's CPython objects, nil if it runs
// none (or it is gone).
func (py *cpython) mem(t *target) *pymem.Reader {
	if t == nil {
		return nil
	}
	py.mu.Lock()
	defer py.mu.Unlock()
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
