package probes

import (
	"debug/elf"
	"encoding/binary"
	"io"
	"sync"
)

// readImports maps the addresses through which a file calls functions of
// other files to their symbols: each GOT slot the dynamic loader fills
// with an imported function (R_X86_64_JMP_SLOT, and R_X86_64_GLOB_DAT
// for code built with -fno-plt, whose calls go through the slot itself),
// and each PLT entry (.plt, .plt.sec) that jumps through a slot. A call's
// target then says which function it called (kernelsite.go: the
// runtime's launch entry, or a stale call to something else).
//
// The relocations are streamed (a C++ library's .rela.dyn holds mostly
// its vtables' and data's relocations; symtab.go says why tables are not
// read whole), and a symbol's entry and name are read only when a call's
// target is looked up: read for each of libtorch_cpu.so's 65k imports,
// they were two reads of the file each, at an attach.
func readImports(ef *elf.File, ft *funcTable) *importTable {
	if len(ft.tables) == 0 || ft.tables[0].syms.Type != elf.SHT_DYNSYM {
		return &importTable{}
	}
	it := &importTable{dyn: ft.tables[0], file: ft.file, slots: map[uint64]uint32{}, names: map[uint32]string{}}
	for _, name := range []string{".rela.plt", ".rela.dyn"} {
		sec := ef.Section(name)
		if sec == nil || sec.Type != elf.SHT_RELA || sec.Flags&elf.SHF_COMPRESSED != 0 {
			continue
		}
		eachRecord(sec, 24, func(b []byte) { // an Elf64_Rela; a section cut short keeps what was read
			off, info := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
			typ, sym := elf.R_X86_64(info&0xffffffff), uint32(info>>32)
			if (typ == elf.R_X86_64_JMP_SLOT || typ == elf.R_X86_64_GLOB_DAT) && sym != 0 {
				it.slots[off] = sym
			}
		})
	}
	for _, name := range []string{".plt.sec", ".plt"} {
		sec, data := section(ef, name)
		for e := 0; e+16 <= len(data); e += 16 {
			if slot, ok := pltSlot(data[e:e+16], sec.Addr+uint64(e)); ok {
				if sym, ok := it.slots[slot]; ok {
					it.slots[sec.Addr+uint64(e)] = sym
				}
			}
		}
	}
	return it
}

// importTable is a file's imports by the addresses a call to one goes
// through (readImports), named when looked up.
type importTable struct {
	dyn   symTable
	file  io.ReaderAt
	slots map[uint64]uint32 // GOT slot or PLT entry: its symbol's index in .dynsym

	mu    sync.Mutex
	names map[uint32]string // by symbol index, those read: "" where not a function
}

// name is the function a call through addr calls; false where addr is no
// import's slot or PLT entry, or its symbol is not a function's.
func (it *importTable) name(addr uint64) (string, bool) {
	sym, ok := it.slots[addr]
	if !ok {
		return "", false
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	n, ok := it.names[sym]
	if !ok {
		if s, found := it.dyn.entry(uint64(sym)); found && (elf.ST_TYPE(s.info) == elf.STT_FUNC || elf.SectionIndex(s.shndx) == elf.SHN_UNDEF) {
			n = it.dyn.name(it.file, s.name)
		}
		it.names[sym] = n
	}
	return n, n != ""
}

// len is how many addresses lead to an import.
func (it *importTable) len() int { return len(it.slots) }

// section is the file's section of that name and its bytes; none where
// the file has no such section, or it cannot be read.
func section(ef *elf.File, name string) (*elf.Section, []byte) {
	sec := ef.Section(name)
	if sec == nil || sec.Type != elf.SHT_PROGBITS || sec.Flags&elf.SHF_COMPRESSED != 0 {
		return nil, nil // code is stored as it is
	}
	data, err := sec.Data()
	if err != nil {
		return nil, nil
	}
	return sec, data
}

// pltSlot is the GOT slot a 16-byte PLT entry at addr jumps through: its
// jmp *disp(%rip) (ff 25), after an endbr64 and a bnd prefix where the
// entry has them.
func pltSlot(entry []byte, addr uint64) (uint64, bool) {
	i := 0
	if len(entry) >= 4 && entry[0] == 0xf3 && entry[1] == 0x0f && entry[2] == 0x1e && entry[3] == 0xfa {
		i = 4 // endbr64
	}
	if i < len(entry) && entry[i] == 0xf2 {
		i++ // bnd
	}
	if i+6 > len(entry) || entry[i] != 0xff || entry[i+1] != 0x25 {
		return 0, false
	}
	disp := int32(binary.LittleEndian.Uint32(entry[i+2:]))
	return uint64(int64(addr) + int64(i+6) + int64(disp)), true
}
