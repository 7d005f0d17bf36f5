package probes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/cilium/ebpf/link"
	"golang.org/x/arch/x86/x86asm"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/pymem"
)

// Native anchors: a Python function that always calls one C function
// first and another last is timed by uprobes on those two, in every
// thread of the process, with no debug register (gpuprof.bpf.c,
// py_anchor_start and py_anchor_end). A watchpoint trap is a debug
// exception, which the hypervisors here make costly (BenchmarkPythonCallProbe:
// ~14 µs a trap on the dev VM, 4.4 µs on the H200 host), and a watched
// thread pays again at each context switch; an emulated uprobe costs
// 0.3-1 µs (docs/facts.md §2). On the H200 pair, a trainer's four watched gets
// a step cost it +3.7% of its get time (dispatch_wait on/off, 20 windows).
// Functions with no anchors here are watched (pycall.go).

// nativeRef names a function written in C as Python reaches it.
type nativeRef struct{ module, qualname string }

// callAnchors are a Python function's anchors: any of starts begins a
// call (from the function's frame or up to two frames below it), end's
// return, called from the function's own frame, ends it.
type callAnchors struct {
	name   string // what they time, for the links' owner
	starts []nativeRef
	end    nativeRef
}

// mpGetAnchors time multiprocessing's queue gets, 3.10 to 3.13: the read
// lock is taken first (`with self._rlock`, multiprocessing's Lock calling
// SemLock.__enter__ from its own __enter__; SemLock.acquire when a
// timeout is given), and what was read is unpickled last
// (`_ForkingPickler.loads(res)`), rebuilding any shared tensor inside.
var mpGetAnchors = callAnchors{
	name:   "multiprocessing gets",
	starts: []nativeRef{{"_multiprocessing", "SemLock.__enter__"}, {"_multiprocessing", "SemLock.acquire"}},
	end:    nativeRef{"multiprocessing.reduction", "ForkingPickler.loads"},
}

// pyAnchors are the functions timed by native anchors, by MODULE:QUALNAME.
var pyAnchors = map[string]callAnchors{
	"multiprocessing.queues:Queue.get":       mpGetAnchors,
	"multiprocessing.queues:SimpleQueue.get": mpGetAnchors,
}

// NativeAnchors names the C functions that time module:qualname (its
// starts, then its end), or nil where it is watched.
func NativeAnchors(module, qualname string) []string {
	a, ok := pyAnchors[module+":"+qualname]
	if !ok {
		return nil
	}
	var out []string
	for _, r := range append(append([]nativeRef{}, a.starts...), a.end) {
		out = append(out, r.module+"."+r.qualname)
	}
	return out
}

// nativeSite is a C function's probe address in a file the process maps.
type nativeSite struct {
	file   MappedFile
	offset uint64 // file offset of the probe
	place  Placement
}

// anchorOrWatch attaches w's native anchors in t, and says whether they
// time it now. Where they cannot be (a module not imported, a pure-Python
// pickle), w is watched instead, from then on, if its debug registers are
// free; else it returns why it cannot be timed at all.
func (py *cpython) anchorOrWatch(t *target, w *pyCallWatch) (bool, error) {
	err := py.anchorCall(t, w, w.fn)
	if err == nil {
		if w.lazy {
			py.cfg.Log.Debug("timing Python function by native anchors: a thread was seen waiting in it", "pid", t.pid, "probe", w.probe.Spec())
		}
		return true, nil
	}
	w.anchorable = false
	py.cfg.Log.Debug("Python function's native anchors not found: watching it", "pid", t.pid, "probe", w.probe.Spec(), "why", err)
	return false, py.freeRegisters(t, w, w.sites())
}

// anchorCall times w's function in t by its native anchors, if it
// has any and they can all be found; else it returns an error.
func (py *cpython) anchorCall(t *target, w *pyCallWatch, fn *pymem.Function) error {
	mem := py.mem(t)
	if mem == nil {
		return fmt.Errorf("PID %d: its CPython objects cannot be read", t.pid)
	}
	a, ok := pyAnchors[fn.Module+":"+fn.Qualname]
	if !ok {
		return fmt.Errorf("no native anchors known for %s:%s", fn.Module, fn.Qualname)
	}
	key := bpf.PyAnchorKey{Pid: uint32(t.pid), Code: fn.Code}
	for _, o := range t.pyCalls {
		if o != w && o.anchors != nil && o.anchorSet == a.name {
			// Another function of the same anchors (Queue.get and
			// SimpleQueue.get both probed): their probes serve both, each
			// hit finding its own function's frame; a second set would
			// trap every call twice over.
			if err := py.objs.PyAnchorCodes.Put(key, bpf.PySite{Api: w.probe.ID}); err != nil {
				return fmt.Errorf("BPF map py_anchor_codes: %w", err)
			}
			w.anchors, w.anchorSet, w.anchorPlaces = []link.Link{}, a.name, o.anchorPlaces
			return nil
		}
	}
	maps, err := readMaps(py.cfg.ProcRoot, t.pid)
	if err != nil {
		return err
	}
	locate := func(r nativeRef, ret bool) (nativeSite, error) {
		addr, err := mem.NativeFunction(t.python.Runtime, r.module, r.qualname)
		if err != nil {
			return nativeSite{}, err
		}
		return placeNative(py.cfg.ProcRoot, t.pid, maps, addr, ret)
	}
	var starts []nativeSite
	for _, r := range a.starts {
		site, err := locate(r, false)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", r.module, r.qualname, err)
		}
		starts = append(starts, site)
	}
	end, err := locate(a.end, true)
	if err != nil {
		return fmt.Errorf("%s.%s: %w", a.end.module, a.end.qualname, err)
	}
	w.anchorPlaces = nil
	for _, st := range append(starts, end) {
		w.anchorPlaces = append(w.anchorPlaces, st.place)
		py.cfg.Log.Debug("native anchor", "pid", t.pid, "file", st.file.Path, "offset", st.offset, "placement", st.place)
	}
	if err := py.objs.PyAnchorCodes.Put(key, bpf.PySite{Api: w.probe.ID}); err != nil {
		return fmt.Errorf("BPF map py_anchor_codes: %w", err)
	}
	links, err := attachAnchors(py.objs, t.pid, starts, end)
	if err != nil {
		py.objs.PyAnchorCodes.Delete(key)
		return err
	}
	w.anchors, w.anchorSet = links, a.name
	return nil
}

