package pymem

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

const (
	// Nothing is mapped below the first page; a "pointer" there is a
	// small integer or a NULL plus an offset.
	minAddr = 0x1000
	// x86-64 user space ends below 2^47 (2^56 with 5-level paging); the
	// bound only keeps address arithmetic from wrapping, the kernel
	// refuses what is not mapped.
	maxAddr = 1 << 56
	// Longest C string (tp_name) or str (__module__) read.
	maxName  = 256
	pageSize = 4096
)

var errAddr = errors.New("not a user-space address")

var le = binary.LittleEndian

// read fills buf from the target's memory at addr, all or an error.
func (r *Reader) read(addr uint64, buf []byte) error {
	n := uint64(len(buf))
	if n == 0 {
		return nil
	}
	if addr < minAddr || addr >= maxAddr || maxAddr-addr < n {
		return fmt.Errorf("read %d bytes at %#x: %w", n, addr, errAddr)
	}
	got, err := r.mem(buf, addr)
	if err != nil {
		return fmt.Errorf("read %d bytes at %#x of pid %d: %w", n, addr, r.pid, err)
	}
	if got != len(buf) {
		return fmt.Errorf("read %d bytes at %#x of pid %d: only %d readable", n, addr, r.pid, got)
	}
	return nil
}

// processMemory reads process pid's memory: one process_vm_readv a read.
func processMemory(pid int) func(buf []byte, addr uint64) (int, error) {
	return func(buf []byte, addr uint64) (int, error) {
		local := []unix.Iovec{{Base: &buf[0]}}
		local[0].SetLen(len(buf))
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
		return unix.ProcessVMReadv(pid, local, remote, 0)
	}
}

// ptr reads one 64-bit word.
func (r *Reader) ptr(addr uint64) (uint64, error) {
	var b [8]byte
	if err := r.read(addr, b[:]); err != nil {
		return 0, err
	}
	return le.Uint64(b[:]), nil
}

// objAddr checks that p can be an object's address: pymalloc and malloc
// both align objects to at least 8 bytes.
func objAddr(p uint64) error {
	if p < minAddr || p >= maxAddr || p%8 != 0 {
		return fmt.Errorf("%#x is not an object address (8-aligned): %w", p, errAddr)
	}
	return nil
}

// cstring reads a NUL-terminated string of printable ASCII, at most max
// bytes, a page at a time so that a short string near the end of a
// mapping reads.
func (r *Reader) cstring(addr uint64, max int) (string, error) {
	var s []byte
	for len(s) < max {
		chunk := min(int(pageSize-addr%pageSize), max-len(s))
		buf := make([]byte, chunk)
		if err := r.read(addr, buf); err != nil {
			return "", err
		}
		for i, c := range buf {
			if c == 0 {
				s = append(s, buf[:i]...)
				if len(s) == 0 {
					return "", fmt.Errorf("empty string at %#x", addr)
				}
				return string(s), nil
			}
			if c < 0x20 || c > 0x7e {
				return "", fmt.Errorf("string at %#x: byte %#x is not printable ASCII", addr, c)
			}
		}
		s = append(s, buf...)
		addr += uint64(chunk)
	}
	return "", fmt.Errorf("string at %#x: longer than %d bytes", addr, max)
}
