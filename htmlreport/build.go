package htmlreport

import (
	"cmp"
	"fmt"
	"html/template"
	"maps"
	"slices"
	"strings"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/report"
)

// view is what the template shows, every number already in words.
type view struct {
	Title, Source, Version string
	Span                   string
	Steps                  int
	Processes              int
	Headline               headline
	Charts                 []template.HTML
	GPUCharts              []template.HTML
	Ranks                  *rankView
	Engines                []engineRow
	GPUs                   []gpuRow
	Details                []procDetail
	Notes                  []string
	Loss                   string
}

type headline struct {
	Bottleneck string // the verdict
	Whose      string // "PID 1234", "the job's straggler, rank 1 (PID 1234)"
	ByHowMuch  string // the phase that dominates, as a share of the step
	StepsBound string // the steps' own bounds, by share
	Shares     template.HTML
	Evidence   []string
	Next       []string
	Straggler  string
	NoSteps    bool
}

type rankView struct {
	Chart template.HTML
	Rows  []rankRow
	Note  string
}

type rankRow struct {
	Rank, PID, GPUs, Steps, Rate, StepTime, Wait, Data, Compute, Sync, Own, SMActive, Bottleneck string
	Slowest                                                                                      bool
}

type engineRow struct{ Where, Iterations, Rate, Iteration, FullWait string }

type gpuRow struct {
	GPU, Name, Samples, Util, SMActive, Power, Memory, Temp, Clock, Throttled, PIDs string
}

type procDetail struct {
	Who     string
	Kernels []report.Kernel
	Unnamed string // the launches of kernels with no name, where any
	Waits   []waitRow
	User    []userRow
	Threads int
}

type waitRow struct{ Where, Kind, Count, Total, What string }
type userRow struct{ Role, Name, Calls, Total, Mean string }

// maxProcessCharts bounds the per-process step plots; the rest of a
// large job is in the ranks' table.
const maxProcessCharts = 8

// maxTableRows bounds the kernels and waits shown per process.
const maxTableRows = 10

func build(r Report, c *Collector) view {
	v := view{Title: r.Title, Source: r.Source, Version: r.Version, Notes: c.notes}
	span := r.Attached
	if c.lastNS > c.firstNS && span == 0 {
		span = float64(c.lastNS-c.firstNS) / 1e9
	}
	v.Span = report.Duration(span)
	runs := make([]correlate.ProcessRun, 0, len(r.Processes))
	byPID := map[uint32]*Process{}
	for i := range r.Processes {
		p := &r.Processes[i]
		byPID[p.PID] = p
		v.Steps += p.Run.Steps
		if p.Run.Steps > 0 {
			v.Processes++
		}
		runs = append(runs, correlate.ProcessRun{PID: p.PID, Run: p.Run, Rank: p.Rank, Ranked: p.Ranked})
	}
	job, isJob := correlate.DiagnoseJob(runs)
	focus := focusProcess(r.Processes, job, isJob)
	v.Headline = c.headline(focus, job, isJob)
	x1 := 1.0
	if o := c.origin(); c.lastNS > o {
		x1 = float64(c.lastNS-o) / 1e9
	}
	for _, p := range chartOrder(r.Processes, focus) {
		if len(v.Charts) >= 2*maxProcessCharts {
			break
		}
		ps := c.procs[p.PID]
		if ps == nil || ps.steps.items() == 0 {
			continue
		}
		v.Charts = append(v.Charts, c.processCharts(p, ps, x1)...)
	}
	v.GPUCharts = c.gpuCharts(x1)
	if isJob {
		v.Ranks = c.ranks(job, byPID)
		for _, e := range job.Engines {
			v.Engines = append(v.Engines, engineRow{Where: fmt.Sprintf("PID %d (a process)", e.PID), Iterations: fmt.Sprint(e.Steps),
				Rate: fmt.Sprintf("%.1f/s", e.StepsPerSec), Iteration: report.Duration(e.StepTime), FullWait: "-"})
		}
	}
	for _, p := range r.Processes {
		for _, e := range p.Run.Engines {
			v.Engines = append(v.Engines, engineRow{Where: fmt.Sprintf("PID %d thread %d", e.PID, e.TID), Iterations: fmt.Sprint(e.Iterations),
				Rate: rate(e.Busy.P50), Iteration: report.Duration(e.Busy.P50), FullWait: report.Duration(e.FullWait)})
		}
	}
	v.GPUs = gpuRows(r.GPUs)
	for _, p := range chartOrder(r.Processes, focus) {
		v.Details = append(v.Details, detail(p))
	}
	if r.Loss != nil {
		l := r.Loss
		v.Loss = fmt.Sprintf("%d events delivered, %d lost (ring buffer full %d, unreadable %d); %d calls whose return was not seen",
			l.Delivered, l.RingbufFull+l.BadRecords, l.RingbufFull, l.BadRecords, l.StaleCalls)
		var detail strings.Builder
		report.WriteLossDetail(&detail, *l)
		if detail.Len() > 0 {
			v.Loss += ". " + strings.Join(strings.Fields(detail.String()), " ")
		}
	}
	return v
}

