package topview

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/report"
)

// Render lays the screen out for width columns and height rows: at most
// height lines of at most width runes each. A narrow terminal drops the
// tables' least telling columns, a short one whole sections (notes, the
// process and GPU tables, the details of the verdict) before the
// bottleneck, the phase bars and the last steps.
func (m *Model) Render(width, height int) []Line {
	return layout(m.snapshot().blocks(width), width, height)
}

// The keep ranks of the screen's parts (lower: kept longer).
const (
	keepHeader = iota
	keepBottleneck
	keepBars
	keepSteps
	keepBecause
	keepBounds
	keepPhaseTimes
	keepProcesses
	keepGPUs
	keepLegend
	keepNotes
	keepEvidence
)

// lastSteps is how many of the latest steps the steps table shows, at
// least minSteps of them before the process and GPU tables are.
const (
	lastSteps = 10
	minSteps  = 3
)

// shownNotes is how many of the latest notes are shown, where there is room.
const shownNotes = 3

func (s snapshot) blocks(width int) []block {
	bs := []block{{head: []Line{{Text: s.header(width), Kind: Header}}, keep: keepHeader}}
	ps := make([]procStats, len(s.procs))
	for i, p := range s.procs {
		ps[i] = statsOf(p)
	}
	notesKeep := keepNotes
	if len(ps) == 0 {
		bs = append(bs, block{head: []Line{{Text: "no steps yet: the step boundary is found from the CUDA calls' repeating pattern"}},
			keep: keepSteps, sep: true})
		notesKeep = keepBars // what gpuprof waits for is in them
	} else {
		bs = append(bs, verdictBlocks(windowVerdict(ps))...)
		bs = append(bs, phaseBlocks(ps, width)...)
		bs = append(bs, stepsBlock(ps, width))
		if len(ps) > 1 {
			bs = append(bs, processBlock(ps, width))
		}
	}
	if g := s.gpuBlock(width); g != nil {
		bs = append(bs, *g)
	}
	if len(s.notes) > 0 {
		b := block{keep: notesKeep, min: 1, sep: true}
		for _, n := range s.notes[max(0, len(s.notes)-shownNotes):] {
			b.body = append(b.body, Line{Text: "note: " + n})
		}
		bs = append(bs, b)
	}
	return bs
}

// header is the top line; the quit key at its right end, where it fits.
func (s snapshot) header(width int) string {
	var b strings.Builder
	b.WriteString("gpuprof top")
	pids := s.targets
	if len(pids) == 0 {
		for _, p := range s.procs {
			pids = append(pids, int(p.pid))
		}
	}
	if len(pids) > 0 {
		b.WriteString("  " + pidList(pids))
	}
	fmt.Fprintf(&b, "  attached %v  %d steps", s.attached.Truncate(time.Second), s.steps)
	if s.nprocs > 1 {
		fmt.Fprintf(&b, "  %d processes", s.nprocs)
	}
	if s.lost > 0 {
		fmt.Fprintf(&b, "  %d events lost", s.lost)
	}
	const keys = "q quits"
	if n := utf8.RuneCountInString(b.String()); n+2+len(keys) <= width {
		b.WriteString(strings.Repeat(" ", width-n-len(keys)) + keys)
	}
	return b.String()
}

// pidList names processes, the first four of them.
func pidList(pids []int) string { return report.PIDList(pids, 4) }

func verdictBlocks(v verdict) []block {
	line := "bottleneck: " + v.Bottleneck
	if v.whose != "" {
		line += " (" + v.whose + ")"
	}
	bs := []block{{head: []Line{{Text: line, Kind: Alert}}, keep: keepBottleneck, sep: true}}
	if len(v.Evidence) > 0 {
		bs = append(bs, block{head: []Line{{Text: "  because  " + v.Evidence[0]}}, keep: keepBecause})
	}
	if len(v.Evidence) > 1 {
		bs = append(bs, block{head: []Line{{Text: "           " + v.Evidence[1]}}, keep: keepEvidence})
	}
	if v.steps > 0 {
		parts := make([]string, len(v.bounds))
		for i, b := range v.bounds {
			parts[i] = fmt.Sprintf("%s %.0f%%", b.bound, 100*b.share)
		}
		bs = append(bs, block{head: []Line{{Text: fmt.Sprintf("  over the last %d steps, each step bound by: %s",
			v.steps, strings.Join(parts, ", "))}}, keep: keepBounds})
	}
	return bs
}

