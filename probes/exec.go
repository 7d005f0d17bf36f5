package probes

import (
	"fmt"
	"hash/fnv"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/events"
)

// A target that calls execve keeps its PID and its pidfd but becomes
// another program: the uprobes, filtered by PID, go on firing in the
// libraries it maps again, while what the session read of the old
// program (its interpreter's addresses, its kernels, which probes its
// steps needed) no longer holds. The exec is seen by the process's auxiliary
// vector, which the kernel writes anew at every exec (AT_RANDOM, AT_ENTRY,
// AT_EXECFN point into the new image and stack) and which nothing else
// changes: read at attach and at every rescan, a change is an exec.

// programID identifies the program pid runs now: a hash of its auxiliary
// vector.
func programID(procRoot string, pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("%s/%d/auxv", procRoot, pid))
	if err != nil {
		return 0, err
	}
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64(), nil
}

// execed reports whether t's process has started a new program since
// its probes were attached.
func (s *Session) execed(t *target) bool {
	id, err := programID(s.cfg.ProcRoot, t.pid)
	return err == nil && t.program != 0 && id != t.program
}

// reattach lets go of everything attached to t's process and attaches to
// it again, as the program it now runs, with a KindExec marker before
// the new program's events. It returns the plans attached.
func (s *Session) reattach(t *target) ([]LibraryPlan, error) {
	// Detach closes the pidfd; the process keeps its PID across the exec,
	// and a duplicate keeps holding it.
	fd, err := unix.FcntlInt(uintptr(t.pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("hold PID %d across its exec: %w", t.pid, err)
	}
	if err := s.Detach(t.pid); err != nil {
		s.cfg.Log.Warn("detach from the program before an exec", "pid", t.pid, "err", err)
	}
	now := monotonicNow()
	s.addMarks(events.Event{Kind: events.KindExec, PID: uint32(t.pid), Start: now, End: now})
	comm, _ := os.ReadFile(fmt.Sprintf("%s/%d/comm", s.cfg.ProcRoot, t.pid))
	s.cfg.Log.Info("the target started a new program: its probes are attached again", "pid", t.pid,
		"program", strings.TrimSuffix(string(comm), "\n"))
	return s.attachFD(t.pid, fd)
}
