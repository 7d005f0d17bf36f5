package probes

import (
	"slices"
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

// startPoolLearning has pid's short waits reported until its pool is seen.
func (s *Session) startPoolLearning(pid int, now time.Time) {
	if s.pools == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.poolLearning == nil {
		s.poolLearning = map[int]time.Time{}
	}
	s.poolLearning[pid] = now.Add(poolLearnFor)
	s.setPoolLearning(pid, true)
}

// notePoolLearning ends pid's learning once a reported wait's frames show
// a queue. Cheap while no process is learning (the usual state).
func (s *Session) notePoolLearning(ev *events.Event) {
	if s.poolLearners.Load() == 0 || !slices.ContainsFunc(ev.Frames, queueFrame) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.poolLearning[int(ev.PID)]; ok {
		delete(s.poolLearning, int(ev.PID))
		s.setPoolLearning(int(ev.PID), false)
	}
}

// expirePoolLearning ends the learning of processes that showed no queue
// in poolLearnFor (or are gone).
func (s *Session) expirePoolLearning(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, until := range s.poolLearning {
		if t := s.targets[pid]; t == nil || now.After(until) {
			delete(s.poolLearning, pid)
			s.setPoolLearning(pid, false)
		}
	}
}

// setPoolLearning writes pid's learning flag into its layout and the count
// of learning processes into the programs. Under mu.
func (s *Session) setPoolLearning(pid int, on bool) {
	var l bpf.PyLayout
	if err := s.objs.Python.Lookup(uint32(pid), &l); err == nil {
		l.Learning = 0
		if on {
			l.Learning = 1
		}
		// UpdateExist: a detached process's layout is not put back.
		if err := s.objs.Python.Update(uint32(pid), &l, ebpf.UpdateExist); err != nil {
			s.cfg.Log.Debug("pool learning flag not set", "pid", pid, "err", err)
		}
	}
	s.poolLearners.Store(int32(len(s.poolLearning)))
	if err := s.objs.SetPyLearning(len(s.poolLearning)); err != nil {
		s.cfg.Log.Warn("short Python waits not reported while looking for pools", "err", err)
	}
}