// stepsBlock is the latest steps of all processes, newest last.
func stepsBlock(ps []procStats, width int) block {
	var all []correlate.Step
	name := map[uint32]string{}
	for _, p := range ps {
		all = append(all, p.steps[max(0, len(p.steps)-lastSteps):]...)
		name[p.pid] = p.name()
	}
	sortByEnd(all)
	all = all[max(0, len(all)-lastSteps):]
	procKeep := 9 // one process: the header names it
	if len(ps) > 1 {
		procKeep = 1
	}
	t := table{cols: []column{
		{name: "step", keep: 0}, {name: "proc", keep: procKeep, left: true}, {name: "wall", keep: 1}, {name: "step_time", keep: 2},
		{name: "dispatch_wait", keep: 7}, {name: "data", keep: 4}, {name: "compute", keep: 5}, {name: "sync", keep: 6},
		{name: "launches", keep: 8}, {name: "pool", keep: 10}, {name: "bound", keep: 3, left: true},
	}}
	for _, s := range all {
		t.rows = append(t.rows, []string{fmt.Sprint(s.Index), name[s.PID], report.Duration(s.WallTime), report.Duration(s.StepTime),
			dispatchText(s), dataText(s), computeText(s), report.Duration(s.SyncTime), launchesText(s), poolText(s),
			string(correlate.StepBound(s))})
	}
	lines := t.lines(width)
	b := block{head: []Line{{Text: "LAST STEPS (newest last)", Kind: Title}, {Text: lines[0], Kind: Columns}},
		min: minSteps, keep: keepSteps, sep: true}
	for _, l := range lines[1:] {
		b.body = append(b.body, Line{Text: l})
	}
	return b
}

func dispatchText(s correlate.Step) string {
	if !s.WaitsObserved {
		return "-"
	}
	return report.Duration(s.DispatchWait)
}

func dataText(s correlate.Step) string {
	if !s.DataMeasured {
		return "-"
	}
	if s.DataSource == correlate.DataCalibrated {
		return "~" + report.Duration(s.DataTime) // estimated, as on the live line
	}
	return report.Duration(s.DataTime)
}

func computeText(s correlate.Step) string {
	if s.ComputeSource == correlate.ComputeNone {
		return "-"
	}
	return report.Duration(s.ComputeTime)
}

// launchesText is the kernels the step ran: its launches and its graphs'
// kernels where known, else its graph launches marked "g" (each ran
// kernels of a graph captured before attach: how many is not known).
func launchesText(s correlate.Step) string {
	switch {
	case !s.LaunchesCounted:
		return "-"
	case s.GraphKernelsKnown || s.GraphLaunches == 0:
		return fmt.Sprint(s.Launches + s.GraphKernels)
	case s.Launches == 0:
		return fmt.Sprintf("%dg", s.GraphLaunches)
	}
	return fmt.Sprintf("%d+%dg", s.Launches, s.GraphLaunches)
}

func poolText(s correlate.Step) string {
	if !s.PoolMeasured {
		return "-"
	}
	return fmt.Sprint(s.Pool)
}

// processBlock is each process over the window.
func processBlock(ps []procStats, width int) block {
	t := table{cols: []column{
		{name: "proc", keep: 0, left: true}, {name: "pid", keep: 8}, {name: "steps", keep: 6}, {name: "steps/s", keep: 1},
		{name: "step_time", keep: 2}, {name: "dispatch_wait", keep: 7}, {name: "data", keep: 4}, {name: "compute", keep: 5},
		{name: "sync", keep: 9}, {name: "bottleneck", keep: 3, left: true},
	}}
	for _, p := range ps {
		s := p.sum
		rate := "-"
		if p.rate > 0 {
			rate = fmt.Sprintf("%.1f", p.rate)
		}
		t.rows = append(t.rows, []string{p.name(), fmt.Sprint(p.pid), fmt.Sprint(s.Steps), rate, median(s.StepTime),
			median(s.DispatchWait), median(s.DataTime), median(s.ComputeTime), median(s.SyncTime), p.verdict.Bottleneck})
	}
	lines := t.lines(width)
	b := block{head: []Line{{Text: "PROCESSES (medians over the window)", Kind: Title}, {Text: lines[0], Kind: Columns}},
		keep: keepProcesses, sep: true}
	for _, l := range lines[1:] {
		b.head = append(b.head, Line{Text: l})
	}
	return b
}

// median is a distribution's median, "-" where nothing was measured.
func median(d correlate.Dist) string {
	if d.N == 0 {
		return "-"
	}
	return report.Duration(d.P50)
}
