package probes

import (
	"debug/elf"
	"encoding/binary"
)

// readImports maps the addresses through which a file calls functions of
// other files to their names: each GOT slot the dynamic loader fills
// with an imported function (R_X86_64_JMP_SLOT, and R_X86_64_GLOB_DAT
// for code built with -fno-plt, whose calls go through the slot itself),
// and each PLT entry (.plt, .plt.sec) that jumps through a slot. A call's
// target then says which function it called (kernelsite.go: the
// runtime's launch entry, or a stale call to something else).
func readImports(ef *elf.File) map[uint64]string {
	syms, err := ef.DynamicSymbols()
	if err != nil {
		return nil
	}
	out := map[uint64]string{}
	for _, name := range []string{".rela.plt", ".rela.dyn"} {
		_, data := section(ef, name)
		for i := 0; i+24 <= len(data); i += 24 {
			off, info := binary.LittleEndian.Uint64(data[i:]), binary.LittleEndian.Uint64(data[i+8:])
			typ, sym := elf.R_X86_64(info&0xffffffff), info>>32
			if (typ != elf.R_X86_64_JMP_SLOT && typ != elf.R_X86_64_GLOB_DAT) || sym == 0 || int(sym) > len(syms) {
				continue
			}
			if s := syms[sym-1]; elf.ST_TYPE(s.Info) == elf.STT_FUNC || s.Section == elf.SHN_UNDEF {
				out[off] = s.Name
			}
		}
	}
	for _, name := range []string{".plt.sec", ".plt"} {
		sec, data := section(ef, name)
		for e := 0; e+16 <= len(data); e += 16 {
			if slot, ok := pltSlot(data[e:e+16], sec.Addr+uint64(e)); ok {
				if n, ok := out[slot]; ok {
					out[sec.Addr+uint64(e)] = n
				}
			}
		}
	}
	return out
}

// section is the file's section of that name and its bytes; none where
// the file has no such section, or it cannot be read.
func section(ef *elf.File, name string) (*elf.Section, []byte) {
	sec := ef.Section(name)
	if sec == nil {
		return nil, nil
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
