package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// Kernel is a launch count for a kernel, named where its name was seen.
type Kernel struct {
	Name  string
	Count uint64
	Named bool // its name was seen (its registration, or its launch's call site)
}

// Loss is what was lost between the probes and gpuprof.
type Loss struct {
	Delivered   uint64
	RingbufFull uint64
	BadRecords  uint64
	StaleCalls  uint64
	KernelsFull uint64
	// ByKind is RingbufFull by the kind of event lost, Spans when, and
	// Steps the steps that overlapped a loss, by process.
	ByKind map[events.Kind]uint64
	Spans  []LossSpan
	Steps  []LossSteps
}

// LossSpan is a span of wall time in which Events events were lost.
type LossSpan struct {
	From, To time.Time
	Events   uint64
}

// LossSteps are a process's steps that overlapped a loss: First to Last,
// N of them.
type LossSteps struct {
	PID            uint32
	First, Last, N int
}

// Summary is what WriteSummary prints.
type Summary struct {
	Target   string // "PID 1234 (python3)"
	Attached float64
	Run      correlate.Summary
	Kernels  []Kernel // most launched first
	// LaunchSampling says how launches were counted when not all were
	// ("launches counted 1 s in every 10 s once steps were found").
	LaunchSampling string
	// LearnSampling says how launches were counted while the process's
	// steps were learned, where not all were ("1s in every 32s, the
	// phases doubling each cycle; ~238000 launches a second").
	LearnSampling string
	// RecordsNarrowed: once its steps were found, the process's event
	// records were probed only at the RecordSites call sites whose events
	// it reads, not at their functions (probes/recordsites.go).
	RecordsNarrowed bool
	RecordSites     int
	// Engine says the process is an inference engine (its steps take
	// nothing from the pool it shares): its steps are iterations, and the
	// trainer's verdict is the one to read.
	Engine bool
}

