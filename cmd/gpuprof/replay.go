package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/report"
)

// replayCmd cuts a recorded trace into steps, offline, exactly as attach
// would have.
func replayCmd(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("replay", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var f profileFlags
	fs.StringVar(&f.jsonl, "jsonl", "", "write one JSON object per step to this file")
	fs.StringVar(&f.boundary, "step-boundary", "", "the CUDA call whose return ends a step (default: found)")
	fs.Uint32Var(&f.thread, "step-thread", 0, "the thread whose steps to report (default: found)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return usageErr("%v", err)
	}
	if fs.NArg() != 1 {
		return usageErr("replay needs one trace file (made with attach --record)")
	}
	h, evs, unknown, err := events.ReadTrace(fs.Arg(0))
	if err != nil {
		return err
	}
	f.noLaunches = h.NoLaunchCounts
	corr, err := correlate.New(f.correlateConfig())
	if err != nil {
		return err
	}
	var jsonl *report.JSONL
	if f.jsonl != "" {
		if jsonl, err = report.CreateJSONL(f.jsonl); err != nil {
			return err
		}
		defer jsonl.Close()
	}
	var steps []correlate.Step
	for i := range evs {
		steps = append(steps, corr.Add(&evs[i])...)
	}
	steps = append(steps, corr.Finish()...)
	for _, s := range steps {
		if jsonl != nil {
			if err := jsonl.Write(s); err != nil {
				return err
			}
		}
	}
	sum := corr.Summary()
	var span time.Duration
	if sum.LastNS > sum.FirstNS {
		span = time.Duration(sum.LastNS - sum.FirstNS)
	}
	target := fmt.Sprintf("trace %s (PIDs %v, gpuprof %s)", fs.Arg(0), h.PIDs, h.Version)
	report.WriteSummary(stdout, report.Summary{Target: target, Attached: span.Seconds(), Run: sum,
		Loss: report.Loss{Delivered: uint64(len(evs)), BadRecords: uint64(unknown)}})
	return nil
}
