package pymem

import (
	"errors"
	"fmt"
)

// Kinds of Pool.
const (
	KindQueue   = "queue.Queue"           // and LifoQueue, PriorityQueue, subclasses
	KindMPQueue = "multiprocessing.Queue" // multiprocessing.queues.Queue, JoinableQueue
)

// maxDepth bounds the walk up a class's bases.
const maxDepth = 32

// Pool is a queue resolved down to the one word that holds its length.
// Len is safe for concurrent use.
type Pool struct {
	Kind string // KindQueue or KindMPQueue
	Type string // the object's own class, e.g. "PriorityQueue"

	r   *Reader
	obj uint64
	// KindQueue: the deque or list self.queue, and its type, which Len
	// checks on every reading. KindMPQueue: the glibc sem_t of
	// self._sem._semlock, and the semaphore's maximum.
	addr     uint64
	seqType  uint64
	deque    bool
	maxvalue int64
	readFD   int // KindMPQueue: self._reader's file descriptor, -1 unknown
}

// Pool resolves the queue object obj: its class (by name and module, up
// its bases), then the attributes that hold its length. It reads Len once
// before returning.
func (r *Reader) Pool(obj uint64) (*Pool, error) {
	t, err := r.objType(obj)
	if err != nil {
		return nil, fmt.Errorf("pymem: type of object at %#x: %w", obj, err)
	}
	p := &Pool{Type: t.name, r: r, obj: obj}
	p.Kind, err = r.queueKind(t)
	if err == nil {
		switch p.Kind {
		case KindQueue:
			err = r.resolveQueue(p, obj, t)
		case KindMPQueue:
			err = r.resolveMPQueue(p, obj, t)
		default:
			err = fmt.Errorf("not a queue.Queue or multiprocessing.queues.Queue: %w", ErrNotPool)
		}
	}
	if err == nil {
		_, err = p.length()
	}
	if err != nil {
		return nil, fmt.Errorf("pymem: %s object at %#x: %w", t.name, obj, err)
	}
	return p, nil
}

// queueKind finds, among t and its bases, queue.Queue or
// multiprocessing.queues.Queue: both are called Queue, so the module
// (the class's __module__) tells them apart from each other and from
// any other Queue.
func (r *Reader) queueKind(t *typeInfo) (string, error) {
	for range maxDepth {
		if t.name == "Queue" && t.flags&r.l.FlagHeap != 0 && t.dict != 0 {
			mod, err := r.dictLookup(t.dict, "__module__")
			if err != nil && !errors.Is(err, errNoAttr) {
				return "", fmt.Errorf("class Queue at %#x: __module__: %w", t.addr, err)
			}
			if err == nil {
				name, err := r.str(mod)
				if err != nil {
					return "", fmt.Errorf("class Queue at %#x: __module__: %w", t.addr, err)
				}
				switch name {
				case "queue":
					return KindQueue, nil
				case "multiprocessing.queues":
					return KindMPQueue, nil
				}
			}
		}
		if t.base == 0 {
			return "", nil
		}
		base, err := r.typeInfo(t.base)
		if err != nil {
			return "", fmt.Errorf("base of %s: %w", t.name, err)
		}
		t = base
	}
	return "", fmt.Errorf("more than %d bases", maxDepth)
}

// resolveQueue finds self.queue, which queue.Queue's _init sets once:
// a deque (Queue) or a list (LifoQueue, PriorityQueue).
func (r *Reader) resolveQueue(p *Pool, obj uint64, t *typeInfo) error {
	seq, err := r.attr(obj, t, "queue")
	if err != nil {
		return fmt.Errorf("attribute queue: %w", err)
	}
	s, err := r.objType(seq)
	if err != nil {
		return fmt.Errorf("attribute queue: its type: %w", err)
	}
	if s.name != "collections.deque" && s.name != "list" {
		return fmt.Errorf("attribute queue is a %s, not a collections.deque or list: %w", s.name, ErrNotPool)
	}
	p.addr, p.seqType, p.deque = seq, s.addr, s.name == "collections.deque"
	return nil
}