// WriteSummary prints the end-of-run summary.
func WriteSummary(w io.Writer, s Summary) {
	r := s.Run
	fmt.Fprintf(w, "gpuprof: %s, attached %s, %d steps\n", s.Target, Duration(s.Attached), r.Steps)
	switch {
	case r.Boundary != nil:
		fmt.Fprintf(w, "step boundary: %s on thread %d (%s)\n", r.Boundary.Calls, r.Boundary.TID, r.Boundary.Reason)
	case len(r.Threads) == 0:
		// An engine, DataLoader worker or launcher process: no steps to
		// find, and no flag would change that.
		fmt.Fprintln(w, "step boundary: none: this process made no CUDA call")
	default:
		fmt.Fprintln(w, "step boundary: not found: no CUDA call repeated once a step on any thread; name one with --step-boundary")
	}
	if r.Steps > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "\tmedian\tp10\tp90\tmean\t")
		row := func(name string, d correlate.Dist, f func(float64) string) {
			if d.N == 0 {
				return
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", name, f(d.P50), f(d.P10), f(d.P90), f(d.Mean))
		}
		count := func(x float64) string { return fmt.Sprintf("%.0f", x) }
		bytes := func(x float64) string { return Bytes(x) }
		row("step_time", r.StepTime, Duration)
		if r.DispatchWait.N > 0 {
			row("wall_time", r.WallTime, Duration)
			row("dispatch_wait", r.DispatchWait, Duration)
		}
		row("data_time", r.DataTime, Duration)
		row("compute_time ("+computeLabel(r.ComputeSource)+")", r.ComputeTime, Duration)
		row("sync_time", r.SyncTime, Duration)
		perSec := func(x float64) string { return fmt.Sprintf("%.1f/s", x) }
		row("train_capacity", r.TrainCapacity, perSec)
		row("infer_capacity", r.InferCapacity, perSec)
		if r.Pool.N > 0 {
			row("pool ("+r.PoolKind+")", r.Pool, count)
		}
		row("samples/step", r.Samples, count)
		row("launches/step", r.Launches, count)
		row("graph launches/step", r.GraphLaunches, count)
		row("graph kernels/step", r.GraphKernels, count)
		row("h2d/step", r.H2DBytes, bytes)
		row("d2h/step", r.D2HBytes, bytes)
		pct := func(x float64) string { return fmt.Sprintf("%.0f%%", x) }
		frac := func(x float64) string { return fmt.Sprintf("%.2f", x) }
		row("gpu util (NVML)", r.GPU.Util, pct)
		row("sm_active (GPM)", r.GPU.SMActive, frac)
		row("tensor_active (GPM)", r.GPU.TensorActive, frac)
		row("gpu power", r.GPU.PowerW, func(x float64) string { return fmt.Sprintf("%.0fW", x) })
		row("sm clock", r.GPU.SMClockMHz, func(x float64) string { return fmt.Sprintf("%.0fMHz", x) })
		row("own sm util (NVML)", r.GPU.ProcSMUtil, pct)
		tw.Flush()
		if r.DataEstimated > 0 {
			fmt.Fprintf(w, "data_time: %d of %d steps estimated (data_source \"calibrated\"): their launches were not counted, "+
				"so each data phase ends where the latest counted step's did, by the same calls\n", r.DataEstimated, r.Steps)
		}
		writeGraphs(w, r)
		switch {
		case r.TrainCapacity.N > 0 || s.Engine:
		case r.LoaderBatches:
			fmt.Fprintln(w, "thru and train_capacity: not measured: the loop takes whole batches from a DataLoader, "+
				"of a size gpuprof does not read; pass --batch-size N, the samples a step trains on")
		default:
			fmt.Fprintln(w, "thru and train_capacity: not measured: no pool's takes were counted (its gets never blocked, "+
				"or it is not a Python queue); pass --batch-size N, the samples a step trains on")
		}
	}
	writeBounded(w, r.Dropped)
	table(w, "threads:", "pid\ttid\tlaunches\tcalls\tsyncs\tsync time\th2d\td2h\t", len(r.Threads), func(i int) string {
		t := r.Threads[i]
		return fmt.Sprintf("%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t", t.PID, t.TID, t.Launches+t.GraphLaunches,
			t.Calls, t.Syncs, Duration(t.SyncTime), Bytes(float64(t.H2DBytes)), Bytes(float64(t.D2HBytes)))
	})
	table(w, "probed functions (--probe):", "role\tcalls\tthreads\ttotal\tmean\t function", len(r.User), func(i int) string {
		u := r.User[i]
		mean := 0.0
		if u.Calls > 0 {
			mean = u.Seconds / float64(u.Calls)
		}
		return fmt.Sprintf("%s\t%d\t%d\t%s\t%s\t %s", u.Role, u.Calls, u.Threads, Duration(u.Seconds), Duration(mean), u.Name)
	})
	table(w, "inference engines (threads with a GPU loop of their own; an iteration less its waits on a full pool):",
		"pid\ttid\titerations\tmedian\tp90\tfull-pool wait\t iteration ends at", len(r.Engines), func(i int) string {
			e := r.Engines[i]
			return fmt.Sprintf("%d\t%d\t%d\t%s\t%s\t%s\t %s", e.PID, e.TID, e.Iterations, Duration(e.Busy.P50),
				Duration(e.Busy.P90), Duration(e.FullWait), e.Boundary)
		})
	table(w, "python waits:", "pid\ttid\tkind\twaits\ttotal\t in", len(r.Waits), func(i int) string {
		wt := r.Waits[i]
		return fmt.Sprintf("%d\t%d\t%s\t%d\t%s\t %s", wt.PID, wt.TID, wt.Kind, wt.Count, Duration(wt.Seconds), wt.What)
	})
	if s.LaunchSampling != "" && launched(r) {
		fmt.Fprintf(w, "launches counted %s: per-step launch figures are from those steps, kernel counts below are samples\n", s.LaunchSampling)
	}
	if s.LearnSampling != "" {
		fmt.Fprintf(w, "launches, Python waits and kernel lookups probed %s while its steps were learned: probing them all would have cost more than the learning budget (--learn-budget)\n", s.LearnSampling)
	}
	switch {
	case s.RecordsNarrowed && s.RecordSites == 0:
		fmt.Fprintln(w, "event records not probed once steps were found (none read): the calls above leave them out")
	case s.RecordsNarrowed:
		fmt.Fprintf(w, "event records probed at %d call site(s) once steps were found, those whose events the job reads: the calls above leave the others out\n", s.RecordSites)
	}
	if len(s.Kernels) > 0 {
		fmt.Fprintln(w, "most launched kernels:")
		for i, k := range s.Kernels {
			if i == 10 {
				break
			}
			fmt.Fprintf(w, "  %10d  %s\n", k.Count, k.Name)
		}
		if unnamed, all := UnnamedLaunches(s.Kernels); unnamed > 0 {
			fmt.Fprintf(w, "kernels with no name: %d of %d counted launches (%.1f%%)\n", unnamed, all, 100*float64(unnamed)/float64(all))
		}
	}
	if r.Steps > 0 && s.Engine {
		fmt.Fprintln(w, "role: an inference engine process: its steps are its iterations, and take nothing from the pool it shares (see the job view for I)")
	} else if r.Steps > 0 {
		v := correlate.Diagnose(r)
		fmt.Fprintf(w, "bottleneck: %s\n", v.Bottleneck)
		for _, e := range v.Evidence {
			fmt.Fprintf(w, "  because  %s\n", e)
		}
		for _, n := range v.Next {
			fmt.Fprintf(w, "  look at  %s\n", n)
		}
	}
}

