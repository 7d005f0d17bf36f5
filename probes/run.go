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
)

// A controller changes what is attached to the targets as their events
// and the time show what is needed: the twins' layer (twins.go), the
// record sites (recordsites.go), the probes attached part of the time
// (sampling.go), the short waits reported while a pool is looked for
// (poollearn.go). Run hands each every batch and calls it every pass;
// Detach has it forget the process.
type controller interface {
	observe(batch []events.Event)
	tick(now time.Time)
	forget(pid int)
}

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
	return s.run(ctx, sink, false)
}

// Drain detaches every probe from every target, keeping the targets
// (Detach and Close then find nothing left to close), and hands the sink
// what is left in the ring buffer, until the drainer has twice found it
// empty: after it every event the probes produced was delivered or
// counted lost (Stats). For the end of a run that ctx ended (Run
// returned nil) while the targets ran on; no Run may follow.
func (s *Session) Drain(sink Sink) error {
	s.quiesce()
	if err := s.run(context.Background(), sink, true); err != nil && !errors.Is(err, ErrTargetsExited) {
		return err
	}
	return nil
}

func (s *Session) run(ctx context.Context, sink Sink, stopping bool) error {
	var batch, heldBack []events.Event
	var pooled []uint32
	var rescan bool
	var emptied uint64
	var err error
	s.mu.Lock() // Attach may add markers from another goroutine (addMarksLocked)
	if s.drain == nil {
		s.drain = newDrainer(s.reader, s.cfg.Poll, heldMax, testStall())
	}
	s.mu.Unlock()
	exiting := false
	var drainedAt uint64 // the drainer's empty reads when the targets had all exited
	if pools := s.python.pools; pools != nil && s.cfg.PoolInterval > 0 {
		poolCtx, stop := context.WithCancel(ctx)
		defer stop()
		go pools.run(poolCtx, s.cfg.PoolInterval, func(evs []events.Event) { s.addMarks(evs...) })
	}
	// Not ctx: a run that ends still names the kernels it saw (siteWait).
	siteCtx, stopSites := context.WithCancel(context.Background())
	defer stopSites()
	go s.sites.run(siteCtx)
	poll := time.NewTimer(s.cfg.Poll)
	defer poll.Stop()
	if stopping { // Drain: probes detached, reading what is left
		drainedAt = s.drain.emptiedNow()
	}
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
		if s.stacks != nil {
			batch = s.stacks.take(batch, s.python)
		}
		kept := batch[:0]
		for _, ev := range batch {
			if ev.Kind == events.KindPyWait && !s.python.nameWait(&ev) {
				continue // its process is gone, its code never named
			}
			if ev.Kind == events.KindKernelSite {
				s.sites.add(ev) // named as a marker, later
				continue
			}
			kept = append(kept, ev)
		}
		batch = kept
		if s.python.pools != nil {
			s.python.pools.sawBPFReadings(pidsWithPool(batch, &pooled), time.Now())
		}
		for _, c := range s.controllers {
			c.observe(batch)
		}
		// Events after a marker not yet due wait with it (heldBack), so
		// that the sink sees every event in End order, markers included.
		var cut uint64
		batch, cut = s.dueMarks(append(batch, heldBack...), emptied)
		slices.SortStableFunc(batch, events.CompareEnd)
		i, _ := slices.BinarySearchFunc(batch, cut, func(e events.Event, cut uint64) int { return cmp.Compare(e.End, cut) })
		heldBack = append(heldBack[:0], batch[i:]...)
		batch = batch[:i]
		var attached []LibraryPlan
		if !stopping {
			attached = s.rescan(rescan)
			attached = append(attached, s.followChildren()...)
			attached = append(attached, s.followNamed()...)
			now := time.Now()
			for _, c := range s.controllers {
				c.tick(now)
			}
		}
		s.readLosses()
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
				s.sites.wait(siteWait)
				s.flushHeld(sink, heldBack)
				return ErrTargetsExited
			}
		}
		if ctx.Err() != nil || stopping && emptied >= drainedAt+2 {
			s.sites.wait(siteWait)
			s.flushHeld(sink, heldBack)
			return nil
		}
	}
}

// siteWait bounds how long a run's end waits for its last kernels to be
// named (reading a large library's symbols takes seconds).
const siteWait = 5 * time.Second

// flushHeld hands the sink what Run still holds as it returns: the events
// held back and every marker, due or not.
func (s *Session) flushHeld(sink Sink, held []events.Event) {
	batch, _ := s.dueMarks(held, math.MaxUint64)
	if len(batch) == 0 {
		return
	}
	slices.SortStableFunc(batch, events.CompareEnd)
	s.delivered.Add(uint64(len(batch)))
	sink(batch, nil)
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
		if !t.exited && exitedWithin(t, 0) {
			t.exited = true
		}
		all = all && t.exited
	}
	return all
}
