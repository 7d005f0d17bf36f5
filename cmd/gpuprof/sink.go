package main

import (
	"sync"

	"github.com/gpuprof/gpuprof/events"
)

// sink takes events from the probes and rounds from the GPU sampler, two
// goroutines, one at a time and in one order: the trace (--record) holds
// them as the steps saw them, so a replay cuts the same steps.
type sink struct {
	mu       sync.Mutex
	trace    *events.TraceWriter // nil: not recording
	traceErr error
	st       *stepper
}

func (s *sink) add(e *events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trace != nil && s.traceErr == nil {
		s.traceErr = s.trace.Write(e)
	}
	s.st.add(e)
}
