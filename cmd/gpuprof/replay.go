package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

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
	registerReplay(fs, &f)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("replay needs one trace file (made with attach --record)")
	}
	return replayTrace(fs.Arg(0), &f, true, stdout)
}

// reportCmd draws a recorded trace as the HTML report (and a timeline).
func reportCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", stderr)
	var f profileFlags
	registerReplay(fs, &f)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErr("report needs one trace file (made with attach --record): gpuprof report TRACE --html report.html")
	}
	if f.pictures.html == "" {
		return usageErr("report needs --html OUT, the page to write: gpuprof report %s --html report.html", fs.Arg(0))
	}
	return replayTrace(fs.Arg(0), &f, false, stdout)
}

// registerReplay registers the flags replay and report share.
func registerReplay(fs *pflag.FlagSet, f *profileFlags) {
	fs.StringVar(&f.jsonl, "jsonl", "", "write one JSON object per step to this file")
	fs.StringVar(&f.boundary, "step-boundary", "", "the CUDA call whose return ends a step (default: found)")
	fs.Uint32Var(&f.thread, "step-thread", 0, "the thread whose steps to report (default: found)")
	fs.IntVar(&f.batchSize, "batch-size", 0, "samples a step trains on, for train_capacity and thru")
	f.pyroscope.register(fs)
	f.pictures.register(fs)
}

// replayTrace cuts the trace at path into steps with f's outputs; text
// says whether to print the summaries.
func replayTrace(path string, f *profileFlags, text bool, stdout io.Writer) error {
	if _, err := f.pyroscope.config(nil); err != nil {
		return err
	}
	if err := f.pictures.check(); err != nil {
		return err
	}
	h, evs, unknown, err := events.ReadTrace(path)
	if err != nil {
		return err
	}
	f.noLaunches = h.NoLaunchCounts
	if f.user, f.roles, err = userProbes("", h.UserProbes); err != nil {
		return err
	}
	pics, err := openPictures(f.pictures, f.roles, nil)
	if err != nil {
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
	outs := &stepOutputs{live: report.NewLive(io.Discard, false), more: pics.outputs()}
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
	taps := pics.taps()
	for i := range evs {
		if rec != nil {
			rec.add(&evs[i])
			rec.tick(time.Now())
		}
		for _, t := range taps {
			t.Event(&evs[i])
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
	var runs []correlate.GPURun
	if gpus != nil {
		runs = gpus.Runs()
	}
	kernels := kernelCounts(recordedKernelCounts(evs), loop)
	info := runInfo{title: "trace " + path, source: fmt.Sprintf("replayed from %s (recorded by gpuprof %s)", path, h.Version),
		gpus: runs, kernels: kernels}
	if text {
		writeReplaySummaries(stdout, loop, path, h, len(evs), unknown, kernels)
		if gpus != nil {
			report.WriteGPUs(stdout, runs, nil, nil)
		}
	}
	return errors.Join(pics.close(loop, info, stdout))
}

// writeReplaySummaries prints each process's summary, the job's view and
// what was lost, as attach prints them at the end.
func writeReplaySummaries(stdout io.Writer, loop *control.Loop, path string, h events.TraceHeader, delivered, unknown int,
	kernels func(pid uint32) []report.Kernel) {
	for i, pid := range loop.PIDs() {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		sum := loop.Summary(pid)
		var span time.Duration
		if sum.LastNS > sum.FirstNS {
			span = time.Duration(sum.LastNS - sum.FirstNS)
		}
		target := fmt.Sprintf("PID %d in trace %s (gpuprof %s)", pid, path, h.Version)
		report.WriteSummary(stdout, report.Summary{Target: target, Attached: span.Seconds(), Run: sum, Kernels: kernels(pid)})
	}
	writeJob(stdout, loop.Runs())
	report.WriteLoss(stdout, report.Loss{Delivered: uint64(delivered), BadRecords: uint64(unknown)})
}
