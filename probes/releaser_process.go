package probes

import (
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RunReleaser is the link releaser's main (releaser.go says why it is a
// process of its own): it serves gpuprof's batches until gpuprof's
// control socket shuts, closes whatever it still holds, and returns the
// exit status.
func RunReleaser() int {
	// Signals meant for gpuprof (a terminal's ^C, a supervisor's TERM)
	// must not cut a close short: the releaser ends when gpuprof does.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	runtime.GOMAXPROCS(1)
	setName("gpuprof-release") // not taken for gpuprof itself by a pgrep
	var batches sync.WaitGroup
	for {
		_, rights, ok := receive(releaserFD)
		if !ok {
			break
		}
		for _, b := range rights {
			batches.Go(func() { serveBatch(b) })
		}
	}
	batches.Wait()
	return 0
}

// serveBatch holds a batch's link files until gpuprof says close, or until
// its socket shuts (gpuprof died): either way it closes them all.
func serveBatch(b int) {
	var held []int
	defer func() {
		closeAll(held)
		unix.Close(b)
	}()
	for {
		msg, rights, ok := receive(b)
		if !ok {
			return
		}
		held = append(held, rights...)
		var reply byte
		switch msg {
		case msgHold:
			reply = msgHeld
		case msgClose:
			closeAll(held)
			held = nil
			reply = msgClosed
		default:
			return
		}
		if _, err := unix.Write(b, []byte{reply}); err != nil {
			return
		}
	}
}

// closeAll closes fds all at once: each close that drops a uprobe link's
// last reference waits for the kernel (closing.go).
func closeAll(fds []int) {
	var wg sync.WaitGroup
	for _, fd := range fds {
		wg.Go(func() { unix.Close(fd) })
	}
	wg.Wait()
}

// receive reads one message and the files it carries; false once the
// socket is shut or broken.
func receive(fd int) (byte, []int, bool) {
	var buf [1]byte
	oob := make([]byte, unix.CmsgSpace(maxRightsPerMessage*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf[:], oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return 0, nil, false
		}
		var fds []int
		if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, c := range cmsgs {
				if rights, err := unix.ParseUnixRights(&c); err == nil {
					fds = append(fds, rights...)
				}
			}
		}
		return buf[0], fds, true
	}
}

// setName sets the process's name (comm, 15 bytes at most).
func setName(s string) {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		return
	}
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0)
	runtime.KeepAlive(p)
}
