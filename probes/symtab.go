package probes

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/ianlancetaylor/demangle"

	"github.com/gpuprof/gpuprof/cudaapi"
)

// A big C++ library's symbol tables are big: libtorch_cuda.so's are read
// the first time a kernel's launch site or a stack lands in it, at an
// attach's first launches, beside a job that may be launch-bound.
// debug/elf's Symbols makes a string of every name: ~1.2 KB and ~1.3 µs a
// symbol (BenchmarkReadFileSymbols, LLVM's 35k functions: 45 ms, 43 MB),
// for tables of hundreds of thousands. So the tables' entries are decoded
// here as they stream by, each function kept as its address, size and
// where its name is (24 bytes), and a name is read from the file when a
// frame or a launch site lands in its function.

const elfSymSize = 24 // an Elf64_Sym

// symTable is one of a file's symbol tables and the string table its
// names are in.
type symTable struct {
	syms           *elf.Section
	strOff, strLen uint64 // the string table's bytes in the file
}

// symTables are a file's symbol tables: .dynsym first (its names are the
// ones programs link against), then .symtab.
func symTables(ef *elf.File) []symTable {
	var out []symTable
	for _, typ := range []elf.SectionType{elf.SHT_DYNSYM, elf.SHT_SYMTAB} {
		for _, s := range ef.Sections {
			if s.Type != typ || s.Flags&elf.SHF_COMPRESSED != 0 || s.Link == 0 || int(s.Link) >= len(ef.Sections) {
				continue
			}
			str := ef.Sections[s.Link]
			if str.Type != elf.SHT_STRTAB || str.Flags&elf.SHF_COMPRESSED != 0 {
				continue
			}
			out = append(out, symTable{syms: s, strOff: str.Offset, strLen: str.Size})
		}
	}
	return out
}

// elfSym is the part of a symbol table entry the symbolizer uses.
type elfSym struct {
	name        uint32 // offset in the string table
	info        byte
	shndx       uint16
	value, size uint64
}

func (s elfSym) function() bool {
	t := elf.ST_TYPE(s.info)
	return (t == elf.STT_FUNC || t == elf.STT_GNU_IFUNC) && s.value != 0 && elf.SectionIndex(s.shndx) != elf.SHN_UNDEF
}

// each calls fn with each entry of the table, index 0 (the null symbol)
// left out.
func (t symTable) each(fn func(i int, s elfSym)) error {
	i := 0
	return eachRecord(t.syms, elfSymSize, func(b []byte) {
		if i > 0 {
			fn(i, decodeSym(b))
		}
		i++
	})
}

// eachRecord calls fn with each size-byte record of sec, read a chunk
// at a time: a big C++ library's tables and relocations are tens of MB,
// and a read (or a bufio copy) a record made their decoding the larger
// part of an attach's CPU. A section cut short ends at its last whole
// record.
func eachRecord(sec *elf.Section, size int, fn func(b []byte)) error {
	const chunk = 256 << 10
	buf := make([]byte, chunk-chunk%size)
	r := sec.Open()
	for {
		n, err := io.ReadFull(r, buf)
		for i := 0; i+size <= n; i += size {
			fn(buf[i : i+size])
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil
			}
			return err
		}
	}
}

// entry reads the table's i-th entry.
func (t symTable) entry(i uint64) (elfSym, bool) {
	var b [elfSymSize]byte
	if i == 0 || (i+1)*elfSymSize > t.syms.Size {
		return elfSym{}, false
	}
	if _, err := t.syms.ReadAt(b[:], int64(i*elfSymSize)); err != nil {
		return elfSym{}, false
	}
	return decodeSym(b[:]), true
}

func decodeSym(b []byte) elfSym {
	le := binary.LittleEndian
	return elfSym{name: le.Uint32(b), info: b[4], shndx: le.Uint16(b[6:]), value: le.Uint64(b[8:]), size: le.Uint64(b[16:])}
}

// name reads the name at off in the table's strings from the file.
func (t symTable) name(r io.ReaderAt, off uint32) string {
	var out []byte
	buf := make([]byte, 256)
	for at := uint64(off); at < t.strLen; at += uint64(len(buf)) {
		n, err := r.ReadAt(buf[:min(uint64(len(buf)), t.strLen-at)], int64(t.strOff+at))
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			return string(append(out, buf[:i]...))
		}
		out = append(out, buf[:n]...)
		if err != nil {
			break
		}
	}
	return string(out)
}

