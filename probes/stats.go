package probes

import (
	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/events"
)

// Stats counts what was lost or odd on the way from the probes.
type Stats struct {
	RingbufFull   uint64 // events dropped because the ring buffer was full
	KernelMapFull uint64 // launches not counted per kernel: too many kernels
	StaleCalls    uint64 // calls whose return was never seen
	NoThreadState uint64 // probe hits with no per-thread state
	StacksLost    uint64 // stack samples dropped: the stacks ring buffer was full
	BadRecords    uint64 // records the reader could not decode
	Events        uint64 // events delivered
	// LostByKind is RingbufFull by the kind of event lost (calls, Python
	// waits, ...), and LossSpans when (losses.go).
	LostByKind map[events.Kind]uint64
	LossSpans  []LossSpan
}

// Lost is the number of events or counts that did not make it.
func (s Stats) Lost() uint64 { return s.RingbufFull + s.BadRecords }

// ProgramStat is how often one BPF program ran, and for how long.
type ProgramStat = bpf.ProgramStat

// What a probe's trap costs the probed thread at least, besides its
// program's run: ProgramStat.Cost prices runs at these.
const (
	EntryTrapCost  = bpf.EntryTrapCost
	ReturnTrapCost = bpf.ReturnTrapCost
)

// WaitCount is how often one Python wait probe fired in one process's
// thread, and how many of those it reported.
type WaitCount = bpf.WaitCount

// ProbeStats is how often each BPF program ran and for how long (with
// Config.ProgramStats), and the Python wait probes' hits by process and
// function (with Config.CountWaits).
func (s *Session) ProbeStats() ([]ProgramStat, []WaitCount, error) {
	var progs []ProgramStat
	if s.progStats != nil {
		progs = s.objs.ProgramStats()
	}
	if !s.cfg.CountWaits {
		return progs, nil, nil
	}
	waits, err := s.objs.WaitCounts()
	return progs, waits, err
}

// Stats returns the loss counters, summed over CPUs.
func (s *Session) Stats() Stats {
	s.losses.read()
	st := Stats{Events: s.delivered.Load()}
	st.LostByKind, st.LossSpans = s.losses.snapshot()
	s.mu.Lock()
	d := s.drain
	s.mu.Unlock()
	if d != nil {
		st.BadRecords = d.bad.Load()
	}
	if s.stacks != nil {
		st.BadRecords += s.stacks.drain.bad.Load()
	}
	var vals []uint64
	for i := uint32(0); i < bpf.NumStats; i++ {
		if err := s.objs.Stats.Lookup(i, &vals); err != nil {
			continue
		}
		var sum uint64
		for _, v := range vals {
			sum += v
		}
		switch i {
		case bpf.StatRingbufFull:
			st.RingbufFull = sum
		case bpf.StatKernelMapFull:
			st.KernelMapFull = sum
		case bpf.StatStaleCall:
			st.StaleCalls = sum
		case bpf.StatNoThreadState:
			st.NoThreadState = sum
		case bpf.StatStacksFull:
			st.StacksLost = sum
		}
	}
	return st
}

// LostBetween is how many events the full ring buffer cost in the spans
// of loss overlapping [start, end] (monotonic ns): a step's numbers
// are incomplete where it is more than 0. Run reads the losses before it
// hands the sink a batch, so a step whose end is in the batch sees every
// loss before that end.
func (s *Session) LostBetween(start, end uint64) uint64 { return s.losses.between(start, end) }

// readLosses reads the loss spans where the ring-buffer-full count moved
// (one lookup a pass otherwise).
func (s *Session) readLosses() {
	var vals []uint64
	if err := s.objs.Stats.Lookup(bpf.StatRingbufFull, &vals); err != nil {
		return
	}
	var sum uint64
	for _, v := range vals {
		sum += v
	}
	if sum != s.fullSeen {
		s.fullSeen = sum
		s.losses.read()
	}
}
