package main

import (
	"sync"
	"time"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/metrics"
)

// sink takes events from the probes and rounds from the GPU sampler, two
// goroutines, one batch at a time and in one order: the trace (--record)
// holds them as the steps saw them, so a replay cuts the same steps. The
// control loop behind it sees one goroutine at a time.
type sink struct {
	mu       sync.Mutex
	trace    *events.TraceWriter // nil: not recording
	traceErr error
	loop     *control.Loop
	seen     map[uint32]bool   // processes whose identity was looked up
	metrics  *metrics.Exporter // nil: no --metrics-addr; takes the GPU rounds and Xids
	profiles *profileRecorder  // nil: no --pyroscope; takes every event ahead of the loop
	taps     []eventTap        // the pictures (--trace, --html, gpuprof top): every event, ahead of the loop
}

// An eventTap sees every event the loop does, in the loop's order, from
// one goroutine at a time: the outputs drawn from the run as a whole.
type eventTap interface {
	Event(e *events.Event)
}

// add takes a batch of events, in order.
func (s *sink) add(batch ...events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range batch {
		s.take(&batch[i])
	}
	if s.profiles != nil {
		s.profiles.tick(time.Now())
	}
}

func (s *sink) take(e *events.Event) {
	if e.PID != 0 && !s.seen[e.PID] {
		if s.seen == nil {
			s.seen = map[uint32]bool{}
		}
		s.seen[e.PID] = true
		// Its rank, ahead of its first event, in the trace too: a replay
		// has no /proc to read it from.
		if info, ok := processInfo(e.PID); ok {
			s.put(&info)
		}
	}
	s.put(e)
}

func (s *sink) put(e *events.Event) {
	if s.trace != nil && s.traceErr == nil {
		s.traceErr = s.trace.Write(e)
	}
	if s.profiles != nil {
		s.profiles.add(e) // ahead of the loop, which may cut a step on it
	}
	for _, t := range s.taps {
		t.Event(e)
	}
	s.loop.Add(e)
	if s.metrics != nil {
		switch e.Kind {
		case events.KindGPUSamples:
			s.metrics.GPUs(e.GPUs)
		case events.KindXid:
			s.metrics.Xid(events.XidOf(e))
		}
	}
}
