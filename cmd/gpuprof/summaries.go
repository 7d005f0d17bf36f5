package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ianlancetaylor/demangle"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/probes"
	"github.com/gpuprof/gpuprof/report"
)

// noteAttached says on the live line what was attached to a library, or
// why a Python interpreter's waits are not timed.
func noteAttached(live *report.Live, lp probes.LibraryPlan) {
	if p := lp.Python; p != nil {
		if p.Err != nil {
			live.Note(fmt.Sprintf("PID %d: Python 3.%d in %s: not timing its waits: %v", lp.PID, p.Minor, lp.File.Path, p.Err))
		} else {
			live.Note(fmt.Sprintf("PID %d: timing Python lock waits (queue gets, events) in %s (Python 3.%d)", lp.PID, lp.File.Path, p.Minor))
		}
		return
	}
	if len(lp.Probes) == 0 || lp.Layer == cudaapi.LayerLoader {
		return
	}
	msg := fmt.Sprintf("PID %d: attached %d probes to %s (%s)", lp.PID, len(lp.Probes), lp.File.Path, lp.Layer)
	if n := len(lp.SingleStepped()); n > 0 {
		msg += fmt.Sprintf(", %d single-stepped: see gpuprof probes", n)
	}
	live.Note(msg)
}

// writeSummaries prints a summary for each process that made CUDA calls or
// Python waits, the job's view, and the session's loss counters.
func writeSummaries(w io.Writer, sess *probes.Session, loop *control.Loop, attached time.Duration, sampling string) {
	stats := sess.Stats()
	kl, _ := sess.KernelLaunches()
	kernels := kernelCounts(kl, loop)
	pids := loop.PIDs()
	if len(pids) == 0 {
		pids = []uint32{0}
	}
	for i, pid := range pids {
		if i > 0 {
			fmt.Fprintln(w)
		}
		target := fmt.Sprintf("PID %d", pid)
		if pid == 0 {
			target = "no process made a CUDA call"
		}
		for j, before := range loop.Before(pid) {
			// The programs it ran before an exec: their steps, apart.
			report.WriteSummary(w, report.Summary{Target: fmt.Sprintf("PID %d, program %d (before its exec)", pid, j+1),
				Attached: attached.Seconds(), Run: before, Engine: correlate.EngineProcess(before)})
			fmt.Fprintln(w)
		}
		run := loop.Summary(pid)
		s := report.Summary{Target: target, Attached: attached.Seconds(), Run: run, LaunchSampling: sampling,
			Engine: correlate.EngineProcess(run)}
		s.LearnSampling = loop.LearnSampling(pid)
		s.RecordSites, s.RecordsNarrowed = sess.Records().Sites(int(pid))
		s.Kernels = kernels(pid)
		report.WriteSummary(w, s)
	}
	writeJob(w, loop.Runs())
	report.WriteLoss(w, sessionLoss(stats, loop))
}

// sessionLoss is what the session lost on the way from the probes, and
// which of the loop's steps that touched.
func sessionLoss(stats probes.Stats, loop *control.Loop) report.Loss {
	l := report.Loss{Delivered: stats.Events, RingbufFull: stats.RingbufFull, BadRecords: stats.BadRecords,
		StaleCalls: stats.StaleCalls, KernelsFull: stats.KernelMapFull, ByKind: stats.LostByKind}
	wall, _ := monoToWall()
	for _, sp := range stats.LossSpans {
		l.Spans = append(l.Spans, report.LossSpan{From: wall(sp.Start), To: wall(sp.End), Events: sp.Events})
	}
	for _, pid := range loop.PIDs() {
		if s := loop.LossSteps(pid); s.N > 0 {
			l.Steps = append(l.Steps, report.LossSteps{PID: pid, First: s.First, Last: s.Last, N: s.N})
		}
	}
	return l
}

