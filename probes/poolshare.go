package probes

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuprof/gpuprof/pymem"
)

// A multiprocessing queue's length is kept in a POSIX semaphore in shared
// memory, mapped by every process that uses the queue. Engine processes
// that block putting into a full queue name it in their own memory; the
// trainer, whose gets do not block when the queue is full, never does. So
// once a semaphore is resolved in one process, the other targets that map
// the same file (by device and inode) get it as their pool too, at their
// own address.

// translate finds where the file bytes mapped at addr in one process's
// mappings are mapped in another's.
func translate(addr uint64, from, to []mapping) (uint64, bool) {
	for _, m := range from {
		if addr < m.start || addr >= m.end {
			continue
		}
		off := m.offset + (addr - m.start)
		for _, t := range to {
			if m.inode != 0 && t.dev == m.dev && t.inode == m.inode && off >= t.offset && off < t.offset+(t.end-t.start) {
				return t.start + (off - t.offset), true
			}
		}
		return 0, false
	}
	return 0, false
}

// newPeers says whether a resolved multiprocessing queue has targets it
// was not shared to yet.
func (w *poolWatch) newPeers(k poolKey) bool {
	wp := w.watched[k]
	if w.peers == nil || wp == nil || wp.pool == nil || wp.pool.Kind != pymem.KindMPQueue {
		return false
	}
	for _, pid := range w.peers(k.pid) {
		if !wp.sharedTo[pid] {
			return true
		}
	}
	return false
}

// share gives the other targets that map a resolved multiprocessing
// queue's semaphore that semaphore as a pool. Called with w.mu held.
func (w *poolWatch) share(k poolKey, wp *watchedPool, minor int, now time.Time) {
	if w.peers == nil || wp.pool.Kind != pymem.KindMPQueue {
		return
	}
	if wp.sharedTo == nil {
		wp.sharedTo = map[int]bool{}
	}
	wp.sharedAt = now
	addr, max := wp.pool.Word()
	from, err := readMaps(w.procRoot, k.pid)
	if err != nil {
		return
	}
	for _, pid := range w.peers(k.pid) {
		to, err := readMaps(w.procRoot, pid)
		if err != nil {
			continue
		}
		at, ok := translate(addr, from, to)
		if !ok {
			wp.sharedTo[pid] = true // it does not map the queue's semaphore
			continue
		}
		pk := poolKey{pid, at}
		if _, seen := w.watched[pk]; seen {
			wp.sharedTo[pid] = true
			continue
		}
		sp := &watchedPool{last: -1, shared: int64(max), sharedFD: -1}
		if fd, ok := wp.pool.ReadFD(); ok {
			sp.sharedFD = sameReadEnd(w.procRoot, k.pid, fd, pid)
		}
		if err := w.resolveShared(pk, sp, minor, now); err != nil {
			continue
		}
		w.watched[pk] = sp
		wp.sharedTo[pid] = true
		w.changed = true
		if w.putInto[pid] == 0 && w.putInto[k.pid] == k.addr {
			// The engines' blocked puts are puts into this process's
			// pool (a queue the other process got from, a DataLoader
			// worker's index queue, is not).
			w.putInto[pid] = at
		}
	}
}

// resolveShared (re)reads a shared semaphore in the process that maps it.
func (w *poolWatch) resolveShared(k poolKey, wp *watchedPool, minor int, now time.Time) error {
	r, err := w.reader(k.pid, minor)
	if err != nil {
		return err
	}
	p, err := r.SemaphorePool(k.addr, wp.shared)
	if err != nil {
		return fmt.Errorf("shared pool: %w", err)
	}
	p.SetReadFD(wp.sharedFD)
	wp.pool, wp.resolved = p, now
	return nil
}

// sameReadEnd is the descriptor of process to that reads the pipe fd
// reads in process from (the queue's items come through it), or -1: the
// same pipe (by inode), opened for reading.
func sameReadEnd(procRoot string, from, fd, to int) int {
	pipe, err := os.Readlink(filepath.Join(procRoot, strconv.Itoa(from), "fd", strconv.Itoa(fd)))
	if err != nil || !strings.HasPrefix(pipe, "pipe:") {
		return -1
	}
	dir := filepath.Join(procRoot, strconv.Itoa(to), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, err := os.Readlink(filepath.Join(dir, e.Name())); err != nil || link != pipe {
			continue
		}
		if readOnly(filepath.Join(procRoot, strconv.Itoa(to), "fdinfo", e.Name())) {
			return n
		}
	}
	return -1
}

// readOnly says whether an fdinfo file's flags open the file for reading
// only (O_ACCMODE bits 0: the pipe's read end, not its write end).
func readOnly(fdinfo string) bool {
	b, err := os.ReadFile(fdinfo)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&3 == 0
		}
	}
	return false
}
