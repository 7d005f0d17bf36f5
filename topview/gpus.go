package topview

import (
	"fmt"
	"strings"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/report"
)

// gpuBlock is each GPU's latest sample (NVML); nil before the first.
// A field NVML does not give (GPM's SM activity before Hopper, or in its
// first round) shows as "-", never as zero.
func (s snapshot) gpuBlock(width int) *block {
	if len(s.gpus) == 0 {
		return nil
	}
	t := table{cols: []column{
		{name: "gpu", keep: 0}, {name: "name", keep: 9, left: true}, {name: "util", keep: 1}, {name: "sm_active", keep: 5},
		{name: "power/limit", keep: 3}, {name: "memory used/total", keep: 2}, {name: "temp", keep: 6},
		{name: "sm_clock", keep: 7}, {name: "throttled by", keep: 4, left: true},
	}}
	for _, r := range s.gpus {
		g := r.sample
		name := r.name
		if name == "" {
			name = "-"
		}
		t.rows = append(t.rows, []string{fmt.Sprint(g.GPU), name, number(g.GPUUtil, "%.0f%%"), number(g.SMActive, "%.2f"),
			pair(g.PowerW, g.PowerLimitW, func(w float64) string { return fmt.Sprintf("%.0f", w) }, " W"),
			pair(g.MemUsed, g.MemTotal, report.Bytes, ""), number(g.TempC, "%.0fC"), number(g.SMClockMHz, "%.0f MHz"),
			throttleText(g)})
	}
	lines := t.lines(width)
	b := block{head: []Line{{Text: "GPUS (NVML, latest sample)", Kind: Title}, {Text: lines[0], Kind: Columns}},
		keep: keepGPUs, sep: true}
	for _, l := range lines[1:] {
		b.head = append(b.head, Line{Text: l})
	}
	return &b
}

// number formats a GPU reading, "-" where it was not read.
func number(v float64, format string) string {
	if !events.Has(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// pair is "used/total" with a unit, each side "-" where not read.
func pair(a, b float64, f func(float64) string, unit string) string {
	side := func(v float64) string {
		if !events.Has(v) {
			return "-"
		}
		return f(v)
	}
	if !events.Has(a) && !events.Has(b) {
		return "-"
	}
	return side(a) + "/" + side(b) + unit
}

func throttleText(g events.GPUSample) string {
	if !g.ThrottleKnown {
		return "-"
	}
	reasons := correlate.ThrottleReasons(g.Throttle)
	if len(reasons) == 0 {
		return "no"
	}
	return strings.Join(reasons, ", ")
}
