package main

import (
	"errors"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/report"
)

// stepOutputs is where the control loop's steps and notes go: the live
// line, --jsonl, and more (the --metrics-addr exporter).
type stepOutputs struct {
	live  *report.Live
	jsonl *report.JSONL // nil: no --jsonl
	err   error         // --jsonl's first write error: nothing written after it
	more  []control.Output
}

// openJSONL starts writing steps to path too ("": not at all).
func (o *stepOutputs) openJSONL(path string) error {
	if path == "" {
		return nil
	}
	var err error
	o.jsonl, err = report.CreateJSONL(path)
	return err
}

func (o *stepOutputs) Step(st correlate.Step) {
	o.live.Step(st)
	if o.jsonl != nil && o.err == nil {
		o.err = o.jsonl.Write(st)
	}
	for _, m := range o.more {
		m.Step(st)
	}
}

func (o *stepOutputs) Note(msg string) {
	o.live.Note(msg)
	for _, m := range o.more {
		m.Note(msg)
	}
}

// Processes: the live line names each step's process once there are
// several.
func (o *stepOutputs) Processes(n int) {
	o.live.ShowPID = n > 1
	for _, m := range o.more {
		m.Processes(n)
	}
}

// close ends the live line and --jsonl, and says whether every step was
// written.
func (o *stepOutputs) close() error {
	o.live.End()
	if o.jsonl != nil {
		o.err = errors.Join(o.err, o.jsonl.Close())
	}
	return o.err
}