// resolveMPQueue finds the semaphore that counts free slots: qsize() is
// self._maxsize - self._sem._semlock._get_value(), and _sem, a
// BoundedSemaphore(maxsize), has its SemLock's maxvalue = _maxsize
// (SEM_VALUE_MAX where maxsize <= 0).
func (r *Reader) resolveMPQueue(p *Pool, obj uint64, t *typeInfo) error {
	sem, err := r.attr(obj, t, "_sem")
	if err != nil {
		return fmt.Errorf("attribute _sem: %w", err)
	}
	s, err := r.objType(sem)
	if err != nil {
		return fmt.Errorf("attribute _sem: its type: %w", err)
	}
	// A plain Semaphore's maximum is SEM_VALUE_MAX, not the queue's.
	if s.name != "BoundedSemaphore" {
		return fmt.Errorf("attribute _sem is a %s, not a BoundedSemaphore: %w", s.name, ErrNotPool)
	}
	lock, err := r.attr(sem, s, "_semlock")
	if err != nil {
		return fmt.Errorf("_sem: attribute _semlock: %w", err)
	}
	lt, err := r.objType(lock)
	if err != nil {
		return fmt.Errorf("_sem._semlock: its type: %w", err)
	}
	if lt.name != "_multiprocessing.SemLock" {
		return fmt.Errorf("_sem._semlock is a %s, not a _multiprocessing.SemLock: %w", lt.name, ErrNotPool)
	}
	buf := make([]byte, semLockSize)
	if err := r.read(lock, buf); err != nil {
		return fmt.Errorf("_sem._semlock: %w", err)
	}
	handle := le.Uint64(buf[semLockHandle:])
	maxvalue := int64(int32(le.Uint32(buf[semLockMaxvalue:])))
	kind := int32(le.Uint32(buf[semLockKind:]))
	if kind != semKindSemaphore || maxvalue <= 0 {
		return fmt.Errorf("_sem._semlock: kind %d, maxvalue %d: not a bounded semaphore", kind, maxvalue)
	}
	if err := objAddr(handle); err != nil {
		return fmt.Errorf("_sem._semlock: sem_t: %w", err)
	}
	p.addr, p.maxvalue = handle, maxvalue
	// Its length says nothing of how many items were taken; its pipe's
	// reads do (ReadFD). Without it the pool still has a length.
	p.readFD = -1
	if fd, err := r.readerFD(obj, t); err == nil {
		p.readFD = fd
	}
	return nil
}

// ReadFD is a multiprocessing queue's pipe read end in the process that
// resolved it: each get reads an item's 4-byte length from it, then the
// pickle (multiprocessing.connection: Connection._recv_bytes), so the
// 4-byte reads of this descriptor count the items taken. ok is false for
// other pools, or where it was not found.
func (p *Pool) ReadFD() (fd int, ok bool) {
	return p.readFD, p.Kind == KindMPQueue && p.readFD >= 0
}

// SetReadFD says which descriptor is the queue's pipe read end in this
// Pool's process, for a semaphore resolved in another process
// (SemaphorePool) whose queue's pipe the caller found here.
func (p *Pool) SetReadFD(fd int) { p.readFD = fd }

// readerFD reads self._reader._handle: the Connection's file descriptor,
// a small int.
func (r *Reader) readerFD(obj uint64, t *typeInfo) (int, error) {
	conn, err := r.attr(obj, t, "_reader")
	if err != nil {
		return 0, fmt.Errorf("attribute _reader: %w", err)
	}
	ct, err := r.objType(conn)
	if err != nil {
		return 0, fmt.Errorf("_reader: its type: %w", err)
	}
	h, err := r.attr(conn, ct, "_handle")
	if err != nil {
		return 0, fmt.Errorf("_reader: attribute _handle: %w", err)
	}
	if err := r.checkType(h, "int"); err != nil {
		return 0, fmt.Errorf("_reader._handle: %w", err)
	}
	n, err := r.smallInt(h)
	if err != nil {
		return 0, fmt.Errorf("_reader._handle: %w", err)
	}
	return int(n), nil
}

