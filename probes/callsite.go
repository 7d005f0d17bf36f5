package probes

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/arch/x86/x86asm"
)

// callSite finds the call instruction that returns to caller in pid and
// checks that it calls fn (callTarget); a probe there sees the call's
// arguments in the registers, as one at fn's entry does.
func callSite(procRoot string, pid int, maps []mapping, caller, fn uint64) (nativeSite, error) {
	mem, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "mem"))
	if err != nil {
		return nativeSite{}, err
	}
	defer mem.Close()
	read := func(addr uint64, n int) ([]byte, error) {
		b := make([]byte, n)
		if _, err := mem.ReadAt(b, int64(addr)); err != nil {
			return nil, fmt.Errorf("read %d bytes at %#x of PID %d: %w", n, addr, pid, err)
		}
		return b, nil
	}
	at, inst, err := callTarget(read, caller, fn)
	if err != nil {
		return nativeSite{}, err
	}
	site, _, err := mappedCode(procRoot, pid, maps, at)
	if err != nil {
		return nativeSite{}, err
	}
	// The kernel emulates a call rel32 (x86 uprobes' branch ops), as it
	// does a push: no single step. A call through memory is stepped.
	site.place = Placement{Insn: insnText(inst), Emulated: inst.Len == 5}
	return site, nil
}

// callTarget decodes the call that returns to caller, read through read,
// and checks that it reaches fn: straight (call rel32), through a pointer
// in memory (call *disp(%rip): a -fno-plt GOT slot, a table of function
// pointers), or through a PLT stub ([endbr64] [bnd] jmp *disp(%rip))
// whose GOT slot holds fn. It returns the call's address. A call through
// a register, or one that reaches fn by way of another function (a tail
// call), cannot be checked and is refused.
func callTarget(read func(addr uint64, n int) ([]byte, error), caller, fn uint64) (uint64, x86asm.Inst, error) {
	const longest = 6 // call *disp32(%rip)
	if caller < 1<<12 {
		return 0, x86asm.Inst{}, fmt.Errorf("return address %#x: no call before it", caller)
	}
	before, err := read(caller-longest, longest)
	if err != nil {
		return 0, x86asm.Inst{}, err
	}
	word := func(addr uint64) (uint64, error) {
		b, err := read(addr, 8)
		if err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint64(b), nil
	}
	var target uint64
	inst, err := x86asm.Decode(before[1:], 64)
	if rel, ok := inst.Args[0].(x86asm.Rel); err == nil && inst.Op == x86asm.CALL && inst.Len == 5 && ok {
		target = uint64(int64(caller) + int64(rel))
		if target != fn {
			if target, err = pltTarget(read, word, target); err != nil {
				return 0, inst, fmt.Errorf("the call at %#x: %w", caller-5, err)
			}
		}
	} else {
		inst, err = x86asm.Decode(before, 64)
		if err != nil || inst.Op != x86asm.CALL || inst.Len != 6 {
			return 0, inst, fmt.Errorf("return address %#x follows no direct or memory call", caller)
		}
		slot, ok := ripSlot(inst, caller)
		if !ok {
			return 0, inst, fmt.Errorf("return address %#x follows a call through %v", caller, inst.Args[0])
		}
		if target, err = word(slot); err != nil {
			return 0, inst, err
		}
	}
	at := caller - uint64(inst.Len)
	if target != fn {
		return 0, inst, fmt.Errorf("the call at %#x goes to %#x, not the record function at %#x", at, target, fn)
	}
	return at, inst, nil
}

// pltTarget is where the PLT stub at stub jumps to, through its GOT slot.
func pltTarget(read func(uint64, int) ([]byte, error), word func(uint64) (uint64, error), stub uint64) (uint64, error) {
	code, err := read(stub, 16)
	if err != nil {
		return 0, err
	}
	off := 0
	if bytes.HasPrefix(code, endbr64) {
		off = len(endbr64)
	}
	inst, err := x86asm.Decode(code[off:], 64)
	if err != nil || inst.Op != x86asm.JMP {
		return 0, fmt.Errorf("it goes to %#x, neither the record function nor a PLT stub", stub)
	}
	slot, ok := ripSlot(inst, stub+uint64(off+inst.Len))
	if !ok {
		return 0, fmt.Errorf("it goes to %#x, a jump through %v", stub, inst.Args[0])
	}
	return word(slot)
}

// ripSlot is the address a RIP-relative memory operand names, next being
// the address of the instruction after it.
func ripSlot(inst x86asm.Inst, next uint64) (uint64, bool) {
	m, ok := inst.Args[0].(x86asm.Mem)
	if !ok || m.Base != x86asm.RIP || m.Index != 0 {
		return 0, false
	}
	return uint64(int64(next) + m.Disp), true
}
