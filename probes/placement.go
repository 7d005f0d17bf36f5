package probes

import (
	"bytes"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// Placement is where in a function a probe goes, and what that costs.
//
// The instruction under a uprobe decides its cost (docs/facts.md §2): the kernel
// emulates push and nop5, and single-steps anything else out of line, which
// under the hypervisors here is 8-15x slower. Functions built with CET start
// with endbr64, which is single-stepped; the push right after it is
// emulated, and since endbr64 changes no register and no stack, a probe at
// the push still sees the arguments and the return address at the stack
// pointer, so entry and return probes both work there.
type Placement struct {
	Offset   uint64 // from the start of the function
	Insn     string // the instruction the probe replaces
	Emulated bool   // the kernel emulates it: the cheap path
}

func (p Placement) String() string {
	how := "single-stepped (slow)"
	if p.Emulated {
		how = "emulated"
	}
	return fmt.Sprintf("+%d %s, %s", p.Offset, p.Insn, how)
}

// Place chooses the probe offset for a function whose first bytes are code:
// the first emulated instruction, if only instructions that leave the stack
// pointer and the argument registers alone come before it (endbr64, or a
// constant loaded into a scratch register, as in CPython 3.10's
// PyThread_acquire_lock_timed). There the probe still sees the arguments
// and, for a return probe, the return address at the stack pointer.
func Place(code []byte) Placement {
	first := Placement{Insn: "undecodable"}
	off := 0
	for i := 0; i < 4 && off < len(code); i++ {
		rest := code[off:]
		var inst x86asm.Inst
		var err error
		if bytes.HasPrefix(rest, endbr64) {
			inst, err = x86asm.Inst{Len: len(endbr64)}, nil
		} else if inst, err = x86asm.Decode(rest, 64); err != nil {
			break
		}
		text := "endbr64"
		if inst.Op != 0 {
			text = insnText(inst)
		}
		if i == 0 {
			first.Insn = text
		}
		if inst.Op != 0 && emulated(inst, rest) {
			return Placement{Offset: uint64(off), Insn: text, Emulated: true}
		}
		if inst.Op != 0 && !skippable(inst) {
			break
		}
		off += inst.Len
	}
	return first
}

// skippable reports whether a probe may go after inst: it moves data into
// a register that holds no argument and is not the stack pointer, with no
// branch.
func skippable(inst x86asm.Inst) bool {
	switch inst.Op {
	case x86asm.MOV, x86asm.LEA, x86asm.XOR:
	default:
		return false
	}
	dst, ok := inst.Args[0].(x86asm.Reg)
	if !ok {
		return false
	}
	switch regFamily(dst) {
	case x86asm.RSP, x86asm.RDI, x86asm.RSI, x86asm.RDX, x86asm.RCX, x86asm.R8, x86asm.R9:
		return false
	}
	return true
}

// regFamily maps a register of any width to its 64-bit name.
func regFamily(r x86asm.Reg) x86asm.Reg {
	switch {
	case r >= x86asm.RAX && r <= x86asm.R15:
		return r
	case r >= x86asm.EAX && r <= x86asm.R15L:
		return x86asm.RAX + (r - x86asm.EAX)
	case r >= x86asm.AX && r <= x86asm.R15W:
		return x86asm.RAX + (r - x86asm.AX)
	}
	// Byte registers (and anything else) are treated as an argument
	// register: never skipped.
	return x86asm.RDI
}

// endbr64's fixed encoding; x86asm decodes it as a bare REP prefix.
var endbr64 = []byte{0xf3, 0x0f, 0x1e, 0xfa}

// emulated reports whether the kernel's x86 uprobe code emulates inst
// rather than single-stepping it: push of a register, and the 5-byte nop.
func emulated(inst x86asm.Inst, code []byte) bool {
	switch inst.Op {
	case x86asm.PUSH:
		_, isReg := inst.Args[0].(x86asm.Reg)
		return isReg
	case x86asm.NOP:
		return inst.Len == 5 && len(code) >= 5 && code[0] == 0x0f && code[1] == 0x1f
	}
	return false
}

func insnText(inst x86asm.Inst) string {
	return x86asm.GNUSyntax(inst, 0, nil)
}
