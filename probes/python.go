package probes

import (
	"debug/elf"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/cudaapi"
)

// Python waits: a thread blocked in queue.Queue.get, Event.wait,
// Condition.wait or a multiprocessing lock is blocked, with the GIL
// released, in a POSIX semaphore wait: CPython's locks are semaphores
// (3.10-3.12: PyThread_acquire_lock_timed calls sem_wait or sem_clockwait
// once a non-blocking sem_trywait failed; 3.13's parking lot the same), and
// so are multiprocessing's. gpuprof probes libc's sem_wait, sem_timedwait
// and sem_clockwait in processes that run CPython, so only acquires that
// may block are trapped (probing PyThread_acquire_lock_timed itself would
// trap every uncontended acquire in a shared-libpython build: +1.3 µs each,
// measured), and when a call blocked for long enough reads a few
// interpreter frames to learn which Python functions were waiting. No probe
// fires per Python call.

// pyLayout is where CPython keeps what the frame walk reads, for one minor
// version (x86-64, default build). Read from each version's headers with
// offsetof (python_test.go checks them against pyenv's headers).
type pyLayout struct {
	InterpMain, ThreadsHead, TstateNext, TstateID, TstateFrame uint32
	CFrameCurrent                                              int32 // -1: tstate's field is the frame
	FrameCode, FramePrevious                                   uint32
	FrameOwner                                                 int32  // -1: no owner field
	FrameLocals                                                uint32 // the arguments: a method's self first
	IDIsPthread                                                bool   // 3.10 keeps pthread_self(), not the TID
}

var pyLayouts = map[int]pyLayout{
	10: {InterpMain: 40, ThreadsHead: 8, TstateNext: 8, TstateID: 176, IDIsPthread: true, TstateFrame: 24, CFrameCurrent: -1,
		FrameCode: 32, FramePrevious: 24, FrameOwner: -1, FrameLocals: 352},
	11: {InterpMain: 48, ThreadsHead: 16, TstateNext: 8, TstateID: 160, TstateFrame: 56, CFrameCurrent: 8,
		FrameCode: 32, FramePrevious: 48, FrameOwner: 69, FrameLocals: 72},
	12: {InterpMain: 48, ThreadsHead: 72, TstateNext: 8, TstateID: 144, TstateFrame: 56, CFrameCurrent: 0,
		FrameCode: 0, FramePrevious: 8, FrameOwner: 70, FrameLocals: 72},
	13: {InterpMain: 640, ThreadsHead: 7344, TstateNext: 8, TstateID: 160, TstateFrame: 72, CFrameCurrent: -1,
		FrameCode: 0, FramePrevious: 8, FrameOwner: 70, FrameLocals: 72},
}

// PythonPlan is a CPython interpreter found in a process.
type PythonPlan struct {
	PID     int
	File    MappedFile
	Minor   int    // 3.Minor
	Runtime uint64 // &_PyRuntime in the process
	Err     error  // why Python waits are not timed, if they are not
	// Read and Write are the interpreter's own _Py_read and _Py_write, if
	// it exports them: Python-level reads (a multiprocessing queue's get
	// with no timeout blocks reading its pipe) are waits, writes mark
	// where a loop's logging of a step ends. They are probed here rather
	// than at libc's read and write, whose first instruction the kernel
	// single-steps (~5-14 µs a hit) and which C code calls too.
	Read, Write *Probe
}

// semWaits are the libc functions a Python thread blocks in, with the kind
// of wait each is (the probe's cookie, carried on the event); condWaits the
// one a thread taking the GIL back waits in when another holds it.
var (
	semWaits = []string{"sem_wait", "sem_timedwait", "sem_clockwait",
		// multiprocessing queues and connections (and the DataLoader
		// reading its workers' results) wait in select.poll or select.select
		"poll", "ppoll", "select", "pselect",
		// time.sleep (3.10 sleeps in select with no descriptors)
		"clock_nanosleep", "nanosleep",
		// a blocking socket with no timeout is read without a poll first:
		// a tensor from a multiprocessing queue has its shared memory's
		// descriptor passed from the sending process, and waits on it in
		// recvmsg. (Not recv and recvfrom: their first instruction is
		// single-stepped in glibc 2.36-2.39, ~5 µs a call, and C code such
		// as NCCL's and gloo's sockets calls them often.)
		"recvmsg"}
	// CPython's take_gil waits in pthread_cond_timedwait alone (3.6 to
	// 3.13: `objdump -d` of pyenv's libpython; none imports
	// pthread_cond_clockwait). The untimed and steady-clock waits are the
	// native threads' (CUDA's, NCCL's, std::condition_variable's), and
	// probed they trapped for nothing: the H200 engine's GIL probes hit
	// ~2,400 times a second where ~1,000 were a Python wait's tail.
	condWaits = []string{"pthread_cond_timedwait"}
)

