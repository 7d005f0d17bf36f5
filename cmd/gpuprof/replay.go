package main

import (
	"fmt"
	"io"
	"time"

	"github.com/gpuprof/gpuprof/control"
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
	f.pyroscope.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if _, err := f.pyroscope.config(nil); err != nil {
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
	var gpus *correlate.GPUs
	if len(h.GPUs) > 0 {
		gpus = correlate.NewGPUs(h.GPUs, time.Duration(h.NVMLIntervalNS))
	}
	// The policy as attach's; with no probes to steer, only steps are cut.
	cfg := control.DefaultConfig()
	cfg.Correlate = f.correlateConfig()
	cfg.Correlate.GPUs = gpus
	outs := &stepOutputs{live: report.NewLive(io.Discard, false)}
	loop, err := control.New(cfg, nil, outs)
	if err != nil {
		return err
	}
	if err := outs.openJSONL(f.jsonl); err != nil {
		return err
	}
	rec, err := replayProfiles(&f.pyroscope, loop, h, evs)
	if err != nil {
		return err
	}
	if rec != nil {
		outs.more = append(outs.more, rec)
	}
	for i := range evs {
		if rec != nil {
			rec.add(&evs[i])
			rec.tick(time.Now())
		}
		loop.Add(&evs[i])
	}
	loop.Finish()
	if err := outs.close(); err != nil {
		return err
	}
	if rec != nil {
		if err := rec.close(); err != nil {
			return err
		}
		defer rec.writeSummary(stdout)
	}
	for i, pid := range loop.PIDs() {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		sum := loop.Summary(pid)
		var span time.Duration
		if sum.LastNS > sum.FirstNS {
			span = time.Duration(sum.LastNS - sum.FirstNS)
		}
		target := fmt.Sprintf("PID %d in trace %s (gpuprof %s)", pid, fs.Arg(0), h.Version)
		report.WriteSummary(stdout, report.Summary{Target: target, Attached: span.Seconds(), Run: sum})
	}
	writeJob(stdout, loop.Runs())
	report.WriteLoss(stdout, report.Loss{Delivered: uint64(len(evs)), BadRecords: uint64(unknown)})
	if gpus != nil {
		runs := gpus.Runs()
		report.WriteGPUs(stdout, runs, nil, nil)
	}
	return nil
}
