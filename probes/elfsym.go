package probes

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"

	"github.com/gpuprof/gpuprof/cudaapi"
)

// Symbol is a function symbol with where its code sits in the file.
type Symbol struct {
	Name       string // as in the symbol table, without a version suffix
	Value      uint64 // virtual address
	Size       uint64
	FileOffset uint64 // what the kernel's uprobe API wants
	Code       []byte // the first bytes of the function, for placement
}

// codePeek is how many bytes of each function placement looks at.
const codePeek = 16

// ReadSymbols returns the defined function symbols of an ELF file whose
// names (without version) satisfy want, from .dynsym and then .symtab, so
// that libraries built with a version script (symbols only in .symtab) and
// versioned exports (cudaEventRecord@@libcudart.so.13) are both found.
func ReadSymbols(path string, want func(string) bool) (map[string]Symbol, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open ELF %s: %w", path, err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("open ELF %s: machine %s, gpuprof probes x86-64 only", path, f.Machine)
	}
	out := map[string]Symbol{}
	hidden := map[string]bool{} // names recorded from a non-default version (name@VER)
	for _, read := range []func() ([]elf.Symbol, error){f.DynamicSymbols, f.Symbols} {
		if !plainSymbols(f) {
			break
		}
		syms, err := read()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return nil, fmt.Errorf("read symbols of %s: %w", path, err)
		}
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC && elf.ST_TYPE(s.Info) != elf.STT_GNU_IFUNC {
				continue
			}
			if s.Section == elf.SHN_UNDEF || s.Value == 0 {
				continue
			}
			name := cudaapi.StripVersion(s.Name)
			isHidden := s.HasVersion && s.VersionIndex.IsHidden()
			// A name can come twice: an old version kept for old binaries
			// (pthread_cond_timedwait@GLIBC_2.2.5) and the default one
			// (@@GLIBC_2.3.2) that programs bind to now. Keep the default.
			if _, dup := out[name]; (dup && !(hidden[name] && !isHidden)) || !want(name) {
				continue
			}
			hidden[name] = isHidden
			off, ok := fileOffset(f, s.Value)
			if !ok {
				continue
			}
			sym := Symbol{Name: name, Value: s.Value, Size: s.Size, FileOffset: off}
			sym.Code = readCode(f, off, s.Size)
			out[name] = sym
		}
	}
	return out, nil
}

// plainSymbols says whether f's symbol tables and their strings are
// stored as they are: a compressed one says its own size, and 16 KB of a
// zlib stream inflate to 16 MB of symbols (debug/elf reads a table
// whole). Linkers compress debug sections only.
func plainSymbols(f *elf.File) bool {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_SYMTAB && s.Type != elf.SHT_DYNSYM {
			continue
		}
		if s.Flags&elf.SHF_COMPRESSED != 0 || int(s.Link) < len(f.Sections) && f.Sections[s.Link].Flags&elf.SHF_COMPRESSED != 0 {
			return false
		}
	}
	return true
}

// fileOffset converts a virtual address to a file offset through the
// executable load segment that holds it.
func fileOffset(f *elf.File, vaddr uint64) (uint64, bool) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || p.Flags&elf.PF_X == 0 {
			continue
		}
		if vaddr >= p.Vaddr && vaddr < p.Vaddr+p.Filesz {
			return vaddr - p.Vaddr + p.Off, true
		}
	}
	return 0, false
}

func readCode(f *elf.File, off, size uint64) []byte {
	n := uint64(codePeek)
	if size > 0 && size < n {
		n = size
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || off < p.Off || off >= p.Off+p.Filesz {
			continue
		}
		buf := make([]byte, n)
		k, err := p.ReadAt(buf, int64(off-p.Off))
		if err != nil && !errors.Is(err, io.EOF) {
			return nil
		}
		return buf[:k]
	}
	return nil
}