// writeGraphs says what the graph rows leave out: the steps whose graph
// launches ran kernels of unknown number, and the launches that went into
// graphs rather than to the GPU.
func writeGraphs(w io.Writer, r correlate.Summary) {
	if r.GraphUnknown > 0 {
		fmt.Fprintf(w, "graph kernels: not known in %d of %d steps with graph launches: their graphs were captured "+
			"before attach or while launches were not counted\n", r.GraphUnknown, r.GraphLaunches.N)
	}
	if r.CapturedLaunches > 0 {
		fmt.Fprintf(w, "captured launches: %d, recorded into CUDA graphs (not run then: left out of launches/step)\n", r.CapturedLaunches)
	}
}

// UnnamedLaunches counts the launches of kernels with no name, of all.
func UnnamedLaunches(ks []Kernel) (unnamed, all uint64) {
	for _, k := range ks {
		all += k.Count
		if !k.Named {
			unnamed += k.Count
		}
	}
	return unnamed, all
}

// launched says whether any thread of the process launched kernels.
func launched(r correlate.Summary) bool {
	for _, t := range r.Threads {
		if t.Launches+t.GraphLaunches > 0 {
			return true
		}
	}
	return false
}

// WriteLoss prints what was lost on the way from the probes: once for
// the session, after every process's summary.
func WriteLoss(w io.Writer, l Loss) {
	fmt.Fprintf(w, "events: %d delivered, %d lost (ring buffer full %d, unreadable %d); %d calls whose return was not seen\n",
		l.Delivered, l.RingbufFull+l.BadRecords, l.RingbufFull, l.BadRecords, l.StaleCalls)
	if l.KernelsFull > 0 {
		fmt.Fprintf(w, "launches not counted per kernel (too many distinct kernels): %d\n", l.KernelsFull)
	}
	WriteLossDetail(w, l)
}

// lossKinds names the kinds of event the ring buffer can lose, in the
// order they are listed.
var lossKinds = []struct {
	kind events.Kind
	name string
}{{events.KindCall, "CUDA calls"}, {events.KindPyWait, "Python waits"}, {events.KindPyGIL, "GIL takes"},
	{events.KindWrite, "log writes"}, {events.KindKernelName, "kernel names"}, {events.KindKernelSite, "kernel call sites"},
	{events.KindLibLoad, "library loads"}}

