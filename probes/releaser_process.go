package probes

import (
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// RunReleaser is the link releaser's main (releaser.go says why it is a
// process of its own): it serves gpuprof's batches until gpuprof's
// control socket shuts, closes whatever it still holds (the links it made
// among them), and returns the exit status.
func RunReleaser() int {
	if os.Getenv(closerEnv) != "" {
		return runCloser()
	}
	// Signals meant for gpuprof (a terminal's ^C, a supervisor's TERM)
	// must not cut a close short: the releaser ends when gpuprof does.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	runtime.GOMAXPROCS(1)
	setName("gpuprof-release") // not taken for gpuprof itself by a pgrep
	made := newMadeLinks()
	var batches sync.WaitGroup
	for {
		_, _, rights, ok := receive(releaserFD, make([]byte, 1))
		if !ok {
			break
		}
		for _, b := range rights {
			batches.Go(func() { serveBatch(b, made) })
		}
	}
	batches.Wait()
	dropLinks(made.take(nil, true))
	return 0
}

// serveBatch serves one batch socket: links to make, link files to hold
// until gpuprof says close, or until the socket shuts (gpuprof died):
// either way it closes what it holds. Made links outlive the batch, in
// made, until a close names them or gpuprof goes.
func serveBatch(b int, made *madeLinks) {
	var held []int
	defer func() {
		closeByExit(held)
		unix.Close(b)
	}()
	buf := messageBuffers.Get().(*[]byte)
	defer messageBuffers.Put(buf)
	for {
		kind, payload, rights, ok := receive(b, *buf)
		if !ok {
			return
		}
		var reply []byte
		var replyRights []byte
		switch kind {
		case msgHold:
			held = append(held, rights...)
			reply = []byte{msgHeld}
		case msgMake:
			if len(rights) != 1 {
				closeAll(rights)
				return
			}
			fd, err := made.make(payload, rights[0])
			if err != nil {
				reply = append([]byte{msgFailed}, err.Error()...)
			} else {
				reply, replyRights = []byte{msgMade}, unix.UnixRights(fd)
			}
		case msgClose:
			closeAll(rights)
			var wg sync.WaitGroup
			wg.Go(func() { closeByExit(held) })
			wg.Go(func() { dropLinks(made.take(decodeIDs(payload), false)) })
			wg.Wait()
			held = nil
			reply = []byte{msgClosed}
		default:
			closeAll(rights)
			return
		}
		if err := unix.Sendmsg(b, reply, replyRights, nil, unix.MSG_NOSIGNAL); err != nil {
			return
		}
	}
}

// dropLinks drops links the releaser made, each the last reference to
// its link, in closers' exits (releaser_closer.go): each link's file is
// duplicated for a closer, and the link closed.
func dropLinks(links []link.Link) {
	var fds []int
	for _, l := range links {
		if fd, ok := fdOf(l); ok {
			if dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err == nil {
				fds = append(fds, dup)
			}
		}
	}
	dropOwnCopies(func() {
		for _, l := range links {
			l.Close() // not the last reference where duplicated
		}
	})
	closeByExit(fds)
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

// maxMessage bounds a message's bytes besides its files: a make request
// of a few thousand addresses.
const maxMessage = 256 << 10

// messageBuffers keeps the batches' receive buffers: a batch is opened
// for each link made, and a buffer each was 256 KiB of garbage a make.
var messageBuffers = sync.Pool{New: func() any { b := make([]byte, maxMessage); return &b }}

// receive reads one message into buf: its kind, the rest of its bytes
// and the files it carries; false once the socket is shut or broken.
func receive(fd int, buf []byte) (byte, []byte, []int, bool) {
	oob := make([]byte, unix.CmsgSpace(maxRightsPerMessage*4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return 0, nil, nil, false
		}
		var fds []int
		if cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, c := range cmsgs {
				if rights, err := unix.ParseUnixRights(&c); err == nil {
					fds = append(fds, rights...)
				}
			}
		}
		return buf[0], buf[1:n], fds, true
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
