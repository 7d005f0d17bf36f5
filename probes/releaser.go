package probes

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// The link releaser makes each uprobe link and closes its last
// reference, in a process of its own that no signal meant for gpuprof
// reaches.
//
// Why: a uprobe's breakpoints are put in and taken out of the target by
// the thread that makes the link or drops its last reference, and the
// kernel's get_user_pages gives up (-EINTR) in a thread with a SIGKILL
// pending. A gpuprof killed while it closes links (SIGKILL soon after
// SIGINT; the OOM killer during a sampler switch) then left int3s in the
// job's code until the job exited, the kernel logging "failed to
// unregister, leaking uprobe" (5 of 5 runs of
// TestSignalsLeaveTargetAsItWas/SIGKILL/flushing before this); one killed
// while it made a link, the same for the probes the kernel's undo of the
// half-made link could not take out. A process's files closed by its
// exit are let go of with no signal pending (releaser_closer.go): only
// the makes and closes in flight are at risk.
//
// So the releaser makes each link (releaser_make.go) and keeps a copy of
// it; gpuprof closes its own copy, then has the releaser drop its copy,
// the last, in a closer's exit (releaser_closer.go). A link gpuprof made itself (the releaser could not) is handed
// over (SCM_RIGHTS) before gpuprof closes it. If gpuprof dies, the
// releaser closes what it holds once gpuprof's sockets shut, then exits.

// releaserEnv, set in the releaser's environment, tells a gpuprof binary
// to run as the releaser (IsReleaser, RunReleaser).
const releaserEnv = "GPUPROF_LINK_RELEASER"

// releaserFD is the releaser's end of the control socket (its first
// ExtraFiles entry).
const releaserFD = 3

// maxRightsPerMessage stays under the kernel's SCM_MAX_FD (253).
const maxRightsPerMessage = 250

// The messages of a batch: gpuprof sends hold (with fds) and close; the
// releaser answers held and closed.
const (
	msgHold   = 'h'
	msgHeld   = 'k'
	msgClose  = 'c'
	msgClosed = 'd'
)

// releaser is the process-wide link releaser: what it guards against is
// this process's death, so there is one per gpuprof process.
var releaser struct {
	mu      sync.Mutex
	program string // UseReleaser's; "" leaves links made and closed in place
	started bool
	r       *linkReleaser // nil where there is none
}

// UseReleaser names the program run as the link releaser: a gpuprof
// binary whose main starts with IsReleaser. Without it links are made and
// closed by gpuprof itself.
func UseReleaser(program string) {
	releaser.mu.Lock()
	defer releaser.mu.Unlock()
	releaser.program = program
}

// IsReleaser says whether this process was started as the link releaser.
func IsReleaser() bool { return os.Getenv(releaserEnv) != "" }

// startReleaser starts the releaser once per process, at the first Open.
// A releaser that cannot start is a warning: gpuprof then makes and
// closes its links itself, as it did before there was one.
func startReleaser(log *slog.Logger) {
	releaser.mu.Lock()
	defer releaser.mu.Unlock()
	if releaser.started || releaser.program == "" {
		return
	}
	releaser.started = true
	r, err := newLinkReleaser(releaser.program, log)
	if err != nil {
		log.Warn("link releaser not started: a SIGKILL while probes are being added or removed may leave some in the job", "err", err)
		return
	}
	releaser.r = r
}

// theReleaser is the process's releaser, nil where there is none (its
// methods take a nil one as a releaser that takes nothing).
func theReleaser() *linkReleaser {
	releaser.mu.Lock()
	defer releaser.mu.Unlock()
	return releaser.r
}

// linkReleaser is gpuprof's end of a releaser process.
type linkReleaser struct {
	mu   sync.Mutex
	ctrl int // our end of the control socket; -1 once broken
	pid  int
	log  *slog.Logger
}

// newLinkReleaser runs program as the releaser in a session of its own
// (no terminal's signals reach it). It is not waited for: it exits once
// its control socket shuts, at the latest when gpuprof exits.
func newLinkReleaser(program string, log *slog.Logger) (*linkReleaser, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "link-releaser")
	defer theirs.Close()
	cmd := exec.Command(program)
	cmd.Env = append(os.Environ(), releaserEnv+"=1")
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		unix.Close(fds[0])
		return nil, err
	}
	go cmd.Wait() // reaps it, should it exit before gpuprof
	return &linkReleaser{ctrl: fds[0], pid: cmd.Process.Pid, log: log}, nil
}

