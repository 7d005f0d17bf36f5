package probes

import (
	"debug/elf"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// symbolizer names the native frames of stack samples: an address is
// found among the executable mappings of its process (/proc/PID/maps,
// read again when an address falls outside them, at most once a
// mapsRetry), and then among the function symbols of the file mapped
// there. A file's symbols are read once, the first time a stack lands in
// it, and kept by file (device and inode) for every process mapping it.
type symbolizer struct {
	procRoot string

	mu    sync.Mutex
	procs map[uint32]*procMappings
	files map[string]*fileSymbols // by MappedFile.Key
}

// mapsRetry bounds how often a process's maps are read again for an
// address they did not hold (a library loaded since, or a bad frame
// pointer: the latter would otherwise reread them at every sample).
const mapsRetry = time.Second

type procMappings struct {
	maps   []mapping // executable file mappings, by start address
	readAt time.Time
	names  map[uint64]events.NativeFrame // by address: the frames named so far
}

// namesMax bounds a process's named addresses kept (a JIT or a bad
// unwinder makes them many): past it they are forgotten and named anew.
const namesMax = 1 << 18

type fileSymbols struct {
	base   string
	file   *os.File // kept open: names and code bytes are read from it
	loads  []elf.ProgHeader
	interp bool
	err    error

	// The tables are read the first time a frame or a launch site needs
	// them: a word above a launch that is no return address needs no
	// symbol, and libtorch_cpu.so's tables took ~0.4 s of CPU at an
	// attach on the H200 host for such words alone.
	ef          *elf.File
	funcsOnce   sync.Once
	funcs       *funcTable
	importsOnce sync.Once
	// imports names the functions the file calls in other files, by the
	// address of their PLT entry and of their GOT slot (kernelsite.go
	// reads where a call went).
	imports *importTable
}

func newSymbolizer(procRoot string) *symbolizer {
	return &symbolizer{procRoot: procRoot, procs: map[uint32]*procMappings{}, files: map[string]*fileSymbols{}}
}

// frames names addrs, innermost first, as process pid maps them.
func (s *symbolizer) frames(pid uint32, addrs []uint64, now time.Time) []events.NativeFrame {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc(pid, now)
	out := make([]events.NativeFrame, 0, len(addrs))
	for _, a := range addrs {
		f, ok := p.names[a]
		if !ok {
			var mapped bool
			f, mapped = s.name(pid, p, a, now)
			// An address no mapping held is not kept: the library may
			// be loaded after the maps were read (a CUDA runtime
			// dlopened just after the attach), and the maps are read
			// again for it once mapsRetry has passed.
			if mapped {
				if len(p.names) >= namesMax {
					clear(p.names)
				}
				p.names[a] = f
			}
		}
		out = append(out, f)
	}
	return out
}

// proc is what is known of pid's mappings, read at first sight. Under mu.
func (s *symbolizer) proc(pid uint32, now time.Time) *procMappings {
	p := s.procs[pid]
	if p == nil {
		p = &procMappings{names: map[uint64]events.NativeFrame{}}
		s.procs[pid] = p
		s.readMaps(pid, p, now)
	}
	return p
}

// codeAddr is an address in a file's executable mapping: which file,
// where in it, and the function symbol holding it, as the file spells it
// (mangled).
type codeAddr struct {
	module string // the file's base name
	path   string // the file as gpuprof opens it
	off    uint64 // the address's offset in the file
	symbol string // "" where no function symbol holds it
	file   *fileSymbols
}

// code is address a of process pid as a place in a file, its symbol not
// read (withSymbol reads it); ok is false where no executable file
// mapping holds it.
func (s *symbolizer) code(pid uint32, a uint64, now time.Time) (codeAddr, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.place(pid, s.proc(pid, now), a, now)
}

// place is address a of process pid as a place in a file (codeAddr, its
// symbol not read); ok is false where no executable file mapping holds
// a, even after the maps were read again (at most once a mapsRetry).
// Under mu.
func (s *symbolizer) place(pid uint32, p *procMappings, a uint64, now time.Time) (codeAddr, bool) {
	m, ok := findMapping(p.maps, a)
	if !ok && now.Sub(p.readAt) >= mapsRetry {
		s.readMaps(pid, p, now)
		m, ok = findMapping(p.maps, a)
	}
	if !ok {
		return codeAddr{}, false
	}
	f := m.file(s.procRoot, int(pid))
	return codeAddr{module: f.Base(), path: f.HostPath, off: a - m.start + m.offset, file: s.file(f)}, true
}

// withSymbol is c with its function symbol (codeAddr.symbol) read.
func (c codeAddr) withSymbol() codeAddr {
	if c.file != nil {
		if sym := c.file.symbol(c.off); sym != nil {
			c.symbol = c.file.table().raw(sym)
		}
	}
	return c
}

// file is what is known of f's symbols, read the first time. Under mu.
func (s *symbolizer) file(f MappedFile) *fileSymbols {
	fs := s.files[f.Key()]
	if fs == nil {
		fs = readFileSymbols(f)
		s.files[f.Key()] = fs
	}
	return fs
}

// forget drops what is known of a process that exited.
func (s *symbolizer) forget(pid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.procs, pid)
}

