package htmlreport

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/report"
)

// Report is what the page says beside the collected series: the run's
// summaries, as the end-of-run text summary has them.
type Report struct {
	Title   string // what was profiled: "python3 train.py", "trace run.jsonl.gz"
	Source  string // how: "attached to PID 1234", "replayed from run.jsonl.gz"
	Version string // gpuprof's
	// Attached is how long gpuprof followed the job, in seconds (0: from
	// the steps).
	Attached  float64
	Processes []Process
	GPUs      []correlate.GPURun
	Loss      *report.Loss // nil: not known (a replay's losses are in the trace's own summary)
}

// Process is one process's run.
type Process struct {
	PID     uint32
	Rank    int
	Ranked  bool
	Run     correlate.Summary
	Kernels []report.Kernel // most launched first; none where not counted
	// Engine: its steps take nothing from the pool it shares: an
	// inference engine's iterations (correlate.EngineProcess).
	Engine bool
}

// WriteFile writes the page to path, whole or not at all: a failed or
// killed write leaves any page already there as it was, and no other file
// (createWhole).
func WriteFile(path string, r Report, c *Collector) error {
	f, err := createWhole(path)
	if err != nil {
		return fmt.Errorf("write the report %s: %w", path, err)
	}
	w := bufio.NewWriter(f)
	if err := errors.Join(Write(w, r, c), w.Flush()); err != nil {
		f.abandon()
		return fmt.Errorf("write the report %s: %w", path, err)
	}
	if err := f.commit(); err != nil {
		return fmt.Errorf("write the report %s: %w", path, err)
	}
	return nil
}

// Write renders the page.
func Write(w io.Writer, r Report, c *Collector) error {
	if c == nil {
		c = NewCollector()
	}
	v := build(r, c)
	return page.Execute(w, v)
}
