package probes

import (
	"context"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/pymem"
)

// Sample pools: a Python wait in a queue's get or put carries the queue
// object's address (the frame's self). The session then reads that
// queue's length from the process's memory every PoolInterval
// (process_vm_readv: the target is not stopped and runs no code for it)
// and sends a KindPool event when the length changes, and every
// poolResend otherwise. The words the process's pool keeps its length
// (and a deque its append+pop counter) in go to the BPF programs, which
// read them at each CUDA call return and write of the process: a step's
// pool is then its length as the step ended, not as last polled. The
// step thread (SetStepThread) says which queue is the pool.
//
// Polling is the fallback, not the rule: reading another process's
// memory is not free for it. On the H200 host, reading one word of a
// data-bound PyTorch job every 10 ms slowed its steps by ~4% (every
// 250 ms: ~1.6%), while the same readings taken by the BPF programs cost
// nothing measurable. So a pool whose BPF readings are arriving is only
// checked once every poolRecheck (one read: is the deque still one?).

const (
	// poolResend re-sends an unchanged length, so a reader knows it is
	// still current.
	poolResend = 250 * time.Millisecond
	// poolRecheck reads a pool the BPF programs are reading anyway, so
	// that a queue freed and its memory reused stops being read as one.
	poolRecheck = time.Second
	// poolResolve re-resolves a queue from its object down.
	poolResolve = 10 * time.Second
	// bpfFresh is how recent a process's last BPF pool reading must be
	// for polling its pool to be left out.
	bpfFresh = time.Second
)

type poolKey struct {
	pid  int
	addr uint64
}

type watchedPool struct {
	pool     *pymem.Pool
	resolved time.Time
	read     time.Time // last read here
	last     int
	sent     time.Time
	shared   int64        // a semaphore another process resolved: its maximum
	sharedTo map[int]bool // the processes a multiprocessing queue was shared to
	minor    int          // the CPython minor of the process that resolved it
	sharedAt time.Time    // when it was last shared
	sharedFD int          // and its queue's pipe read end here, -1: not found
}

// poolWatch holds the queues found and reads them.
type poolWatch struct {
	mu      sync.Mutex
	found   map[poolKey]int // queue -> the process's CPython minor, to resolve
	watched map[poolKey]*watchedPool
	failed  map[poolKey]bool
	readers map[int]*pymem.Reader

	gotBy   map[uint64]uint64    // pid<<32|tid -> the queue the thread last waited to get from
	gotAny  map[int]uint64       // pid -> the queue any of its threads last waited to get from
	putInto map[int]uint64       // pid -> the queue a put last waited on
	step    map[int]uint32       // pid -> its step thread
	inBPF   map[uint32]bpfPool   // by pid
	bpfRead map[uint32]time.Time // by pid: when an event last carried the BPF programs' reading
	// changed says the pools or what picks among them changed since the
	// BPF map was last brought in line: only then is it (syncBPF).
	changed bool
	// setWord puts (or, addr 0, deletes) a process's pool words in the BPF
	// map.
	setWord func(pid uint32, p bpfPool) error
	// peers are the other targets, to share a semaphore with (poolshare.go).
	peers func(pid int) []int
	// stepless says a process has no steps to come: CPU-only for long
	// enough that its wait probes are thinned (cpuonly.go). Its queues are
	// read once a poolRecheck: no step's pool comes from them. (A trainer
	// reads the queue that DataLoader workers or engine processes put
	// into in its own memory, where the BPF programs read it.) Read every
	// PoolInterval, they were ~200 reads a second of each producer's
	// memory on the dev VM (testdata/python/pipeline.py --procs).
	stepless func(pid int) bool
	procRoot string
}

type bpfPool struct {
	addr   uint64
	max    uint32
	state  uint64
	readFD uint32 // + 1, 0: none
}

// wordOf is where BPF reads a pool's length and state counter, and which
// descriptor's reads count its items taken.
func wordOf(p *pymem.Pool) bpfPool {
	addr, max := p.Word()
	state, _ := p.StateWord()
	w := bpfPool{addr: addr, max: max, state: state}
	if fd, ok := p.ReadFD(); ok {
		w.readFD = uint32(fd) + 1
	}
	return w
}

