package main

import (
	"fmt"
	"io"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/report"
)

// replayCmd cuts a recorded trace into steps, offline, exactly as attach
// would have.
func replayCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", stderr)
	var f profileFlags
	fs.StringVar(&f.jsonl, "jsonl", "", "write one JSON object per step to this file")
	fs.StringVar(&f.boundary, "step-boundary", "", "the CUDA call whose return ends a step (default: found)")
	fs.Uint32Var(&f.thread, "step-thread", 0, "the thread whose steps to report (default: found)")
	fs.IntVar(&f.batchSize, "batch-size", 0, "samples a step trains on, for train_capacity and thru")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("replay needs one trace file (made with attach --record)")
	}
	h, evs, unknown, err := events.ReadTrace(fs.Arg(0))
	if err != nil {
		return err
	}
	f.noLaunches = h.NoLaunchCounts
	if f.user, f.roles, err = userProbes("", h.UserProbes); err != nil {
		return err
	}
	st, err := newStepper(&f, report.NewLive(io.Discard, false))
	if err != nil {
		return err
	}
	var gpus *correlate.GPUs
	if len(h.GPUs) > 0 {
		gpus = correlate.NewGPUs(h.GPUs, time.Duration(h.NVMLIntervalNS))
		st.cfg.GPUs = gpus
	}
	for i := range evs {
		st.add(&evs[i])
	}
	if err := st.finish(); err != nil {
		return err
	}
	for i, pid := range st.pids() {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		sum := st.proc(pid).corr.Summary()
		var span time.Duration
		if sum.LastNS > sum.FirstNS {
			span = time.Duration(sum.LastNS - sum.FirstNS)
		}
		target := fmt.Sprintf("PID %d in trace %s (gpuprof %s)", pid, fs.Arg(0), h.Version)
		report.WriteSummary(stdout, report.Summary{Target: target, Attached: span.Seconds(), Run: sum})
	}
	st.writeJob(stdout)
	report.WriteLoss(stdout, report.Loss{Delivered: uint64(len(evs)), BadRecords: uint64(unknown)})
	if gpus != nil {
		runs := gpus.Runs()
		report.WriteGPUs(stdout, runs, nil, nil)
	}
	return nil
}