// attachAnchors puts the start probes and the end's return probe in pid.
func attachAnchors(objs *bpf.Objects, pid int, starts []nativeSite, end nativeSite) ([]link.Link, error) {
	var links []link.Link
	undo := func(err error) ([]link.Link, error) {
		closeLinks(links)
		return nil, err
	}
	byFile := map[string][]uint64{}
	files := map[string]MappedFile{}
	for _, st := range starts {
		k := st.file.Key()
		files[k] = st.file
		if !slices.Contains(byFile[k], st.offset) {
			byFile[k] = append(byFile[k], st.offset)
		}
	}
	for k, offs := range byFile {
		l, err := attachUprobes(files[k].HostPath, objs.PyAnchorStart, &link.UprobeMultiOptions{Addresses: offs, PID: uint32(pid)}, false)
		if err != nil {
			return undo(fmt.Errorf("attach anchor probes to %s in PID %d: %w", files[k].Path, pid, err))
		}
		links = append(links, l)
	}
	l, err := attachUprobes(end.file.HostPath, objs.PyAnchorEnd, &link.UprobeMultiOptions{Addresses: []uint64{end.offset}, PID: uint32(pid)}, true)
	if err != nil {
		return undo(fmt.Errorf("attach anchor return probe to %s in PID %d: %w", end.file.Path, pid, err))
	}
	return append(links, returnLink{l}), nil
}

// placeNative finds the file and offset of the code at addr in pid and
// where on it a probe goes: on its first emulated instruction (Place).
// An entry probe (ret false) on a function that only loads registers and
// jumps on (a tail call, as SemLock.__enter__ to the acquire it shares
// with SemLock.acquire) goes on the jump's target when that has one: the
// registers loaded are nothing to the BPF program, which reads the
// thread's frames. A return probe needs the stack as the call left it,
// so it stays at the function. With no emulated instruction the probe
// goes at the function's start, single-stepped: slower, still no debug
// register.
func placeNative(procRoot string, pid int, maps []mapping, addr uint64, ret bool) (nativeSite, error) {
	first, code, err := mappedCode(procRoot, pid, maps, addr)
	if err != nil {
		return nativeSite{}, err
	}
	site, firstCode := first, code
	for hop := 0; ; hop++ {
		site.place = Place(code)
		if site.place.Emulated {
			site.offset += site.place.Offset
			return site, nil
		}
		target, ok := tailJump(code, addr)
		if ret || hop == 2 || !ok {
			break
		}
		if site, code, err = mappedCode(procRoot, pid, maps, target); err != nil {
			break
		}
		addr = target
	}
	first.place = Place(firstCode) // at +0, naming its first instruction, single-stepped
	first.place.Offset = 0
	return first, nil
}

// mappedCode finds the executable mapping of addr and reads its first
// bytes from the file.
func mappedCode(procRoot string, pid int, maps []mapping, addr uint64) (nativeSite, []byte, error) {
	for _, m := range maps {
		if addr < m.start || addr >= m.end {
			continue
		}
		if len(m.perms) < 3 || m.perms[2] != 'x' || m.inode == 0 || m.path == "" {
			return nativeSite{}, nil, fmt.Errorf("%#x is in no executable file mapping of PID %d", addr, pid)
		}
		f := m.file(procRoot, pid)
		off := m.offset + addr - m.start
		fh, err := os.Open(f.HostPath)
		if err != nil {
			return nativeSite{}, nil, err
		}
		defer fh.Close()
		code := make([]byte, 2*codePeek) // a tail jump may end past codePeek
		n, err := fh.ReadAt(code, int64(off))
		if err != nil && !errors.Is(err, io.EOF) {
			return nativeSite{}, nil, fmt.Errorf("read %s at %#x: %w", f.Path, off, err)
		}
		return nativeSite{file: f, offset: off}, code[:n], nil
	}
	return nativeSite{}, nil, fmt.Errorf("%#x is in no mapping of PID %d", addr, pid)
}

// tailJump is where code at addr jumps to, when all it does first is load
// registers other than the stack pointer: its target does the work.
func tailJump(code []byte, addr uint64) (uint64, bool) {
	off := 0
	for i := 0; i < 4 && off < len(code); i++ {
		rest := code[off:]
		if bytes.HasPrefix(rest, endbr64) {
			off += len(endbr64)
			continue
		}
		inst, err := x86asm.Decode(rest, 64)
		if err != nil {
			return 0, false
		}
		switch inst.Op {
		case x86asm.JMP:
			rel, ok := inst.Args[0].(x86asm.Rel)
			if !ok {
				return 0, false
			}
			return uint64(int64(addr) + int64(off+inst.Len) + int64(rel)), true
		case x86asm.MOV, x86asm.LEA, x86asm.XOR:
			dst, ok := inst.Args[0].(x86asm.Reg)
			if !ok || regFamily(dst) == x86asm.RSP {
				return 0, false
			}
		default:
			return 0, false
		}
		off += inst.Len
	}
	return 0, false
}