// maxLossSpans is how many spans of loss the summary lists.
const maxLossSpans = 5

// WriteLossDetail says, where the ring buffer was full, what the loss
// affected: which kinds of event, when, and which steps (nothing where
// it never was).
func WriteLossDetail(w io.Writer, l Loss) {
	if l.RingbufFull == 0 {
		return
	}
	var kinds []string
	listed := uint64(0)
	for _, k := range lossKinds {
		if n := l.ByKind[k.kind]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k.name, n))
			listed += n
		}
	}
	if listed < l.RingbufFull {
		kinds = append(kinds, fmt.Sprintf("other %d", l.RingbufFull-listed))
	}
	fmt.Fprintf(w, "events lost: %d of %d (the ring buffer was full: gpuprof read too slowly): %s\n",
		l.RingbufFull, l.Delivered+l.RingbufFull+l.BadRecords, strings.Join(kinds, ", "))
	if len(l.Spans) > 0 {
		var spans []string
		for i, sp := range l.Spans {
			if i == maxLossSpans {
				spans = append(spans, fmt.Sprintf("and %d more", len(l.Spans)-i))
				break
			}
			spans = append(spans, fmt.Sprintf("%s-%s (%d)", sp.From.Format("15:04:05.000"), sp.To.Format("15:04:05.000"), sp.Events))
		}
		fmt.Fprintf(w, "  lost in: %s\n", strings.Join(spans, ", "))
	}
	if len(l.Steps) == 0 {
		fmt.Fprintln(w, "  no step overlapped a loss")
		return
	}
	var steps []string
	for _, s := range l.Steps {
		steps = append(steps, fmt.Sprintf("PID %d steps %d-%d (%d marked)", s.PID, s.First, s.Last, s.N))
	}
	fmt.Fprintf(w, "  steps overlapping a loss, their numbers incomplete (lost_events in --jsonl): %s\n", strings.Join(steps, "; "))
}

func computeLabel(src correlate.ComputeSource) string {
	switch src {
	case correlate.ComputeEvents:
		return "cuda events"
	case correlate.ComputeDerived:
		return "derived"
	}
	return "none"
}

// maxRows is how many rows a summary table shows.
const maxRows = 8

// table prints a titled, right-aligned table of n rows (at most maxRows,
// then a count of the rest); row(i) gives row i's tab-separated cells.
func table(w io.Writer, title, header string, n int, row func(i int) string) {
	if n == 0 {
		return
	}
	fmt.Fprintln(w, title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, header)
	for i := 0; i < n; i++ {
		if i == maxRows {
			fmt.Fprintf(tw, "... %d more\n", n-i)
			break
		}
		fmt.Fprintln(tw, row(i))
	}
	tw.Flush()
}

// writeBounded says what the process's correlator let go of to keep
// gpuprof's memory bounded, if anything.
func writeBounded(w io.Writer, d correlate.Dropped) {
	if !d.Any() {
		return
	}
	var parts []string
	if d.Buffer > 0 {
		parts = append(parts, fmt.Sprintf("%d events held while looking for the step boundary (the oldest)", d.Buffer))
	}
	if d.Window > 0 {
		parts = append(parts, fmt.Sprintf("%d events from the boundary's review window", d.Window))
	}
	if d.Handles > 0 {
		parts = append(parts, fmt.Sprintf("%d CUDA event and allocation handles", d.Handles))
	}
	if d.ThreadEvents > 0 {
		parts = append(parts, fmt.Sprintf("the own rows of threads past the first %d: their %d events are in tid 0's", 4096, d.ThreadEvents))
	}
	if d.StepValues > 0 {
		parts = append(parts, fmt.Sprintf("%d steps' values from the distributions (quantiles from a uniform sample of the steps; counts and means exact)", d.StepValues))
	}
	fmt.Fprintf(w, "memory bounded: let go of %s\n", strings.Join(parts, "; "))
}
