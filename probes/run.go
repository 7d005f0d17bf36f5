package probes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/pymem"
)

// Sink receives batches of events in End-time order; the slice is reused
// after Sink returns. attached reports libraries attached since the last
// batch.
type Sink func(batch []events.Event, attached []LibraryPlan)

// ErrTargetsExited is returned by Run when every target process has exited.
var ErrTargetsExited = errors.New("every target process exited")

// Run hands the sink the events the drainer read (drain.go), as they come
// and at least every Poll interval, until ctx is done or all targets have
// exited, re-reading the targets' maps when the loader reports a change
// and every Rescan interval.
func (s *Session) Run(ctx context.Context, sink Sink) error {
	var batch, heldBack []events.Event
	var pooled []uint32
	var rescan bool
	var emptied uint64
	var err error
	s.mu.Lock() // Attach may add markers from another goroutine (addMarksLocked)
	if s.drain == nil {
		s.drain = newDrainer(s.reader, s.cfg.Poll)
	}
	s.mu.Unlock()
	exiting := false
	var drainedAt uint64 // the drainer's empty reads when the targets had all exited
	if s.pools != nil && s.cfg.PoolInterval > 0 {
		poolCtx, stop := context.WithCancel(ctx)
		defer stop()
		go s.pools.run(poolCtx, s.cfg.PoolInterval, func(evs []events.Event) {
			s.mu.Lock()
			s.addMarksLocked(evs...)
			s.mu.Unlock()
		})
	}
	poll := time.NewTimer(s.cfg.Poll)
	defer poll.Stop()
	for {
		select {
		case <-s.drain.ready:
		case <-poll.C:
		case <-ctx.Done():
		}
		poll.Reset(s.cfg.Poll)
		batch, rescan, emptied, err = s.drain.take(batch[:0])
		if err != nil {
			return fmt.Errorf("read ring buffer: %w", err)
		}
		kept := batch[:0]
		for _, ev := range batch {
			if ev.Kind == events.KindPyWait && !s.namePyWait(&ev) {
				continue // its process is gone, its code never named
			}
			kept = append(kept, ev)
		}
		batch = kept
		if s.pools != nil {
			s.pools.sawBPFReadings(pidsWithPool(batch, &pooled), time.Now())
		}
		s.countTwins(batch)
		s.watchRecords(batch)
		if s.poolLearners.Load() > 0 {
			s.expirePoolLearning(time.Now())
		}
		// Events after a marker not yet due wait with it (heldBack), so
		// that the sink sees every event in End order, markers included.
		s.mu.Lock()
		var cut uint64
		batch, cut = s.dueMarksLocked(append(batch, heldBack...), emptied)
		s.mu.Unlock()
		slices.SortStableFunc(batch, events.CompareEnd)
		i, _ := slices.BinarySearchFunc(batch, cut, func(e events.Event, cut uint64) int { return cmp.Compare(e.End, cut) })
		heldBack = append(heldBack[:0], batch[i:]...)
		batch = batch[:i]
		attached := s.rescan(rescan)
		attached = append(attached, s.followChildren()...)
		attached = append(attached, s.followNamed()...)
		s.sampleCPUOnly(time.Now())
		if marks := s.sampleLaunches(time.Now()); len(marks) > 0 {
			s.mu.Lock()
			s.addMarksLocked(marks...)
			s.mu.Unlock()
		}
		s.delivered.Add(uint64(len(batch)))
		if len(batch) > 0 || len(attached) > 0 {
			sink(batch, attached)
		}
		if s.allExited() {
			if !exiting {
				// What the targets wrote between the last read and their
				// exit may still be in the ring buffer (a job's last
				// step, for one): go on until the drainer has twice found
				// it empty since.
				exiting, drainedAt = true, emptied
				continue
			}
			if emptied >= drainedAt+2 {
				s.flushHeld(sink, heldBack)
				return ErrTargetsExited
			}
		}
		if ctx.Err() != nil {
			s.flushHeld(sink, heldBack)
			return nil
		}
	}
}

// flushHeld hands the sink what Run still holds as it returns: the events
// held back and every marker, due or not.
func (s *Session) flushHeld(sink Sink, held []events.Event) {
	s.mu.Lock()
	batch, _ := s.dueMarksLocked(held, math.MaxUint64)
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	slices.SortStableFunc(batch, events.CompareEnd)
	s.delivered.Add(uint64(len(batch)))
	sink(batch, nil)
}