func rate(iteration float64) string {
	if iteration <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f/s", 1/iteration)
}

// focusProcess is the process whose verdict the page leads with: the
// job's straggler, else the trainer with the most steps.
func focusProcess(ps []Process, job correlate.Job, isJob bool) *Process {
	var best *Process
	for i := range ps {
		p := &ps[i]
		if isJob && len(job.Processes) > 0 && p.PID == job.Slowest {
			return p
		}
		if p.Engine || p.Run.Steps == 0 {
			continue
		}
		if best == nil || p.Run.Steps > best.Run.Steps {
			best = p
		}
	}
	return best
}

// chartOrder is the focus first, then trainers by rank, then the rest.
func chartOrder(ps []Process, focus *Process) []*Process {
	out := make([]*Process, 0, len(ps))
	for i := range ps {
		out = append(out, &ps[i])
	}
	slices.SortStableFunc(out, func(a, b *Process) int {
		switch {
		case a == focus:
			return -1
		case b == focus:
			return 1
		case a.Engine != b.Engine:
			if a.Engine {
				return 1
			}
			return -1
		case a.Ranked && b.Ranked:
			return cmp.Compare(a.Rank, b.Rank)
		}
		return cmp.Compare(a.PID, b.PID)
	})
	return out
}

// who names a process.
func who(pid uint32, rank int, ranked bool) string {
	if ranked {
		return fmt.Sprintf("rank %d (PID %d)", rank, pid)
	}
	return fmt.Sprintf("PID %d", pid)
}

func detail(p *Process) procDetail {
	d := procDetail{Who: who(p.PID, p.Rank, p.Ranked), Threads: len(p.Run.Threads)}
	d.Kernels = p.Kernels[:min(len(p.Kernels), maxTableRows)]
	if unnamed, all := report.UnnamedLaunches(p.Kernels); unnamed > 0 {
		d.Unnamed = fmt.Sprintf("Kernels with no name: %d of %d counted launches (%.1f%%).", unnamed, all, 100*float64(unnamed)/float64(all))
	}
	for _, w := range p.Run.Waits[:min(len(p.Run.Waits), maxTableRows)] {
		d.Waits = append(d.Waits, waitRow{Where: fmt.Sprintf("thread %d", w.TID), Kind: w.Kind.String(), Count: fmt.Sprint(w.Count),
			Total: report.Duration(w.Seconds), What: w.What})
	}
	for _, u := range p.Run.User {
		mean := 0.0
		if u.Calls > 0 {
			mean = u.Seconds / float64(u.Calls)
		}
		d.User = append(d.User, userRow{Role: string(u.Role), Name: u.Name, Calls: fmt.Sprint(u.Calls),
			Total: report.Duration(u.Seconds), Mean: report.Duration(mean)})
	}
	return d
}

func gpuRows(runs []correlate.GPURun) []gpuRow {
	var out []gpuRow
	for _, g := range runs {
		stat := func(s correlate.Stat, f string, scale float64) string {
			if s.N == 0 {
				return "-"
			}
			return fmt.Sprintf(f, s.Mean*scale, s.Max*scale)
		}
		row := gpuRow{GPU: fmt.Sprint(g.GPU.Index), Name: g.GPU.Name, Samples: fmt.Sprint(g.Samples),
			Util: stat(g.Util, "%.0f%% (max %.0f%%)", 1), SMActive: stat(g.SMActive, "%.0f%% (max %.0f%%)", 100),
			Power: stat(g.PowerW, "%.0f W (max %.0f)", 1), Temp: stat(g.TempC, "%.0f°C (max %.0f)", 1),
			Clock: stat(g.SMClockMHz, "%.0f MHz (max %.0f)", 1)}
		if g.PowerLimitW > 0 {
			row.Power += fmt.Sprintf(" of %.0f", g.PowerLimitW)
		}
		if g.MemUsed.N > 0 {
			row.Memory = fmt.Sprintf("%s of %s", report.Bytes(g.MemUsed.Max), report.Bytes(g.MemTotal))
		} else {
			row.Memory = "-"
		}
		var th []string
		for _, name := range slices.Sorted(maps.Keys(g.Throttled)) {
			if n := g.Throttled[name]; n > 0 && g.Samples > 0 {
				th = append(th, fmt.Sprintf("%s %.0f%%", name, 100*float64(n)/float64(g.Samples)))
			}
		}
		row.Throttled = strings.Join(th, ", ")
		if row.Throttled == "" {
			row.Throttled = "-"
		}
		var pids []string
		for _, p := range g.PIDs {
			pids = append(pids, fmt.Sprint(p))
		}
		row.PIDs = strings.Join(pids, " ")
		out = append(out, row)
	}
	return out
}