// readCookie marks a wait in the interpreter's _Py_read.
var readCookie = uint16(len(semWaits))

// WaitFunc names which function a Python wait blocked in.
func WaitFunc(cookie uint16) string {
	switch {
	case int(cookie) < len(semWaits):
		return semWaits[cookie]
	case cookie == readCookie:
		return "read"
	}
	return "unknown"
}

// SemaphorePlan is where in libc the wait probes go.
type SemaphorePlan struct {
	File   MappedFile
	Probes []Probe // semaphore waits; API left zero: not CUDA entry points
	GIL    []Probe // condition waits, probed to time taking the GIL back
}

// IsLibc says whether a mapped file is the C library.
func IsLibc(base string) bool {
	return base == "libc.so.6" || strings.HasPrefix(base, "libc-2.") && strings.HasSuffix(base, ".so")
}

// PlanSemaphores finds the semaphore waits in a C library.
func PlanSemaphores(f MappedFile) (SemaphorePlan, error) {
	sp := SemaphorePlan{File: f}
	syms, err := ReadSymbols(f.HostPath, func(n string) bool {
		return slices.Contains(semWaits, n) || slices.Contains(condWaits, n)
	})
	if err != nil {
		return sp, err
	}
	seen := map[uint64]bool{}
	pick := func(names []string) []Probe {
		var out []Probe
		for i, name := range names {
			s, ok := syms[name]
			if !ok || seen[s.FileOffset] {
				continue
			}
			seen[s.FileOffset] = true
			// The cookie is the function's index in names.
			out = append(out, Probe{Symbol: s, Placement: Place(s.Code), API: cudaapi.API{ID: uint16(i)}})
		}
		return out
	}
	sp.Probes, sp.GIL = pick(semWaits), pick(condWaits)
	if len(sp.Probes) == 0 {
		return sp, fmt.Errorf("%s defines none of %v", f.Path, semWaits)
	}
	return sp, nil
}

var pythonFile = regexp.MustCompile(`^(lib)?python3\.(\d+)`)

// isPythonFile says whether a mapped file may hold the interpreter: the
// python3.X executable or libpython3.X.so.
func isPythonFile(base string) bool { return pythonFile.MatchString(base) }

// PlanPython looks for CPython in a mapped file. It returns nil when the
// file does not hold the interpreter (python3.X linked to libpython).
func PlanPython(procRoot string, pid int, f MappedFile) (*PythonPlan, error) {
	runtime, err := dataSymbol(f.HostPath, "_PyRuntime")
	if err != nil {
		return nil, nil
	}
	p := &PythonPlan{PID: pid, File: f}
	m := pythonFile.FindStringSubmatch(f.Base())
	p.Minor, _ = strconv.Atoi(m[2])
	bias, err := loadBias(procRoot, pid, f)
	if err != nil {
		p.Err = err
		return p, nil
	}
	p.Runtime = bias + runtime
	if syms, err := ReadSymbols(f.HostPath, func(n string) bool { return n == "_Py_read" || n == "_Py_write" }); err == nil {
		probe := func(name string, id uint16) *Probe {
			s, ok := syms[name]
			if !ok {
				return nil
			}
			return &Probe{Symbol: s, Placement: Place(s.Code), API: cudaapi.API{ID: id}}
		}
		p.Read, p.Write = probe("_Py_read", readCookie), probe("_Py_write", 0)
	}
	if _, ok := pyLayouts[p.Minor]; !ok {
		p.Err = fmt.Errorf("Python 3.%d: gpuprof knows the frame layout of 3.10 to 3.13", p.Minor)
	}
	return p, nil
}

// layout is the BPF map value for the plan's process.
func (p *PythonPlan) layout() bpf.PyLayout {
	l := pyLayouts[p.Minor]
	out := bpf.PyLayout{Runtime: p.Runtime, InterpMain: l.InterpMain, ThreadsHead: l.ThreadsHead, TstateNext: l.TstateNext,
		TstateId: l.TstateID, TstateFrame: l.TstateFrame, CframeCurrent: l.CFrameCurrent, FrameCode: l.FrameCode,
		FramePrevious: l.FramePrevious, FrameOwner: l.FrameOwner,
		FrameLocals: l.FrameLocals}
	if l.IDIsPthread {
		out.IdIsPthread = 1
	}
	return out
}