func newPoolWatch(setWord func(pid uint32, p bpfPool) error) *poolWatch {
	return &poolWatch{found: map[poolKey]int{}, watched: map[poolKey]*watchedPool{}, failed: map[poolKey]bool{},
		readers: map[int]*pymem.Reader{}, gotBy: map[uint64]uint64{}, gotAny: map[int]uint64{}, putInto: map[int]uint64{},
		step: map[int]uint32{}, inBPF: map[uint32]bpfPool{}, bpfRead: map[uint32]time.Time{}, setWord: setWord}
}

// setStepThread says which thread of a process is its training loop.
func (w *poolWatch) setStepThread(pid int, tid uint32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.step[pid] != tid {
		w.step[pid], w.changed = tid, true
	}
}

// pick is the queue a process's step thread takes samples from (while it
// is not known, the one any thread last waited to get from), or else the
// one its engines block putting into, or else its only queue.
func (w *poolWatch) pick(pid int, tid uint32) (*watchedPool, bool) {
	for _, addr := range []uint64{w.gotBy[uint64(pid)<<32|uint64(tid)], w.gotAny[pid], w.putInto[pid]} {
		if wp, ok := w.watched[poolKey{pid, addr}]; ok {
			return wp, true
		}
	}
	var only *watchedPool
	for k, wp := range w.watched {
		if k.pid == pid {
			if only != nil {
				return nil, false
			}
			only = wp
		}
	}
	return only, only != nil
}

// syncBPF brings the BPF map in line with each process's pool.
func (w *poolWatch) syncBPF() {
	if w.setWord == nil || !w.changed {
		return
	}
	w.changed = false
	want := map[uint32]bpfPool{}
	for k := range w.watched {
		if _, done := want[uint32(k.pid)]; done {
			continue
		}
		if wp, ok := w.pick(k.pid, w.step[k.pid]); ok {
			want[uint32(k.pid)] = wordOf(wp.pool)
		}
	}
	for pid, p := range want {
		if w.inBPF[pid] == p {
			continue
		}
		if w.setWord(pid, p) != nil {
			w.changed = true // try again at the next reading
			continue
		}
		w.inBPF[pid] = p
	}
	for pid := range w.inBPF {
		if _, ok := want[pid]; ok {
			continue
		}
		if w.setWord(pid, bpfPool{}) != nil {
			w.changed = true
			continue
		}
		delete(w.inBPF, pid)
	}
}

// queueFrame says whether a frame is a queue's get or put, whose self is
// the queue (3.10's frames name the method without its class).
func queueFrame(f events.PyFrame) bool {
	fn := f.Func[strings.LastIndexByte(f.Func, '.')+1:]
	if fn != "get" && fn != "put" {
		return false
	}
	return path.Base(f.File) == "queue.py" || strings.HasSuffix(f.File, "multiprocessing/queues.py")
}

// note looks at a Python wait for queues to watch. A DataLoader's
// pin-memory thread only moves batches from one queue to another: its gets
// do not say which queue the loop takes from.
func (w *poolWatch) note(e *events.Event, minor int) {
	relay := slices.ContainsFunc(e.Frames, events.PyFrame.PinMemoryLoop)
	for _, f := range e.Frames {
		if f.Self == 0 || !queueFrame(f) {
			continue
		}
		k := poolKey{int(e.PID), f.Self}
		w.mu.Lock()
		if _, ok := w.watched[k]; !ok && !w.failed[k] {
			w.found[k] = minor
		}
		switch {
		case relay:
		case strings.HasSuffix(f.Func, "put"):
			w.changed = update(w.putInto, k.pid, k.addr) || w.changed
		default:
			w.changed = update(w.gotBy, uint64(e.PID)<<32|uint64(e.TID), k.addr) || w.changed
			w.changed = update(w.gotAny, k.pid, k.addr) || w.changed
		}
		w.mu.Unlock()
	}
}