// heldMark is an event gpuprof makes itself (a marker, a pool reading),
// held until the drainer has read what the probes wrote before it.
type heldMark struct {
	ev  events.Event
	due uint64 // the drainer's empty reads from which it is due
}

// addMarksLocked holds markers until every event written before them is
// read, so that each sorts in among the events about it: the ring buffer
// read empty twice after now holds all of them. Under mu.
func (s *Session) addMarksLocked(evs ...events.Event) {
	due := uint64(0)
	if s.drain != nil {
		due = s.drain.emptiedNow() + 2
	}
	for _, ev := range evs {
		s.marks = append(s.marks, heldMark{ev: ev, due: due})
	}
}

// dueMarksLocked moves the markers due at emptied empty reads into batch,
// and returns the earliest End of those not yet due (the events from
// which on must wait for them), MaxUint64 if none. Under mu.
func (s *Session) dueMarksLocked(batch []events.Event, emptied uint64) ([]events.Event, uint64) {
	kept := s.marks[:0]
	cut := uint64(math.MaxUint64)
	for _, m := range s.marks {
		if m.due <= emptied {
			batch = append(batch, m.ev)
		} else {
			kept = append(kept, m)
			cut = min(cut, m.ev.End)
		}
	}
	clear(s.marks[len(kept):])
	s.marks = kept
	return batch, cut
}

// namePyWait names a Python wait's frames and notes the wait for the
// watchers of its thread and of the sample pool; false if no frame could
// be named.
func (s *Session) namePyWait(ev *events.Event) bool {
	t, mem, minor := s.pyTargetOf(ev.PID)
	if !nameFrames(mem, ev, time.Now()) {
		return false
	}
	s.watchWaitingThread(t, ev)
	if s.pools != nil {
		s.pools.note(ev, minor)
		s.notePoolLearning(ev)
	}
	return true
}

// pidsWithPool are the processes of batch's events that carry a BPF pool
// reading, into buf.
func pidsWithPool(batch []events.Event, buf *[]uint32) []uint32 {
	*buf = (*buf)[:0]
	for i := range batch {
		if batch[i].Pool != 0 && !slices.Contains(*buf, batch[i].PID) {
			*buf = append(*buf, batch[i].PID)
		}
	}
	return *buf
}

// pyTargetOf is, in one look, the target of a Python wait's process, the
// reader of its CPython objects and its minor version; a nil reader once
// the process is gone.
func (s *Session) pyTargetOf(pid uint32) (*target, *pymem.Reader, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[int(pid)]
	if t == nil || t.python == nil {
		return t, nil, 0
	}
	return t, t.pyMemLocked(), t.python.Minor
}

// targetPyMem is the reader of a target's CPython objects, nil if it runs
// none (or it is gone).
func (s *Session) targetPyMem(t *target) *pymem.Reader {
	if t == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.python == nil {
		return nil
	}
	return t.pyMemLocked()
}

// pyMemLocked is the target's reader of CPython objects, opened the first
// time; nil if it cannot be. Under mu, with t.python known.
func (t *target) pyMemLocked() *pymem.Reader {
	if t.pyMem == nil {
		r, err := pymem.NewReader(t.pid, t.python.Minor)
		if err != nil {
			return nil
		}
		t.pyMem = r
	}
	return t.pyMem
}

// nameFrames reads the names of a Python wait's frames from their code
// objects with r, keeping the frames it could name in order. It says
// whether any was.
func nameFrames(r *pymem.Reader, ev *events.Event, now time.Time) bool {
	if r == nil {
		return false
	}
	named := ev.Frames[:0]
	for _, f := range ev.Frames {
		c, err := r.Code(f.Code, now)
		if err != nil {
			continue
		}
		f.Func, f.File = c.Func, c.File
		named = append(named, f)
	}
	ev.Frames = named
	return len(named) > 0
}

// allExited polls the targets' pidfds, which become readable on exit.
func (s *Session) allExited() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.targets) == 0 {
		return false
	}
	all := true
	for _, t := range s.targets {
		if !t.exited && s.exitedNow(t) {
			t.exited = true
		}
		all = all && t.exited
	}
	return all
}