// kernelCounts names the launch counts per kernel (most launched first)
// by the loop's kernel names: a process's.
func kernelCounts(kl []probes.KernelLaunch, loop *control.Loop) func(pid uint32) []report.Kernel {
	return func(pid uint32) []report.Kernel {
		var out []report.Kernel
		for _, k := range kl {
			if k.PID != pid {
				continue
			}
			name, ok := loop.KernelName(k.PID, k.Handle)
			if ok {
				name = demangle.Filter(name, demangle.NoParams)
			} else {
				name = fmt.Sprintf("kernel %#x (no name: registered before attach, and its launch site named nothing)", k.Handle)
			}
			out = append(out, report.Kernel{Name: name, Count: k.Count, Named: ok})
		}
		return out
	}
}

// recordKernelCounts ends a recorded trace with the launch counts per
// kernel, which a replay has no BPF map to read.
func recordKernelCounts(trace *events.TraceWriter, kl []probes.KernelLaunch, at uint64) error {
	for _, k := range kl {
		e := events.Event{Kind: events.KindKernelCount, PID: k.PID, Start: at, End: at, Args: [5]uint64{k.Handle, k.Count}}
		if err := trace.Write(&e); err != nil {
			return err
		}
	}
	return nil
}

// recordedKernelCounts are a trace's launch counts per kernel, most
// launched first.
func recordedKernelCounts(evs []events.Event) []probes.KernelLaunch {
	var kl []probes.KernelLaunch
	for i := range evs {
		if e := &evs[i]; e.Kind == events.KindKernelCount {
			kl = append(kl, probes.KernelLaunch{PID: e.PID, Handle: e.Args[0], Count: e.Args[1]})
		}
	}
	slices.SortStableFunc(kl, func(a, b probes.KernelLaunch) int { return cmp.Compare(b.Count, a.Count) })
	return kl
}

// writeJob prints the job view when several processes have steps, and
// the balance of work several threads share.
func writeJob(w io.Writer, runs []correlate.ProcessRun) {
	if j, ok := correlate.DiagnoseJob(runs); ok {
		report.WriteJob(w, j)
	}
	report.WriteWorkers(w, correlate.Workers(runs))
}

// writeProbeStats prints how often each program ran (the probe hits the
// job paid for), and what those hits cost its threads at least: each
// run's own time and its trap's at the GPU host's costs (probes.
// EntryTrapCost, ReturnTrapCost). The sum a second is a cost beside the
// step rate's A/B that a host's noise does not move.
func writeProbeStats(w io.Writer, stats []probes.ProgramStat, attached time.Duration) {
	secs := attached.Seconds()
	fmt.Fprintln(w, "\nBPF programs (--probe-stats): runs, runs a second, mean run time (the trap into the kernel not included), cost a second with the trap")
	var all time.Duration
	for _, s := range stats {
		all += s.Cost()
		fmt.Fprintf(w, "  %-15s %10d %10.0f/s %8.0f ns %8.2f ms/s\n", s.Name, s.Runs, float64(s.Runs)/secs,
			float64(s.Runtime.Nanoseconds())/float64(s.Runs), float64(s.Cost().Nanoseconds())/1e6/secs)
	}
	fmt.Fprintf(w, "  in all: %.2f ms a second of the job's threads at least (%.0f ms over %v), at %v a uprobe's trap and %v more at a return (the GPU host's, FACTS.md §2; 5.5 µs where a first instruction is single-stepped)\n",
		float64(all.Nanoseconds())/1e6/secs, float64(all.Nanoseconds())/1e6, attached.Round(time.Millisecond), probes.EntryTrapCost, probes.ReturnTrapCost)
}

// writeWaitCounts prints the Python wait probes' hits by process, function
// and thread: which of a job's waits the probes trap, and how many were
// long enough to read frames (the costly part).
func writeWaitCounts(w io.Writer, waits []probes.WaitCount, attached time.Duration) {
	if len(waits) == 0 {
		return
	}
	fmt.Fprintln(w, "\nPython wait probes (--probe-stats): process, function, thread, hits a second, reported (frames read) a second")
	for _, c := range waits {
		thread := "others"
		if c.Main {
			thread = "main"
		}
		fmt.Fprintf(w, "  PID %-8d %-16s %-6s %10.0f/s %10.0f/s\n", c.PID, probes.WaitFunc(c.Cookie), thread,
			float64(c.Hits)/attached.Seconds(), float64(c.Reported)/attached.Seconds())
	}
}