// read reads every queue once and returns the events to send.
func (w *poolWatch) read(now time.Time) []events.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, minor := range w.found {
		delete(w.found, k)
		wp := &watchedPool{last: -1, minor: minor}
		w.watched[k] = wp
		if w.resolve(k, minor, now) != nil {
			delete(w.watched, k)
			w.failed[k] = true
			continue
		}
		w.changed = true
		w.share(k, wp, minor, now)
	}
	defer w.syncBPF()
	var out []events.Event
	for k, wp := range w.watched {
		if wp.shared == 0 && now.Sub(wp.sharedAt) >= time.Second && w.newPeers(k) {
			// Targets attached since (engines found by --children).
			w.share(k, wp, wp.minor, now)
		}
		if now.Sub(wp.read) < poolRecheck && w.readRarely(k, wp, now) {
			continue
		}
		if now.Sub(wp.resolved) >= poolResolve {
			var err error
			if wp.shared != 0 {
				err = w.resolveShared(k, wp, 0, now)
			} else {
				err = w.resolve(k, 0, now)
			}
			w.changed = true // resolved anew, or gone
			if err != nil {
				delete(w.watched, k)
				continue
			}
		}
		n, err := wp.pool.Len()
		wp.read = now
		if err != nil {
			delete(w.watched, k)
			w.changed = true
			continue
		}
		if n == wp.last && now.Sub(wp.sent) < poolResend {
			continue
		}
		wp.last, wp.sent = n, now
		at := monotonicNow()
		e := events.Event{Kind: events.KindPool, PID: uint32(k.pid), Start: at, End: at, Name: wp.pool.Kind}
		e.Args[0], e.Args[1] = uint64(n), k.addr
		out = append(out, e)
	}
	return out
}

// sawBPFReadings notes processes whose events carried the BPF programs'
// pool reading.
func (w *poolWatch) sawBPFReadings(pids []uint32, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, pid := range pids {
		w.bpfRead[pid] = now
	}
}

// readByBPF says whether the BPF programs are reading this pool: it is
// the one in their map for its process, and its readings are arriving.
func (w *poolWatch) readByBPF(k poolKey, wp *watchedPool, now time.Time) bool {
	pid := uint32(k.pid)
	in, ok := w.inBPF[pid]
	return ok && in == wordOf(wp.pool) && now.Sub(w.bpfRead[pid]) < bpfFresh
}

// readRarely says whether a queue is read only once a poolRecheck: the
// BPF programs read it, or no step's pool comes from it.
func (w *poolWatch) readRarely(k poolKey, wp *watchedPool, now time.Time) bool {
	return w.readByBPF(k, wp, now) || w.notThePool(k, wp) || w.stepless != nil && w.stepless(k.pid)
}

// notThePool says whether a queue is not its process's pool, the step
// thread being known: the correlator reads no step's pool from it, so it
// is read once a poolRecheck, like one the BPF programs read. In the H200
// pair's recorded trace each rank watched three multiprocessing queues
// and the engine four (the ranks' queues are shared to every process),
// all but one a process read every PoolInterval (10 ms): ~700 reads a
// second of the job's memory, for readings no step used.
func (w *poolWatch) notThePool(k poolKey, wp *watchedPool) bool {
	tid, known := w.step[k.pid]
	if !known {
		return false
	}
	pool, ok := w.pick(k.pid, tid)
	return ok && pool != wp
}

// reader is the process's pymem reader; minor 0 takes the one made.
func (w *poolWatch) reader(pid, minor int) (*pymem.Reader, error) {
	if r := w.readers[pid]; r != nil {
		return r, nil
	}
	r, err := pymem.NewReader(pid, minor)
	if err != nil {
		return nil, err
	}
	w.readers[pid] = r
	return r, nil
}

// resolve (re)reads what a queue's length is kept in; minor 0 reuses the
// process's reader.
func (w *poolWatch) resolve(k poolKey, minor int, now time.Time) error {
	r, err := w.reader(k.pid, minor)
	if err != nil {
		return err
	}
	p, err := r.Pool(k.addr)
	if err != nil {
		return err
	}
	wp := w.watched[k]
	wp.pool, wp.resolved = p, now
	return nil
}

// run reads the queues every interval until ctx ends, handing the events
// to send to out.
func (w *poolWatch) run(ctx context.Context, interval time.Duration, out func([]events.Event)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if evs := w.read(now); len(evs) > 0 {
				out(evs)
			}
		}
	}
}

// update sets m[k] to v and says whether that changed it.
func update[K comparable, V comparable](m map[K]V, k K, v V) bool {
	if old, ok := m[k]; ok && old == v {
		return false
	}
	m[k] = v
	return true
}
