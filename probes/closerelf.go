package probes

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// A closer is a program that does nothing but wait: started with the
// releaser's gpuprof binary it cost ~7.5 ms of CPU (the Go runtime and
// the packages' init: `GODEBUG=inittrace=1`), paid at each link closed
// mid-session, while gpuprof's CPU in the first seconds of an attach is
// what those seconds cost the job on the GPU host (docs/benchmark.md).
// closerELF is that program as a 48-byte x86-64 executable, run from a
// sealed memfd: write one byte to standard output (it runs: its exec is
// done, releaser_closer.go says why that matters), read standard input
// until it ends, then exit_group(0).
// Where a memfd cannot be executed (vm.memfd_noexec=2, a security
// module), the gpuprof binary is the closer (runCloser).
var closerCode = []byte{
	0xb8, 0x01, 0x00, 0x00, 0x00, // mov eax, 1   write(
	0xbf, 0x01, 0x00, 0x00, 0x00, // mov edi, 1     1,
	0x48, 0x89, 0xe6, // mov rsi, rsp           the stack's top (argc's low byte),
	0xba, 0x01, 0x00, 0x00, 0x00, // mov edx, 1     1)
	0x0f, 0x05, //       syscall
	0x31, 0xc0, // loop: xor eax, eax         read(
	0x31, 0xff, //       xor edi, edi           0,
	0x48, 0x89, 0xe6, // mov rsi, rsp           the stack's top (argc, argv: not needed),
	0xba, 0x40, 0x00, 0x00, 0x00, // mov edx, 64  64)
	0x0f, 0x05, //       syscall
	0x48, 0x85, 0xc0, // test rax, rax
	0x7f, 0xed, //       jg loop                more to read
	0xb8, 0xe7, 0x00, 0x00, 0x00, // mov eax, 231  exit_group(
	0x31, 0xff, //       xor edi, edi           0)
	0x0f, 0x05, //       syscall
}

// closerELF wraps closerCode in an ELF header and one loadable segment.
func closerELF() []byte {
	const base = 0x400000
	hdrs := uint64(binary.Size(elf.Header64{}) + binary.Size(elf.Prog64{}))
	size := hdrs + uint64(len(closerCode))
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Entry: base + hdrs, Phoff: uint64(binary.Size(elf.Header64{})),
		Ehsize: uint16(binary.Size(elf.Header64{})), Phentsize: uint16(binary.Size(elf.Prog64{})), Phnum: 1,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	p := elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X), Vaddr: base, Paddr: base,
		Filesz: size, Memsz: size, Align: 0x1000}
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, h)
	binary.Write(&b, binary.LittleEndian, p)
	b.Write(closerCode)
	return b.Bytes()
}

// closerProgram is the path of the closer for this process's children
// ("/proc/self/fd/N" of a memfd), or "" where there is none.
var closerProgram = sync.OnceValue(func() string {
	if runtime.GOARCH != "amd64" {
		return ""
	}
	path, err := closerMemfd()
	if err != nil {
		return ""
	}
	return path
})

// closerMemfd writes closerELF into a sealed memfd, kept open (close on
// exec: a child execs it by its /proc path before its files close).
func closerMemfd() (string, error) {
	fd, err := unix.MemfdCreate("gpuprof-closer", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if err == unix.EINVAL { // before Linux 6.3, no MFD_EXEC: executable anyway
		fd, err = unix.MemfdCreate("gpuprof-closer", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return "", err
	}
	prog := closerELF()
	if n, err := unix.Write(fd, prog); err != nil || n != len(prog) {
		unix.Close(fd)
		return "", fmt.Errorf("write the closer: %d of %d bytes: %v", n, len(prog), err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Close(fd)
		return "", err
	}
	return fmt.Sprintf("/proc/self/fd/%d", fd), nil
}
