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

// The link releaser closes the last reference to each uprobe link, in a
// process of its own that no signal meant for gpuprof reaches.
//
// Why: a uprobe's breakpoints are taken out of the target by the thread
// that drops the link's last reference, and the kernel's get_user_pages
// gives up (-EINTR) in a thread with a SIGKILL pending. A gpuprof killed
// while it closes links (SIGKILL soon after SIGINT; the OOM killer during
// a sampler switch) then leaves int3s in the job's code until the job
// exits, the kernel logging "failed to unregister, leaking uprobe" (5 of
// 5 runs of TestSignalsLeaveTargetAsItWas/SIGKILL/flushing before this).
// A process's files closed by its exit are let go of by a kernel worker,
// which has no signal pending: only the closes in flight are at risk.
//
// So gpuprof hands each batch of link files to the releaser over a unix
// socket (SCM_RIGHTS), closes its own copies, then has the releaser close
// its copies, the last. If gpuprof dies in between, the releaser closes
// what it holds as the batch's socket shuts, then exits once gpuprof's
// control socket shuts too.

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
	program string // UseReleaser's; "" leaves links closed in place
	started bool
	ctrl    int // our end of the control socket; -1 when none
	pid     int // the releaser's, for tests
	log     *slog.Logger
}

// UseReleaser names the program run as the link releaser: a gpuprof
// binary whose main starts with IsReleaser. Without it links are closed
// by gpuprof itself.
func UseReleaser(program string) {
	releaser.mu.Lock()
	defer releaser.mu.Unlock()
	releaser.program = program
}

// IsReleaser says whether this process was started as the link releaser.
func IsReleaser() bool { return os.Getenv(releaserEnv) != "" }

// startReleaser starts the releaser once per process, at the first Open.
// A releaser that cannot start is a warning: gpuprof then closes its links
// itself, as it did before there was one.
func startReleaser(log *slog.Logger) {
	releaser.mu.Lock()
	defer releaser.mu.Unlock()
	if releaser.started {
		return
	}
	releaser.started = true
	releaser.ctrl = -1
	releaser.log = log
	if releaser.program == "" {
		return
	}
	ctrl, pid, err := spawnReleaser(releaser.program)
	if err != nil {
		log.Warn("link releaser not started: a SIGKILL while probes are being removed may leave some in the job", "err", err)
		return
	}
	releaser.ctrl, releaser.pid = ctrl, pid
}

// spawnReleaser runs program as the releaser in a session of its own (no
// terminal's signals reach it) and returns gpuprof's end of its socket.
// The releaser is not waited for: it exits once that socket shuts, at the
// latest when gpuprof exits.
func spawnReleaser(program string) (ctrl, pid int, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, fmt.Errorf("socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "link-releaser")
	defer theirs.Close()
	cmd := exec.Command(program)
	cmd.Env = append(os.Environ(), releaserEnv+"=1")
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		unix.Close(fds[0])
		return -1, 0, err
	}
	go cmd.Wait() // reaps it, should it exit before gpuprof
	return fds[0], cmd.Process.Pid, nil
}

// linkFD is the file of a link the releaser can hold: cilium/ebpf's
// uprobe_multi links (a RawLink) have one.
type linkFD interface{ FD() int }

// fdOf returns l's file descriptor, or false for a link with none.
func fdOf(l link.Link) (int, bool) {
	if r, ok := l.(returnLink); ok {
		l = r.Link
	}
	if f, ok := l.(linkFD); ok {
		return f.FD(), true
	}
	return -1, false
}

// closeReleased closes links, the last reference to each in the
// releaser. It returns false, having closed nothing, where there is no
// releaser or it cannot take the batch.
func closeReleased(links []link.Link) (bool, error) {
	var fds []int
	for _, l := range links {
		fd, ok := fdOf(l)
		if !ok {
			return false, nil
		}
		fds = append(fds, fd)
	}
	b, err := openBatch()
	if err != nil || b < 0 {
		return false, nil
	}
	defer unix.Close(b)
	if err := holdFDs(b, fds); err != nil {
		// The releaser closes what it took as b shuts; ours go below.
		releaserBroke(err)
		return false, nil
	}
	errs := make([]error, 0, len(links))
	for _, l := range links {
		errs = append(errs, l.Close()) // not the last reference: at once
	}
	if err := exchange(b, []byte{msgClose}, nil, msgClosed); err != nil {
		releaserBroke(err)
		errs = append(errs, fmt.Errorf("link releaser: %w", err))
	}
	return true, errors.Join(errs...)
}

// openBatch hands the releaser a socket of the batch's own, so that
// batches closed at once (detaches of several processes, twin decisions)
// close in parallel. It returns -1 where there is no releaser.
func openBatch() (int, error) {
	releaser.mu.Lock()
	defer releaser.mu.Unlock()
	if releaser.ctrl < 0 {
		return -1, nil
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fds[1])
	if err := unix.Sendmsg(releaser.ctrl, []byte{msgHold}, unix.UnixRights(fds[1]), nil, 0); err != nil {
		unix.Close(fds[0])
		releaserBrokeLocked(err)
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
	if err := unix.Sendmsg(b, msg, rights, nil, 0); err != nil {
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

// releaserBroke leaves links to be closed in place from now on.
func releaserBroke(err error) {
	releaser.mu.Lock()
	defer releaser.mu.Unlock()
	releaserBrokeLocked(err)
}

func releaserBrokeLocked(err error) {
	if releaser.ctrl < 0 {
		return
	}
	unix.Close(releaser.ctrl)
	releaser.ctrl = -1
	releaser.log.Warn("link releaser lost: probes are removed by gpuprof itself from now on", "err", err)
}