// smallInt reads a non-negative int below 2**30 (one digit): 3.10 and
// 3.11 keep the digit count in ob_size, 3.12+ in lv_tag (count << 3, the
// low bits the sign: 1 for zero); the first digit follows at 24 in all.
func (r *Reader) smallInt(obj uint64) (int64, error) {
	var b [28]byte
	if err := r.read(obj, b[:]); err != nil {
		return 0, err
	}
	size := int64(le.Uint64(b[r.l.VarSize:]))
	digit := int64(le.Uint32(b[24:]))
	ndigits, negative := size, size < 0
	if r.minor >= 12 {
		ndigits, negative = size>>3, size&3 == 2
	}
	switch {
	case negative || ndigits > 1:
		return 0, fmt.Errorf("int of %d digits (negative %v): not a small non-negative int", ndigits, negative)
	case ndigits == 0:
		return 0, nil
	}
	return digit, nil
}

// Len is the number of items in the queue now: one read of the target.
func (p *Pool) Len() (int, error) {
	n, err := p.length()
	if err != nil {
		return 0, fmt.Errorf("pymem: %s object at %#x: length: %w", p.Type, p.obj, err)
	}
	return n, nil
}

func (p *Pool) length() (int, error) {
	switch p.Kind {
	case KindQueue:
		// ob_refcnt, ob_type, ob_size: the type too, so that a deque
		// freed and its memory reused reads as an error, not a length.
		var b [24]byte
		if err := p.r.read(p.addr, b[:]); err != nil {
			return 0, err
		}
		if tp := le.Uint64(b[8:]); tp != p.seqType {
			return 0, fmt.Errorf("its queue at %#x changed type (freed?)", p.addr)
		}
		n := int64(le.Uint64(b[p.r.l.VarSize:]))
		if n < 0 || n > 1<<40 {
			return 0, fmt.Errorf("its queue at %#x: implausible size %d", p.addr, n)
		}
		return int(n), nil
	case KindMPQueue:
		data, err := p.r.ptr(p.addr)
		if err != nil {
			return 0, fmt.Errorf("semaphore: %w", err)
		}
		v := semValue(data)
		if v > p.maxvalue {
			return 0, fmt.Errorf("semaphore value %d above its maximum %d", v, p.maxvalue)
		}
		return int(p.maxvalue - v), nil
	}
	return 0, fmt.Errorf("pool of unknown kind %q", p.Kind)
}

// Word says where the pool's length can be read without pymem, in one
// aligned 8-byte read (gpuprof's BPF programs read it at each of the step
// thread's CUDA call returns): the length is the word itself when max is
// 0 (a deque's or list's ob_size), else max less its low 32 bits (a
// semaphore's value).
func (p *Pool) Word() (addr uint64, max uint32) {
	if p.Kind == KindMPQueue {
		return p.addr, uint32(p.maxvalue)
	}
	return p.addr + p.r.l.VarSize, 0
}

// StateWord is where a queue.Queue's deque counts its appends and
// poplefts (one aligned word; see dequeState); ok is false for other
// pools (a list, a semaphore), which count nothing.
func (p *Pool) StateWord() (addr uint64, ok bool) {
	if p.Kind != KindQueue || !p.deque {
		return 0, false
	}
	return p.addr + dequeState, true
}

// SemaphorePool is a multiprocessing queue's semaphore as another process
// that maps it sees it: addr is where the sem_t lies in this Reader's
// process (the queue object itself is in the process that resolved it),
// maxvalue the queue's maximum. It reads once before returning.
func (r *Reader) SemaphorePool(addr uint64, maxvalue int64) (*Pool, error) {
	if err := objAddr(addr); err != nil {
		return nil, fmt.Errorf("pymem: semaphore at %#x: %w", addr, err)
	}
	if maxvalue <= 0 {
		return nil, fmt.Errorf("pymem: semaphore at %#x: maximum %d", addr, maxvalue)
	}
	p := &Pool{Kind: KindMPQueue, Type: "semaphore", r: r, obj: addr, addr: addr, maxvalue: maxvalue, readFD: -1}
	if _, err := p.length(); err != nil {
		return nil, fmt.Errorf("pymem: semaphore at %#x: %w", addr, err)
	}
	return p, nil
}
