package probes

import (
	"bytes"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// Placement is where in a function a probe goes, and what that costs.
//
// The instruction under a uprobe decides its cost (FACTS.md §2): the kernel
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

// Place chooses the probe offset for a function whose first bytes are code.
func Place(code []byte) Placement {
	if bytes.HasPrefix(code, endbr64) {
		rest := code[len(endbr64):]
		if next, err := x86asm.Decode(rest, 64); err == nil && emulated(next, rest) {
			return Placement{Offset: uint64(len(endbr64)), Insn: insnText(next), Emulated: true}
		}
		return Placement{Insn: "endbr64"}
	}
	first, err := x86asm.Decode(code, 64)
	if err != nil {
		return Placement{Insn: "undecodable"}
	}
	return Placement{Insn: insnText(first), Emulated: emulated(first, code)}
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