func (s *symbolizer) readMaps(pid uint32, p *procMappings, now time.Time) {
	p.readAt = now
	all, err := readMaps(s.procRoot, int(pid))
	if err != nil {
		return // gone: its frames stay unnamed
	}
	p.maps = p.maps[:0]
	for _, m := range all {
		if len(m.perms) >= 3 && m.perms[2] == 'x' && m.inode != 0 && filepath.IsAbs(m.path) {
			p.maps = append(p.maps, m)
		}
	}
	slices.SortFunc(p.maps, func(a, b mapping) int { return cmpU64(a.start, b.start) })
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// name is the frame at address a of process pid; mapped is false where
// no executable file mapping held a.
func (s *symbolizer) name(pid uint32, p *procMappings, a uint64, now time.Time) (frame events.NativeFrame, mapped bool) {
	c, ok := s.place(pid, p, a, now)
	if !ok {
		return events.NativeFrame{Offset: a}, false
	}
	frame = events.NativeFrame{Module: c.module, Offset: c.off, Interp: c.file.interp}
	if name, ok := c.file.lookup(c.off); ok {
		frame.Func, frame.Offset = name, 0
	}
	return frame, true
}

func findMapping(maps []mapping, a uint64) (mapping, bool) {
	i := sort.Search(len(maps), func(i int) bool { return maps[i].end > a })
	if i < len(maps) && maps[i].start <= a {
		return maps[i], true
	}
	return mapping{}, false
}

// interpFile matches the files of CPython's own code: the interpreter
// (python3.12, python3) and its shared library (libpython3.12.so.1.0).
var interpFile = regexp.MustCompile(`^(lib)?python[0-9.]*(d|m)?(\.so.*)?$`)

func readFileSymbols(f MappedFile) *fileSymbols {
	fs := &fileSymbols{base: f.Base(), interp: interpFile.MatchString(f.Base())}
	file, err := os.Open(f.HostPath)
	if err != nil {
		fs.err = err
		return fs
	}
	ef, err := elf.NewFile(file)
	if err != nil {
		file.Close()
		fs.err = err
		return fs
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			fs.loads = append(fs.loads, p.ProgHeader)
		}
	}
	fs.file, fs.ef = file, ef
	return fs
}

// table is the file's function symbols, read the first time; nil where
// the file could not be read.
func (fs *fileSymbols) table() *funcTable {
	fs.funcsOnce.Do(func() {
		if fs.ef == nil {
			return
		}
		start := time.Now()
		fs.funcs = readFuncTable(fs.file, fs.ef)
		slog.Debug("symbols read", "file", fs.base, "functions", len(fs.funcs.syms), "took", time.Since(start))
	})
	return fs.funcs
}

// importTable is the file's imports (fileSymbols.imports), read the
// first time; empty where the file could not be read.
func (fs *fileSymbols) importTable() *importTable {
	fs.importsOnce.Do(func() {
		ft := fs.table()
		if ft == nil {
			fs.imports = &importTable{}
			return
		}
		start := time.Now()
		fs.imports = readImports(fs.ef, ft)
		slog.Debug("imports read", "file", fs.base, "slots", fs.imports.len(), "took", time.Since(start))
	})
	return fs.imports
}

// readCode reads the file's bytes at off into b.
func (fs *fileSymbols) readCode(b []byte, off int64) error {
	if fs.file == nil {
		return fs.err
	}
	_, err := fs.file.ReadAt(b, off)
	return err
}

// lookup is the function holding file offset off, demangled without its
// parameters (frames merge by name: one name a function).
func (fs *fileSymbols) lookup(off uint64) (string, bool) {
	sym := fs.symbol(off)
	if sym == nil {
		return "", false
	}
	return fs.table().short(sym), true
}

// symbolAt is the function symbol holding the file's own address vaddr,
// nil where none.
func (fs *fileSymbols) symbolAt(vaddr uint64) *funcSymbol {
	ft := fs.table()
	if ft == nil {
		return nil
	}
	return ft.at(vaddr)
}

// vaddr is file offset off as an address of the file's own (its ELF
// virtual addresses); ok is false where no loaded segment holds it.
func (fs *fileSymbols) vaddr(off uint64) (uint64, bool) {
	for _, p := range fs.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}

// symbol is the function symbol holding file offset off, nil where none.
func (fs *fileSymbols) symbol(off uint64) *funcSymbol {
	vaddr, ok := fs.vaddr(off)
	if !ok {
		return nil
	}
	return fs.symbolAt(vaddr)
}
