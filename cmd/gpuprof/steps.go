package main

import (
	"errors"
	"fmt"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/report"
)

// stepper cuts events into steps and sends them where they go: the live
// line and --jsonl. attach, run and replay share it, so a replay gives the
// steps the live run gave.
type stepper struct {
	corr   *correlate.Correlator
	live   *report.Live
	jsonl  *report.JSONL
	anchor correlate.Anchor
	// onAnchor is called when the step boundary is first found or moves.
	onAnchor func(first bool, a correlate.Anchor)
	err      error
}

func newStepper(f *profileFlags, live *report.Live) (*stepper, error) {
	corr, err := correlate.New(f.correlateConfig())
	if err != nil {
		return nil, err
	}
	s := &stepper{corr: corr, live: live}
	if f.jsonl != "" {
		if s.jsonl, err = report.CreateJSONL(f.jsonl); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// add takes one event.
func (s *stepper) add(e *events.Event) {
	steps := s.corr.Add(e)
	if a, ok := s.corr.Anchor(); ok && (a.TID != s.anchor.TID || a.Calls != s.anchor.Calls) {
		first := s.anchor.TID == 0
		s.anchor = a
		s.live.Note(fmt.Sprintf("step boundary: %s on thread %d (%s)", a.Calls, a.TID, a.Reason))
		if s.onAnchor != nil {
			s.onAnchor(first, a)
		}
	}
	s.emit(steps)
}

// finish closes the last step and the outputs.
func (s *stepper) finish() error {
	s.emit(s.corr.Finish())
	s.live.End()
	if s.jsonl != nil {
		s.err = errors.Join(s.err, s.jsonl.Close())
	}
	return s.err
}

func (s *stepper) emit(steps []correlate.Step) {
	for _, st := range steps {
		s.live.Step(st)
		if s.jsonl != nil && s.err == nil {
			s.err = s.jsonl.Write(st)
		}
	}
}