// funcSymbol is a function of a file: where it is, and where its name is.
type funcSymbol struct {
	start uint64
	size  uint32
	name  uint32 // offset in table's strings
	entry uint32 // index in the table: of aliases, the first is kept
	table uint8  // index in fileSymbols.tables
}

func (s *funcSymbol) end() uint64 { return s.start + uint64(max(s.size, 1)) }

// symbolNames are a function's names once read: as the file spells it
// (mangled, its version left out) and demangled without parameters.
type symbolNames struct{ raw, short string }

// funcTable is a file's function symbols by address, with the file open
// to read their names from when they are asked for.
type funcTable struct {
	file   *os.File
	tables []symTable
	syms   []funcSymbol // by address, one a start address

	mu    sync.Mutex
	names map[uint64]*symbolNames // by start address: those read so far
}

// readFuncTable reads the function symbols of ef, open as file, which
// the table keeps open (its names are read from it).
func readFuncTable(file *os.File, ef *elf.File) *funcTable {
	ft := &funcTable{file: file, tables: symTables(ef), names: map[uint64]*symbolNames{}}
	// Counted first, then kept: grown by append, libtorch_cpu.so's 356k
	// functions were copied ~twice over, and the copies were a third of
	// the table's CPU.
	n := 0
	for _, t := range ft.tables {
		t.each(func(_ int, s elfSym) {
			if s.function() {
				n++
			}
		})
	}
	ft.syms = make([]funcSymbol, 0, n)
	for ti, t := range ft.tables {
		t.each(func(i int, s elfSym) { // a table cut short keeps what was read
			if s.function() && len(ft.syms) < n { // (a file changed between the passes)
				ft.syms = append(ft.syms, funcSymbol{start: s.value, size: uint32(min(s.size, 1<<32-1)), name: s.name, entry: uint32(i), table: uint8(ti)})
			}
		})
	}
	ft.syms = byAddress(ft.syms)
	return ft
}

// byAddress sorts syms by address and keeps one a start address: of
// those at one address, the first in syms, which holds .dynsym's before
// .symtab's (a function named in both keeps the name programs link
// against) and a table's entries in order (of its aliases, its first).
//
// libtorch_cpu.so has ~356k functions: sorted by a comparison function
// they took ~0.25 s of an attach's CPU. Where every address fits in 40
// bits (a library's own addresses, from 0) and the functions are under
// 2^24, each is sorted as one number, its address and then its place in
// syms.
func byAddress(syms []funcSymbol) []funcSymbol {
	const seqBits = 24
	fits := len(syms) < 1<<seqBits
	for i := range syms {
		fits = fits && syms[i].start < 1<<(64-seqBits)
	}
	var out []funcSymbol
	if fits {
		keys := make([]uint64, len(syms))
		for i := range syms {
			keys[i] = syms[i].start<<seqBits | uint64(i)
		}
		slices.Sort(keys)
		out = make([]funcSymbol, 0, len(syms))
		for _, k := range keys {
			s := syms[k&(1<<seqBits-1)]
			if len(out) == 0 || out[len(out)-1].start != s.start {
				out = append(out, s)
			}
		}
		return out
	}
	slices.SortStableFunc(syms, func(a, b funcSymbol) int { return cmpU64(a.start, b.start) })
	out = slices.CompactFunc(syms, func(a, b funcSymbol) bool { return a.start == b.start })
	return slices.Clip(out)
}

// at is the function holding the file's own address vaddr, nil where none.
func (ft *funcTable) at(vaddr uint64) *funcSymbol {
	i, found := slices.BinarySearchFunc(ft.syms, vaddr, func(s funcSymbol, a uint64) int { return cmpU64(s.start, a) })
	if !found {
		i--
	}
	if i < 0 || vaddr >= ft.syms[i].end() {
		return nil
	}
	return &ft.syms[i]
}

// namesOf reads (once) the names of sym, one of ft's.
func (ft *funcTable) namesOf(sym *funcSymbol, short bool) *symbolNames {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	n := ft.names[sym.start]
	if n == nil {
		n = &symbolNames{raw: cudaapi.StripVersion(ft.tables[sym.table].name(ft.file, sym.name))}
		ft.names[sym.start] = n
	}
	if short && n.short == "" {
		n.short = demangle.Filter(n.raw, demangle.NoParams)
	}
	return n
}

// raw is sym's name as the file spells it.
func (ft *funcTable) raw(sym *funcSymbol) string { return ft.namesOf(sym, false).raw }

// short is sym's name demangled without parameters.
func (ft *funcTable) short(sym *funcSymbol) string { return ft.namesOf(sym, true).short }
