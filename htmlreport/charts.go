package htmlreport

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/report"
)

// processCharts are a process's plots over time: its step breakdown
// (phases stacked, summing to the wall time), the share of its steps by
// bound, its capacities and throughput, and its pool.
func (c *Collector) processCharts(p *Process, ps *procSeries, x1 float64) []template.HTML {
	s := &ps.steps
	whom := who(p.PID, p.Rank, p.Ranked)
	if p.Engine {
		whom += ", an inference engine: its steps are iterations"
	}
	id := fmt.Sprintf("pid%d", p.PID)
	var out []template.HTML

	fields := make([]int, 0, len(phaseFields))
	names := make([]string, 0, len(phaseFields))
	colors := make([]string, 0, len(phaseFields))
	for _, pf := range phaseFields {
		fields, names, colors = append(fields, pf.field), append(names, pf.label), append(colors, phaseColor[pf.field])
	}
	walls := make([]float64, 0, len(s.bins))
	for i := range s.bins {
		if v, ok := s.bins[i].Mean(fWall); ok {
			walls = append(walls, v*1e3)
		}
	}
	top, cut := robustTop(walls)
	ch := newChart("Step breakdown over time — "+whom, 0, x1, top, "ms", c.origin(), chartH)
	ch.sub = fmt.Sprintf("where each step's wall time went, ms a step; %d steps%s", s.items(), binNote(s))
	if cut {
		ch.sub += fmt.Sprintf("; columns over %s are cut at the top (the pointer reads their values)", valueText(ch.ymax, "ms"))
	}
	ch.stack(p.PID, s, fields, names, colors, 1e3)
	out = append(out, template.HTML(ch.svg("breakdown-"+id)))
	if p.Engine {
		return out // an engine's iterations are no training steps to bound
	}

	fields, names, colors = fields[:0], names[:0], colors[:0]
	for _, bf := range boundFields {
		fields, names, colors = append(fields, bf.field), append(names, bf.label), append(colors, boundColor[bf.field])
	}
	ch = newChart("Steps by bound — "+whom, 0, x1, 100, "%", c.origin(), 110)
	ch.sub = "each step's own bound (the rest: not measured)"
	ch.stack(p.PID, s, fields, names, colors, 100)
	out = append(out, template.HTML(ch.svg("bound-"+id)))

	if lines := []lineSpec{{fInferCap, "infer_capacity", "I: inference capacity"}, {fTrainCap, "train_capacity", "T: training capacity"},
		{fThru, "thru", "thru: samples trained"}}; hasAny(s, lines) {
		ch = newChart("Capacity and throughput — "+whom, 0, x1, maxMean(s, lines), "/s", c.origin(), chartH)
		ch.sub = "samples a second: I against T, and what training did"
		c.lines(ch, p.PID, s, lines, 1)
		out = append(out, template.HTML(ch.svg("capacity-"+id)))
	}
	if lines := []lineSpec{{fPool, "pool", "pool: items at the step's end"}, {fSamples, "samples", "samples taken a step"}}; hasAny(s, lines) {
		ch = newChart("Sample pool — "+whom, 0, x1, maxMean(s, lines), "", c.origin(), 150)
		ch.sub = "the pool's length at each step's end"
		if p.Run.PoolKind != "" {
			ch.sub += " (" + p.Run.PoolKind + ")"
		}
		c.lines(ch, p.PID, s, lines, 1)
		out = append(out, template.HTML(ch.svg("pool-"+id)))
	}
	return out
}

type lineSpec struct {
	field       int
	name, label string
}

func hasAny(s *series, lines []lineSpec) bool {
	for _, l := range lines {
		if _, n := s.total(l.field); n > 0 {
			return true
		}
	}
	return false
}

// maxMean is the top of a plot of lines: their largest bin mean, or
// below a few outliers (robustTop).
func maxMean(s *series, lines []lineSpec) float64 {
	var vs []float64
	for i := range s.bins {
		for _, l := range lines {
			if v, ok := s.bins[i].Mean(l.field); ok {
				vs = append(vs, v)
			}
		}
	}
	top, _ := robustTop(vs)
	return top
}

// robustTop is the top of a value axis for vs: their largest, unless a
// few (the 2% above the 98th percentile: a first step that compiled,
// warmed up or loaded a model) would squash the rest, then a little above
// the 98th percentile; cut says so.
func robustTop(vs []float64) (top float64, cut bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	high, p98 := s[len(s)-1], s[int(0.98*float64(len(s)-1))]
	if high <= 1.5*p98 || p98 <= 0 {
		return high, false
	}
	return 1.25 * p98, true
}

func (c *Collector) lines(ch *chart, pid uint32, s *series, lines []lineSpec, scale float64) {
	for i, l := range lines {
		if _, n := s.total(l.field); n == 0 {
			continue
		}
		st := seriesStyles[i%len(seriesStyles)]
		ch.line(pid, s, l.field, l.name, l.label, st.color, st.dash, scale)
	}
}

// binNote says how many steps a mark stands for, once a run has more
// steps than columns.
func binNote(s *series) string {
	if s.width <= 1 {
		return ", one column a step"
	}
	return fmt.Sprintf(", a column the mean of %d steps", s.width)
}

