// Package watchpoint says whether this machine delivers hardware
// watchpoint traps to user space. gpuprof times a Python function by
// watchpoints on its bytecode (probes/pycall.go), and some hypervisors
// accept a breakpoint perf event and then never trap on it: an AMD EPYC
// dev VM on kernel 6.18.44 (2026-12-07) counted 0 of 1,000 writes and 0
// of 1,000 calls under an opened watchpoint. There the functions' calls
// would go untimed with nothing said; checked first, gpuprof says why.
package watchpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoTraps: a watchpoint opens, and no access to what it watches traps.
var ErrNoTraps = errors.New("hardware watchpoints do not fire on this machine (its hypervisor does not deliver debug-register traps)")

var (
	once   sync.Once
	result error
	// watched is the byte the check watches: gpuprof's own, written by
	// the thread that watches it.
	watched [8]byte
)

// Fires returns nil where a hardware watchpoint traps on the accesses it
// watches, ErrNoTraps where it opens but does not trap, and the open's
// error where it cannot be opened (no root, or perf events refused). The
// check runs once a process: four writes under a counting watchpoint on
// the calling thread (~100 µs).
func Fires() error {
	once.Do(func() { result = check() })
	return result
}

const (
	hwBreakpointRW   = 3 // HW_BREAKPOINT_R|W: x86 cannot watch reads alone
	hwBreakpointLen1 = 1
	writes           = 4
)

// Attr is a perf event that watches one byte at addr for reads and
// writes in user mode: the check's, and gpuprof's watchpoints on Python
// bytecode (probes/pycall.go), which add their own bits to Bits.
func Attr(addr uint64) unix.PerfEventAttr {
	return unix.PerfEventAttr{
		Type:    unix.PERF_TYPE_BREAKPOINT,
		Size:    uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:    unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
		Bp_type: hwBreakpointRW,
		Ext1:    addr, // bp_addr
		Ext2:    hwBreakpointLen1,
	}
}

func check() error {
	// The event counts the calling thread's accesses only.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	attr := Attr(uint64(uintptr(unsafe.Pointer(&watched[0]))))
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("hardware watchpoints cannot be opened: %w", err)
	}
	defer unix.Close(fd)
	for i := range writes {
		touch(byte(i + 1))
	}
	var count [8]byte
	if _, err := unix.Read(fd, count[:]); err != nil {
		return fmt.Errorf("read a watchpoint's count: %w", err)
	}
	if binary.NativeEndian.Uint64(count[:]) == 0 {
		return ErrNoTraps
	}
	return nil
}

// touch writes the watched byte; not inlined, so that each call is a
// store the compiler keeps.
//
//go:noinline
func touch(v byte) { watched[0] = v }