// dataSymbol returns the virtual address of a data symbol.
func dataSymbol(path, name string) (uint64, error) {
	f, err := elf.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if !plainSymbols(f) {
		return 0, fmt.Errorf("%s: compressed symbol tables", filepath.Base(path))
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	for _, s := range syms {
		if s.Name == name && s.Section != elf.SHN_UNDEF {
			return s.Value, nil
		}
	}
	return 0, fmt.Errorf("%s exports no %s", filepath.Base(path), name)
}

// loadBias is where the file's virtual address 0 lies in the process: the
// start of its mapping at file offset 0, less the first load segment's
// page-aligned address (0 for shared objects and PIE executables).
func loadBias(procRoot string, pid int, mf MappedFile) (uint64, error) {
	maps, err := readMaps(procRoot, pid)
	if err != nil {
		return 0, err
	}
	var start uint64
	for _, m := range maps {
		if m.offset == 0 && m.holds(mf) {
			start = m.start
			break
		}
	}
	if start == 0 {
		return 0, fmt.Errorf("no mapping of %s at offset 0 in PID %d", mf.Path, pid)
	}
	f, err := elf.Open(mf.HostPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			return start - (p.Vaddr &^ 0xfff), nil
		}
	}
	return 0, fmt.Errorf("%s has no load segment", mf.Path)
}

// pyProbeSet is a set of Python wait probes by name: wait functions
// (WaitFunc's names), "gil" (the condition waits taking the GIL back) and
// "write".
type pyProbeSet = map[string]bool

// attachPython tells the BPF programs where the interpreter's frames are
// and puts the wait probes on libc's semaphore waits and the
// interpreter's reads and writes: those named in only (by WaitFunc's
// names, "gil" and "write"), or not named in except, or all.
func attachPython(objs *bpf.Objects, p *PythonPlan, sems SemaphorePlan, only, except pyProbeSet) ([]link.Link, error) {
	pid := uint32(p.PID)
	if err := objs.Python.Put(pid, p.layout()); err != nil {
		return nil, fmt.Errorf("set Python layout for PID %d: %w", p.PID, err)
	}
	opt := func(pr *Probe) []Probe {
		if pr == nil {
			return nil
		}
		return []Probe{*pr}
	}
	var links []link.Link
	chosen := func(name string) bool {
		return (only == nil || only[name]) && !except[name]
	}
	for _, set := range []struct {
		file       MappedFile
		probes     []Probe
		entry, ret *ebpf.Program
		what       string
		name       func(Probe) string // its name for only and except
	}{{sems.File, sems.Probes, objs.PyLockEntry, objs.PyLockReturn, "semaphore wait", func(pr Probe) string { return WaitFunc(pr.API.ID) }},
		{sems.File, sems.GIL, objs.GilEntry, objs.GilReturn, "GIL wait", func(Probe) string { return "gil" }},
		{p.File, opt(p.Read), objs.PyLockEntry, objs.PyLockReturn, "read wait", func(Probe) string { return "read" }},
		{p.File, opt(p.Write), objs.IoWrite, nil, "write", func(Probe) string { return "write" }}} {
		set.probes = slices.DeleteFunc(slices.Clone(set.probes), func(pr Probe) bool { return !chosen(set.name(pr)) })
		if len(set.probes) == 0 {
			continue
		}
		var addrs, cookies []uint64
		for _, pr := range set.probes {
			addrs = append(addrs, pr.Address())
			cookies = append(cookies, waitCookie(pr.API.ID))
		}
		opts := &link.UprobeMultiOptions{Addresses: addrs, Cookies: cookies, PID: pid}
		entry, err := attachUprobes(set.file.HostPath, set.entry, opts, false)
		if err != nil {
			closeLinks(links)
			return nil, fmt.Errorf("attach %s probes in %s: %w", set.what, set.file.Path, err)
		}
		links = append(links, entry)
		if set.ret == nil {
			continue
		}
		ret, err := attachUprobes(set.file.HostPath, set.ret, opts, true)
		if err != nil {
			closeLinks(links)
			return nil, fmt.Errorf("attach %s return probes in %s: %w", set.what, set.file.Path, err)
		}
		links = append(links, returnLink{ret})
	}
	return links, nil
}