// gpuCharts are the GPUs' state over time (NVML): utilisation, SM
// activity, power; a line a GPU.
func (c *Collector) gpuCharts(x1 float64) []template.HTML {
	if len(c.gpuIDs) == 0 {
		return nil
	}
	var out []template.HTML
	for _, m := range []struct {
		field       int
		name, title string
		unit, sub   string
		fixedMax    float64
	}{
		{gUtil, "gpu_util", "GPU utilisation", "%", "the share of each sample period a kernel ran (NVML, nvidia-smi's utilization.gpu)", 100},
		{gSMActive, "sm_active", "SM activity", "%", "the share of SMs with a warp resident (GPM; DCGM's SM activity): what utilisation does not show", 100},
		{gPower, "power", "Power", "W", "board power draw", 0},
	} {
		top := m.fixedMax
		any := false
		for _, g := range c.gpuIDs {
			s := c.gpus[g]
			if _, n := s.total(m.field); n > 0 {
				any = true
			}
			if m.fixedMax == 0 {
				for i := range s.bins {
					if v, ok := s.bins[i].Mean(m.field); ok {
						top = math.Max(top, v)
					}
				}
			}
		}
		if !any {
			continue
		}
		ch := newChart(m.title, 0, x1, top, m.unit, c.origin(), 170)
		ch.sub = m.sub
		for i, g := range c.gpuIDs {
			st := seriesStyles[i%len(seriesStyles)]
			ch.line(uint32(g), c.gpus[g], m.field, m.name, fmt.Sprintf("GPU %d", g), st.color, st.dash, 1)
		}
		out = append(out, template.HTML(ch.svg("gpu-"+m.name)))
	}
	return out
}

// ranks compares the trainers of a job: a bar a process of its mean phases
// a step, and the pace table of the job view.
func (c *Collector) ranks(job correlate.Job, byPID map[uint32]*Process) *rankView {
	if len(job.Processes) < 2 {
		return nil
	}
	rv := &rankView{}
	const rowH, labelW, w = 26.0, 190.0, 1000.0
	top := 0.0
	for _, p := range job.Processes {
		if ps := c.procs[p.PID]; ps != nil {
			if s, n := ps.steps.total(fWall); n > 0 {
				top = math.Max(top, s/float64(n))
			}
		}
	}
	top = niceCeil(top * 1e3)
	h := rowH*float64(len(job.Processes)) + 24
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="plot ranks" viewBox="0 0 %.0f %.0f" role="img" aria-label="mean phases a step by process" data-unit="ms" data-scale="1000">`, w, h)
	for i, p := range job.Processes {
		y := float64(i) * rowH
		fmt.Fprintf(&b, `<text class="tick" x="%.0f" y="%.1f" text-anchor="end">%s</text>`, labelW-8, y+rowH/2+4, who(p.PID, p.Rank, p.Ranked))
		ps := c.procs[p.PID]
		if ps == nil {
			continue
		}
		_, n := ps.steps.total(fWall)
		if n == 0 {
			continue
		}
		x := labelW
		for _, pf := range phaseFields {
			s, _ := ps.steps.total(pf.field)
			mean := s / float64(n)
			width := mean * 1e3 / top * (w - labelW - 16)
			fmt.Fprintf(&b, `<rect class="seg" x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s" data-pid="%d" data-first="all" data-n="%d" data-field="%s" data-mean="%.9g"/>`,
				x, y+3, width, rowH-6, phaseColor[pf.field], p.PID, n, pf.label, mean)
			x += width
		}
	}
	y := rowH * float64(len(job.Processes))
	for _, t := range ticks(0, top, 5) {
		x := labelW + t/top*(w-labelW-16)
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, y+16, valueText(t, "ms"))
	}
	b.WriteString(`</svg>`)
	rv.Chart = template.HTML(b.String())
	for _, p := range job.Processes {
		row := rankRow{Rank: "-", PID: fmt.Sprint(p.PID), GPUs: "-", Steps: fmt.Sprint(p.Steps), Rate: fmt.Sprintf("%.1f/s", p.StepsPerSec),
			StepTime: report.Duration(p.StepTime), Wait: "-", Data: report.Duration(p.DataTime), Compute: report.Duration(p.ComputeTime),
			Sync: report.Duration(p.SyncTime), Own: report.Duration(p.Own), SMActive: "-", Bottleneck: p.Bottleneck, Slowest: p.PID == job.Slowest}
		if p.Ranked {
			row.Rank = fmt.Sprint(p.Rank)
		}
		if p.WaitKnown {
			row.Wait = report.Duration(p.DispatchWait)
		}
		if len(p.GPUs) > 0 {
			row.GPUs = strings.Trim(fmt.Sprint(p.GPUs), "[]")
		}
		if events.Has(p.SMActive) {
			row.SMActive = fmt.Sprintf("%.0f%%", 100*p.SMActive)
		}
		rv.Rows = append(rv.Rows, row)
	}
	if job.Lockstep {
		rv.Note = "The ranks step at one pace (lockstep): each waits for the slowest in its collectives, so the straggler is the rank with the most work of its own a step (own: step time less syncs)."
	}
	return rv
}