// shut closes gpuprof's end of the control socket, as gpuprof's exit
// would: the releaser closes what it holds and exits.
func (r *linkReleaser) shut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctrl >= 0 {
		unix.Close(r.ctrl)
		r.ctrl = -1
	}
}

// linkFD is the file of a link the releaser can hold: cilium/ebpf's
// uprobe_multi links (a RawLink) have one.
type linkFD interface{ FD() int }

// fdOf returns l's file descriptor, or false for a link with none.
func fdOf(l link.Link) (int, bool) {
	if f, ok := l.(linkFD); ok {
		return f.FD(), true
	}
	return -1, false
}

// closeLinks closes links, the last reference to each in the releaser:
// those it made (it kept a copy) by their IDs, the others by their files
// handed to it first. It returns false, having closed nothing, where
// there is no releaser or it cannot take the batch.
func (r *linkReleaser) closeLinks(links []link.Link) (bool, error) {
	if r == nil {
		return false, nil
	}
	var fds []int
	var ids []uint32
	for _, l := range links {
		if rl, ok := l.(returnLink); ok {
			l = rl.Link
		}
		if m, ok := l.(madeLink); ok {
			ids = append(ids, m.id)
			continue
		}
		fd, ok := fdOf(l)
		if !ok {
			return false, nil
		}
		fds = append(fds, fd)
	}
	b, err := r.openBatch()
	if err != nil {
		return false, nil
	}
	defer unix.Close(b)
	if err := holdFDs(b, fds); err != nil {
		// The releaser closes what it took as b shuts; ours go below.
		r.broke(err)
		return false, nil
	}
	errs := make([]error, 0, len(links))
	for _, l := range links {
		errs = append(errs, l.Close()) // not the last reference: at once
	}
	if err := exchange(b, append([]byte{msgClose}, encodeIDs(ids)...), nil, msgClosed); err != nil {
		// A releaser gone has closed its copies by its death: ours were
		// the last, just closed.
		r.broke(err)
		errs = append(errs, fmt.Errorf("link releaser: %w", err))
	}
	return true, errors.Join(errs...)
}

// openBatch hands the releaser a socket of the batch's own, so that
// batches closed at once (detaches of several processes, twin decisions)
// close in parallel.
func (r *linkReleaser) openBatch() (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctrl < 0 {
		return -1, errors.New("no link releaser")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fds[1])
	if err := unix.Sendmsg(r.ctrl, []byte{msgHold}, unix.UnixRights(fds[1]), nil, unix.MSG_NOSIGNAL); err != nil {
		unix.Close(fds[0])
		r.brokeLocked(err)
		return -1, err
	}
	return fds[0], nil
}

// holdFDs gives the releaser a copy of each fd, waiting until it has them.
func holdFDs(b int, fds []int) error {
	for len(fds) > 0 {
		n := min(len(fds), maxRightsPerMessage)
		if err := exchange(b, []byte{msgHold}, unix.UnixRights(fds[:n]...), msgHeld); err != nil {
			return err
		}
		fds = fds[n:]
	}
	return nil
}

// exchange sends one message on a batch socket and reads the answer.
func exchange(b int, msg, rights []byte, want byte) error {
	if err := unix.Sendmsg(b, msg, rights, nil, unix.MSG_NOSIGNAL); err != nil {
		return err
	}
	var reply [1]byte
	for {
		n, err := unix.Read(b, reply[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n != 1 || reply[0] != want {
			return fmt.Errorf("answered %q, want %q", reply[:n], want)
		}
		return nil
	}
}

// broke leaves links to be made and closed in place from now on.
func (r *linkReleaser) broke(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.brokeLocked(err)
}

func (r *linkReleaser) brokeLocked(err error) {
	if r.ctrl < 0 {
		return
	}
	unix.Close(r.ctrl)
	r.ctrl = -1
	r.log.Warn("link releaser lost: probes are added and removed by gpuprof itself from now on", "err", err)
}
