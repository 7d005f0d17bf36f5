package probes

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
)

// fakeMem is a process's memory as a few pieces of code and data.
type fakeMem map[uint64][]byte

func (m fakeMem) read(addr uint64, n int) ([]byte, error) {
	for base, b := range m {
		if addr >= base && addr+uint64(n) <= base+uint64(len(b)) {
			return b[addr-base : addr-base+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("%#x unmapped", addr)
}

func le32(v int64) []byte  { return binary.LittleEndian.AppendUint32(nil, uint32(int32(v))) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// TestCallTarget: the call before a record's return address is checked to
// reach the record function the ways compilers call a shared library's
// function, and refused where it cannot be told.
func TestCallTarget(t *testing.T) {
	const (
		code      = 0x401000 // the caller's code: a call ending at ret
		ret       = code + 0x10
		plt       = 0x402000 // a PLT stub
		got       = 0x403000 // its GOT slot
		fn        = 0x500000
		elsewhere = 0x600000
	)
	call5 := func(to uint64) []byte { // 11 bytes of nop, then call rel32
		b := append([]byte(strings.Repeat("\x90", 11)), 0xe8)
		return append(b, le32(int64(to)-ret)...)
	}
	callMem := func(slot uint64) []byte { // call *disp(%rip)
		b := append([]byte(strings.Repeat("\x90", 10)), 0xff, 0x15)
		return append(b, le32(int64(slot)-ret)...)
	}
	stub := func(ibt bool) []byte { // [endbr64; bnd] jmp *disp(%rip)
		var b []byte
		if ibt {
			b = []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xf2}
		}
		b = append(b, 0xff, 0x25)
		return append(append(b, le32(int64(got)-int64(plt+uint64(len(b))+4))...), 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90)
	}
	for _, c := range []struct {
		name string
		mem  fakeMem
		at   uint64 // 0: refused
	}{
		{"call rel32 straight to it", fakeMem{code: call5(fn)}, ret - 5},
		{"call rel32 to a PLT stub", fakeMem{code: call5(plt), plt: stub(false), got: le64(fn)}, ret - 5},
		{"call rel32 to an IBT PLT stub", fakeMem{code: call5(plt), plt: stub(true), got: le64(fn)}, ret - 5},
		{"call through a GOT slot", fakeMem{code: callMem(got), got: le64(fn)}, ret - 6},
		{"a PLT stub to another function", fakeMem{code: call5(plt), plt: stub(true), got: le64(elsewhere)}, 0},
		{"call rel32 to another function", fakeMem{code: call5(elsewhere)}, 0},
		{"a pointer to another function", fakeMem{code: callMem(got), got: le64(elsewhere)}, 0},
		{"call through a register", fakeMem{code: append([]byte(strings.Repeat("\x90", 14)), 0xff, 0xd0)}, 0},
		{"no call", fakeMem{code: []byte(strings.Repeat("\x90", 16))}, 0},
	} {
		at, _, err := callTarget(c.mem.read, ret, fn)
		if c.at == 0 && err == nil {
			t.Errorf("%s: taken at %#x, want refused", c.name, at)
		}
		if c.at != 0 && (err != nil || at != c.at) {
			t.Errorf("%s: at %#x (%v), want %#x", c.name, at, err, c.at)
		}
	}
}
