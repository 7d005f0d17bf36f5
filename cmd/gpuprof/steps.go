package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/report"
)

// stepper cuts events into steps, one correlator per process, and sends
// the steps where they go: the live line and --jsonl. attach, run and
// replay share it, so a replay gives the steps the live run gave.
type stepper struct {
	cfg   correlate.Config
	procs map[uint32]*procSteps
	live  *report.Live
	jsonl *report.JSONL
	// marks are the job-wide launch-probe markers so far (PID 0, older
	// traces), for a process seen later.
	marks []events.Event
	// onAnchor is called when a process's step boundary is first found or
	// moves.
	onAnchor func(first bool, a correlate.Anchor)
	// onWaits is called when what a process's steps need of the Python
	// wait probes changes (correlate.Correlator.WaitProbesNeeded).
	onWaits func(pid uint32, need correlate.WaitProbes)
	// onStepTime is called when a process's steps are found to take
	// longer than it was last told (their median wall time over the
	// latest few), for the launch probes' phases to hold whole ones.
	onStepTime func(pid uint32, step time.Duration)
	err        error
	// ranks are the processes' ranks in a distributed job (KindProcess).
	ranks map[uint32]int
}

// procSteps is one process's steps.
type procSteps struct {
	corr      *correlate.Correlator
	anchor    correlate.Anchor
	waitNeeds correlate.WaitProbes // corr.WaitProbesNeeded as onWaits was last told
	waitsTold bool                 // onWaits was told of pid at all
	walls     []float64            // the latest steps' wall times, s
	stepTold  time.Duration        // the step time onStepTime was last told
}

// Step times for onStepTime: the median of the latest stepTimeWindow
// steps, once there are stepTimeMin, told when it has grown by more than a
// quarter since it was last told (a phase sized to it then holds whole
// steps; told on every step it would be noise).
const (
	stepTimeWindow = 8
	stepTimeMin    = 4
)

// noteStepTimes keeps p's latest steps' wall times and tells onStepTime
// of a grown median.
func (s *stepper) noteStepTimes(pid uint32, p *procSteps, steps []correlate.Step) {
	for _, st := range steps {
		if st.WallTime > 0 {
			p.walls = append(p.walls, st.WallTime)
		}
	}
	if n := len(p.walls); n > stepTimeWindow {
		p.walls = append(p.walls[:0], p.walls[n-stepTimeWindow:]...)
	}
	if len(p.walls) < stepTimeMin {
		return
	}
	sorted := slices.Sorted(slices.Values(p.walls))
	median := time.Duration(sorted[len(sorted)/2] * float64(time.Second))
	if median > p.stepTold+p.stepTold/4 {
		p.stepTold = median
		s.onStepTime(pid, median)
	}
}

func newStepper(f *profileFlags, live *report.Live) (*stepper, error) {
	cfg := f.correlateConfig()
	if _, err := correlate.New(cfg); err != nil {
		return nil, err
	}
	s := &stepper{cfg: cfg, procs: map[uint32]*procSteps{}, live: live}
	if f.jsonl != "" {
		var err error
		if s.jsonl, err = report.CreateJSONL(f.jsonl); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// proc returns pid's correlator, made on first use.
func (s *stepper) proc(pid uint32) *procSteps {
	p := s.procs[pid]
	if p == nil {
		corr, _ := correlate.New(s.cfg) // the config was checked in newStepper
		for i := range s.marks {
			corr.Add(&s.marks[i])
		}
		p = &procSteps{corr: corr}
		s.procs[pid] = p
		s.live.ShowPID = len(s.procs) > 1
	}
	return p
}

// pids are the processes seen, in order.
func (s *stepper) pids() []uint32 {
	out := make([]uint32, 0, len(s.procs))
	for pid := range s.procs {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// add takes one event.
func (s *stepper) add(e *events.Event) {
	switch e.Kind {
	case events.KindGPUSamples:
		// The job's GPUs, shared by its processes' correlators.
		if s.cfg.GPUs != nil {
			s.cfg.GPUs.Add(e.GPUs)
		}
		return
	case events.KindXid:
		if s.cfg.GPUs != nil {
			s.cfg.GPUs.AddXid(events.XidOf(e))
		}
		return
	case events.KindProcess:
		if e.Args[0] > 0 {
			if s.ranks == nil {
				s.ranks = map[uint32]int{}
			}
			s.ranks[e.PID] = int(e.Args[0] - 1)
		}
		return
	}
	if e.Kind == events.KindLaunchProbes && e.PID == 0 {
		// Launch probes switched for every process at once (traces
		// recorded before each process had its own launch sampling).
		s.marks = append(s.marks, *e)
		for _, pid := range s.pids() {
			s.emit(s.procs[pid].corr.Add(e))
		}
		return
	}
	p := s.proc(e.PID)
	steps := p.corr.Add(e)
	if a, ok := p.corr.Anchor(); ok && (a.TID != p.anchor.TID || a.Calls != p.anchor.Calls) {
		first := p.anchor.TID == 0
		p.anchor = a
		s.live.Note(fmt.Sprintf("PID %d: step boundary: %s on thread %d (%s)", a.PID, a.Calls, a.TID, a.Reason))
		if s.onAnchor != nil {
			s.onAnchor(first, a)
		}
	}
	if len(steps) > 0 && s.onStepTime != nil {
		s.noteStepTimes(e.PID, p, steps)
	}
	if len(steps) > 0 && s.onWaits != nil {
		need, ok := p.corr.WaitProbesNeeded()
		if ok && (!p.waitsTold || !need.Equal(p.waitNeeds)) {
			p.waitNeeds, p.waitsTold = need, true
			s.onWaits(e.PID, need)
		}
	}
	s.emit(steps)
}

// found reports whether any process's step boundary was found.
func (s *stepper) found() bool {
	for _, p := range s.procs {
		if p.anchor.TID != 0 {
			return true
		}
	}
	return false
}

// finish closes the last steps and the outputs.
func (s *stepper) finish() error {
	for _, pid := range s.pids() {
		s.emit(s.procs[pid].corr.Finish())
	}
	s.live.End()
	if s.jsonl != nil {
		s.err = errors.Join(s.err, s.jsonl.Close())
	}
	return s.err
}

func (s *stepper) emit(steps []correlate.Step) {
	for _, st := range steps {
		if r, ok := s.ranks[st.PID]; ok {
			st.Rank = &r
		}
		s.live.Step(st)
		if s.jsonl != nil && s.err == nil {
			s.err = s.jsonl.Write(st)
		}
	}
}

// writeJob prints the job view when several processes have steps, and
// the balance of work several threads share.
func (s *stepper) writeJob(w io.Writer) {
	var runs []correlate.ProcessRun
	for _, pid := range s.pids() {
		r, ranked := s.ranks[pid]
		runs = append(runs, correlate.ProcessRun{PID: pid, Run: s.proc(pid).corr.Summary(), Rank: r, Ranked: ranked})
	}
	if j, ok := correlate.DiagnoseJob(runs); ok {
		report.WriteJob(w, j)
	}
	report.WriteWorkers(w, correlate.Workers(runs))
}
