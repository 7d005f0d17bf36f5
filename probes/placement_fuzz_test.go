package probes

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/arch/x86/x86asm"
)

// The code gpuprof decodes is the target's: a function's first bytes
// (Place) and the call before a return address (callTarget).

// FuzzPlace places a probe in any code: where it says the kernel
// emulates the instruction, one it emulates is there, inside the bytes.
func FuzzPlace(f *testing.F) {
	f.Add([]byte{0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5})             // endbr64; push %rbp
	f.Add([]byte{0xb8, 0x01, 0x00, 0x00, 0x00, 0x41, 0x57})                   // mov $1,%eax; push %r15
	f.Add([]byte{0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3})                         // nopl 0(%rax,%rax); ret
	f.Add([]byte{0x48, 0x83, 0xec, 0x08, 0x55})                               // sub $8,%rsp; push %rbp
	f.Add([]byte{0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x8d, 0x05, 0, 0, 0, 0, 0x53}) // endbr64; lea; push %rbx
	f.Fuzz(func(t *testing.T, code []byte) {
		p := Place(code)
		if p.Insn == "" {
			t.Fatalf("%x: placed with no instruction named", code)
		}
		if !p.Emulated {
			if p.Offset != 0 {
				t.Fatalf("%x: a single-stepped probe at +%d, not at the entry", code, p.Offset)
			}
			return
		}
		if p.Offset >= uint64(len(code)) {
			t.Fatalf("%x: probe at +%d, past the code", code, p.Offset)
		}
		inst, err := x86asm.Decode(code[p.Offset:], 64)
		if err != nil || !emulated(inst, code[p.Offset:]) {
			t.Fatalf("%x: probe at +%d on %v (%v), which the kernel does not emulate", code, p.Offset, inst, err)
		}
	})
}

// FuzzCallTarget finds the call before a return address in any memory:
// a call instruction that ends at the return address and reaches fn.
func FuzzCallTarget(f *testing.F) {
	const base = 0x400000
	rel := func(code []byte, disp int32) []byte { return binary.LittleEndian.AppendUint32(code, uint32(disp)) }
	// call fn (rel32), fn right after the call
	f.Add(rel([]byte{0x90, 0xe8}, 0x10), uint64(base+6), uint64(base+6+0x10))
	// call *0(%rip): the slot after the call holds fn
	f.Add(binary.LittleEndian.AppendUint64(rel([]byte{0xff, 0x15}, 0), 0x7f0000001000), uint64(base+6), uint64(0x7f0000001000))
	// call a PLT stub (endbr64; bnd jmp *disp(%rip)) whose slot holds fn
	plt := rel([]byte{0x90, 0xe8}, 0) // the stub at base+6
	plt = rel(append(plt, 0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25), 0)
	plt = binary.LittleEndian.AppendUint64(plt, 0x7f0000002000) // the slot, right after the jmp
	f.Add(plt, uint64(base+6), uint64(0x7f0000002000))
	f.Fuzz(func(t *testing.T, mem []byte, caller, fn uint64) {
		read := func(addr uint64, n int) ([]byte, error) {
			if addr < base || addr-base > uint64(len(mem)) || uint64(len(mem))-(addr-base) < uint64(n) {
				return nil, fmt.Errorf("read %d bytes at %#x: not mapped", n, addr)
			}
			return mem[addr-base : addr-base+uint64(n)], nil
		}
		at, inst, err := callTarget(read, caller, fn)
		if err != nil {
			return
		}
		if inst.Op != x86asm.CALL || at+uint64(inst.Len) != caller {
			t.Fatalf("call at %#x: %v (%d bytes), returning to %#x", at, inst, inst.Len, caller)
		}
		code, err := read(at, inst.Len)
		if err != nil {
			t.Fatalf("call at %#x not in memory: %v", at, err)
		}
		if again, err := x86asm.Decode(code, 64); err != nil || again.Op != x86asm.CALL || again.Len != inst.Len {
			t.Fatalf("the bytes at %#x, %x, decode as %v (%v)", at, code, again, err)
		}
	})
}
