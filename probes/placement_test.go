package probes

import "testing"

func TestPlace(t *testing.T) {
	for _, tc := range []struct {
		name     string
		code     []byte
		offset   uint64
		emulated bool
		insn     string
	}{
		{"push rbp (libcuda)", []byte{0x55, 0x48, 0x89, 0xe5}, 0, true, "push %rbp"},
		{"push r15", []byte{0x41, 0x57, 0x41, 0x56}, 0, true, "push %r15"},
		{"endbr64 then push (CET build)", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5}, 4, true, "push %rbp"},
		{"endbr64 then mov to rax, no push", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89, 0xf8}, 0, false, "endbr64"},
		{"movabs to rax then push (CPython 3.10)", []byte{0x48, 0xb8, 0xf7, 0x53, 0xe3, 0xa5, 0x9b, 0xc4, 0x20, 0x00, 0x41, 0x56}, 10, true, "push %r14"},
		{"mov into an argument register first", []byte{0x48, 0x89, 0xc7, 0x55}, 0, false, "mov %rax,%rdi"},
		{"sub rsp first", []byte{0x48, 0x83, 0xec, 0x08, 0x55}, 0, false, "sub $0x8,%rsp"},
		{"nop5", []byte{0x0f, 0x1f, 0x44, 0x00, 0x00, 0x55}, 0, true, "nopl (%rax,%rax)"},
		{"endbr64 then nop5", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x0f, 0x1f, 0x44, 0x00, 0x00}, 4, true, "nopl (%rax,%rax)"},
		{"sub rsp", []byte{0x48, 0x83, 0xec, 0x08}, 0, false, "sub $0x8,%rsp"},
		{"push imm is not emulated", []byte{0x6a, 0x01}, 0, false, "pushq $0x1"},
		{"garbage", []byte{0x0f, 0xff}, 0, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Place(tc.code)
			if p.Offset != tc.offset || p.Emulated != tc.emulated {
				t.Fatalf("Place = %+v, want offset %d emulated %v", p, tc.offset, tc.emulated)
			}
			if tc.insn != "" && p.Insn != tc.insn {
				t.Errorf("insn = %q, want %q", p.Insn, tc.insn)
			}
		})
	}
}
