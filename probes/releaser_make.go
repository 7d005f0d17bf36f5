package probes

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Links are made in the releaser too. Making a uprobe_multi link installs
// its breakpoints from the calling thread, and a SIGKILL pending there
// fails that the same way as a close (releaser.go): the kernel's undo of
// the half-made link leaks the uprobes it had installed, their int3s left
// in the job. Made in the releaser, which keeps a copy of each link until
// gpuprof has it closed, no link is left behind by a gpuprof killed at any
// moment: the releaser closes what it holds once gpuprof's socket shuts.

// The messages that make and drop links: gpuprof sends make (a
// makeRequest, the program's fd) and is answered made (the link's fd) or
// failed (why); close carries the IDs of the made links to drop.
const (
	msgMake   = 'm'
	msgMade   = 'l'
	msgFailed = 'e'
)

// makeRequest is what the releaser needs to make a link: the file, the
// program (its fd rides along), and link.UprobeMultiOptions' fields.
type makeRequest struct {
	Path    string
	Return  bool
	PID     uint32
	Addrs   []uint64
	Cookies []uint64 `json:",omitempty"`
}

// madeLink is a link the releaser made and keeps a copy of, by its
// kernel ID, until gpuprof's close names it.
type madeLink struct {
	link.Link
	id uint32
}

// attachUprobes attaches prog at opts' file offsets of path, on entry or
// (ret) return, as link.Executable's UprobeMulti and UretprobeMulti do,
// the link made in the releaser where there is one. A link the releaser
// cannot make (it fails, or lacks a capability gpuprof has) is made here
// instead, so that an error is the one this process gets.
func attachUprobes(path string, prog *ebpf.Program, opts *link.UprobeMultiOptions, ret bool) (link.Link, error) {
	if l, ok := theReleaser().make(path, prog, opts, ret); ok {
		return l, nil
	}
	return makeUprobeLink(path, prog, opts, ret)
}

// makeUprobeLink makes the link in this process.
func makeUprobeLink(path string, prog *ebpf.Program, opts *link.UprobeMultiOptions, ret bool) (link.Link, error) {
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return nil, err
	}
	if ret {
		return ex.UretprobeMulti(nil, prog, opts)
	}
	return ex.UprobeMulti(nil, prog, opts)
}

// make has the releaser make the link; false where there is no releaser
// or it could not.
func (r *linkReleaser) make(path string, prog *ebpf.Program, opts *link.UprobeMultiOptions, ret bool) (link.Link, bool) {
	if r == nil {
		return nil, false
	}
	msg, err := json.Marshal(makeRequest{Path: path, Return: ret, PID: opts.PID, Addrs: opts.Addresses, Cookies: opts.Cookies})
	if err != nil || len(msg) > maxMessage-1 {
		return nil, false
	}
	b, err := r.openBatch()
	if err != nil {
		return nil, false
	}
	defer unix.Close(b)
	if err := unix.Sendmsg(b, append([]byte{msgMake}, msg...), unix.UnixRights(prog.FD()), nil, unix.MSG_NOSIGNAL); err != nil {
		r.broke(err)
		return nil, false
	}
	kind, why, fds, ok := receive(b, make([]byte, 4096))
	if !ok {
		r.broke(errors.New("no answer to a make"))
		return nil, false
	}
	if kind != msgMade || len(fds) != 1 {
		closeFDs(fds)
		// Made here instead, the error as the kernel gives it here.
		r.log.Debug("link not made by the releaser", "file", path, "err", string(why))
		return nil, false
	}
	l, err := link.NewFromFD(fds[0])
	if err != nil {
		// Ours is gone; the releaser, let go of, closes its copy.
		r.broke(fmt.Errorf("wrap a made link: %w", err))
		return nil, false
	}
	info, err := l.Info()
	if err != nil {
		l.Close()
		r.broke(fmt.Errorf("a made link's ID: %w", err))
		return nil, false
	}
	return madeLink{Link: l, id: uint32(info.ID)}, true
}

// encodeIDs and decodeIDs carry made links' IDs in a close message.
func encodeIDs(ids []uint32) []byte {
	out := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		out = binary.LittleEndian.AppendUint32(out, id)
	}
	return out
}

func decodeIDs(b []byte) []uint32 {
	var ids []uint32
	for len(b) >= 4 {
		ids = append(ids, binary.LittleEndian.Uint32(b))
		b = b[4:]
	}
	return ids
}

// madeLinks is the releaser's copy of each link it made, by ID.
type madeLinks struct {
	mu    sync.Mutex
	links map[uint32]link.Link
}

func newMadeLinks() *madeLinks { return &madeLinks{links: map[uint32]link.Link{}} }

// make makes the link a request asks for, keeps a copy, and returns the
// file to hand gpuprof.
func (m *madeLinks) make(req []byte, progFD int) (int, error) {
	var r makeRequest
	if err := json.Unmarshal(req, &r); err != nil {
		unix.Close(progFD)
		return -1, err
	}
	prog, err := ebpf.NewProgramFromFD(progFD)
	if err != nil {
		return -1, err
	}
	defer prog.Close() // the link holds the program
	l, err := makeUprobeLink(r.Path, prog, &link.UprobeMultiOptions{Addresses: r.Addrs, Cookies: r.Cookies, PID: r.PID}, r.Return)
	if err != nil {
		return -1, err
	}
	info, err := l.Info()
	if err != nil {
		l.Close()
		return -1, err
	}
	m.mu.Lock()
	m.links[uint32(info.ID)] = l
	m.mu.Unlock()
	return l.(linkFD).FD(), nil
}

// take removes the links named by ids (every one, with all) and returns
// them, to be closed.
func (m *madeLinks) take(ids []uint32, all bool) []link.Link {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []link.Link
	for id, l := range m.links {
		if all || slices.Contains(ids, id) {
			out = append(out, l)
			delete(m.links, id)
		}
	}
	return out
}
