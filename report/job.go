package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// WriteJob prints the job view of several processes: each one's pace, the
// slowest and by how much, and its verdict.
func WriteJob(w io.Writer, j correlate.Job) {
	title := fmt.Sprintf("\ninference engine processes (their steps take nothing from the pool they share): %d, I = %.1f/s together, median iteration %s",
		len(j.Engines), j.InferCapacity, Duration(j.InferBatchTime))
	table(w, title, "pid\titerations\titerations/s\titeration\t", len(j.Engines), func(i int) string {
		e := j.Engines[i]
		return fmt.Sprintf("%d\t%d\t%.1f\t%s\t", e.PID, e.Steps, e.StepsPerSec, Duration(e.StepTime))
	})
	if len(j.Processes) < 2 {
		fmt.Fprintf(w, "job bottleneck (the trainer's, with the engines' I): %s\n", j.Verdict.Bottleneck)
		for _, e := range j.Verdict.Evidence {
			fmt.Fprintf(w, "  because  %s\n", e)
		}
		return
	}
	fmt.Fprintf(w, "\njob: %d processes with steps\n", len(j.Processes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\tpid\tgpus\tsteps\tsteps/s\tsamples/step\tstep_time\tdispatch_wait\tdata_time\tcompute_time\tsync_time\town\tsm_active\t bottleneck")
	var slowest correlate.ProcessPace
	for _, p := range j.Processes {
		if p.PID == j.Slowest {
			slowest = p
		}
		wait := "-"
		if p.WaitKnown {
			wait = Duration(p.DispatchWait)
		}
		samples := "-"
		if p.Samples > 0 {
			samples = fmt.Sprintf("%.0f", p.Samples)
		}
		sm := "-"
		if events.Has(p.SMActive) {
			sm = fmt.Sprintf("%.2f", p.SMActive)
		}
		gpus := "-"
		if len(p.GPUs) > 0 {
			gpus = intList(p.GPUs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t %s\n", rankText(p), p.PID, gpus, p.Steps, p.StepsPerSec,
			samples, Duration(p.StepTime), wait, Duration(p.DataTime), Duration(p.ComputeTime), Duration(p.SyncTime),
			Duration(p.Own), sm, p.Bottleneck)
	}
	tw.Flush()
	who := fmt.Sprintf("PID %d", j.Slowest)
	if slowest.Ranked {
		who = fmt.Sprintf("rank %d (PID %d)", slowest.Rank, j.Slowest)
	}
	switch {
	case j.Lockstep && j.Straggler():
		fmt.Fprintf(w, "lockstep: the processes step at one pace, waiting for each other in their syncs; straggler: %s, "+
			"%.0f%% more work of its own a step (step less sync) than the others' median\n", who, 100*j.Skew)
	case j.Lockstep:
		fmt.Fprintf(w, "lockstep: the processes step at one pace, waiting for each other in their syncs; no straggler: "+
			"the most work of its own a step (%s) is %.1f%% over the others' median, under %.0f%%\n", who, 100*j.Skew, 100*correlate.StragglerSkew)
	default:
		fmt.Fprintf(w, "slowest: %s, %.0f%% longer a step than the fastest\n", who, 100*j.Skew)
	}
	if j.Lockstep && !j.Straggler() {
		fmt.Fprintf(w, "job bottleneck (balanced ranks, the busiest's): %s\n", j.Verdict.Bottleneck)
		return
	}
	fmt.Fprintf(w, "job bottleneck (the straggler's: ranks that step together move at its pace): %s\n", j.Verdict.Bottleneck)
}

func rankText(p correlate.ProcessPace) string {
	if !p.Ranked {
		return "-"
	}
	return fmt.Sprint(p.Rank)
}

// WriteWorkers prints the balance of each kind of work several threads
// share (engines, --probe infer/data/fetch functions).
func WriteWorkers(w io.Writer, groups []correlate.WorkerGroup) {
	if len(groups) == 0 {
		return
	}
	fmt.Fprintln(w, "\nworkers (threads sharing one kind of work; the slowest against the median):")
	for _, g := range groups {
		title := fmt.Sprintf("  %s: %d threads, median %s a call; slowest PID %d thread %d, %s (%+.0f%%)", g.What,
			len(g.Workers), Duration(g.Median), g.Slowest.PID, g.Slowest.TID, Duration(g.Slowest.Mean), 100*g.Skew)
		table(w, title, "\tpid\ttid\tcalls\ta call\t", len(g.Workers), func(i int) string {
			x := g.Workers[i]
			return fmt.Sprintf("\t%d\t%d\t%d\t%s\t", x.PID, x.TID, x.Calls, Duration(x.Mean))
		})
	}
}
