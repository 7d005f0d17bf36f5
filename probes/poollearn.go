package probes

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/events"
)

// Finding a process's sample pool. gpuprof learns which queue is the pool
// from the frames of a wait in one of its gets or puts (pool.go): a get
// that found the queue empty, a put that found it full. Waits shorter
// than PyMinWait are not reported, and a pool that never runs dry or full
// for long makes only such waits (a trainer waiting a few tens of µs on
// the queue's condition, step after step: seen in the data-bound
// pipeline), so it would never be found. While a Python process has shown
// no queue in a reported wait's frames, for at most poolLearnFor after its
// waits are probed, the BPF programs report its waits from poolLearnWait
// on (py_layout.learning); the first queue seen ends it.
const (
	poolLearnFor  = 10 * time.Second
	poolLearnWait = 5 * time.Microsecond
)

// poolLearner has the programs report short waits of the processes
// whose pool is not found yet (above).
type poolLearner struct {
	*core
	until    map[int]time.Time // learning processes, until when; under mu
	learners atomic.Int32      // len(until), read with no lock
}

func newPoolLearner(c *core) *poolLearner {
	return &poolLearner{core: c, until: map[int]time.Time{}}
}

func (l *poolLearner) observe([]events.Event) {}

func (l *poolLearner) forget(pid int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.until[pid]; ok {
		delete(l.until, pid)
		l.set(pid, false)
	}
}

// start has pid's short waits reported until its pool is seen.
func (l *poolLearner) start(pid int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until[pid] = now.Add(poolLearnFor)
	l.set(pid, true)
}

// note ends pid's learning once a reported wait's frames show
// a queue. Cheap while no process is learning (the usual state).
func (l *poolLearner) note(ev *events.Event) {
	if l.learners.Load() == 0 || !slices.ContainsFunc(ev.Frames, queueFrame) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.until[int(ev.PID)]; ok {
		delete(l.until, int(ev.PID))
		l.set(int(ev.PID), false)
	}
}

// tick ends the learning of processes that showed no queue
// in poolLearnFor (or are gone).
func (l *poolLearner) tick(now time.Time) {
	if l.learners.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for pid, until := range l.until {
		if t := l.targets[pid]; t == nil || now.After(until) {
			delete(l.until, pid)
			l.set(pid, false)
		}
	}
}

// set writes pid's learning flag into its layout and the count
// of learning processes into the programs. Under mu.
func (l *poolLearner) set(pid int, on bool) {
	var layout bpf.PyLayout
	if err := l.objs.Python.Lookup(uint32(pid), &layout); err == nil {
		layout.Learning = 0
		if on {
			layout.Learning = 1
		}
		// UpdateExist: a detached process's layout is not put back.
		if err := l.objs.Python.Update(uint32(pid), &layout, ebpf.UpdateExist); err != nil {
			l.cfg.Log.Debug("pool learning flag not set", "pid", pid, "err", err)
		}
	}
	l.learners.Store(int32(len(l.until)))
	if err := l.objs.SetPyLearning(len(l.until)); err != nil {
		l.cfg.Log.Warn("short Python waits not reported while looking for pools", "err", err)
	}
}
