package htmlreport

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// chart draws one plot as SVG into a string: a time axis shared by the
// page's plots (seconds since the run began), a value axis from zero, and
// marks that carry their data (data-* attributes: which items, which
// field, its mean), so that a reader, a script or a test can read a mark
// back.
type chart struct {
	b          strings.Builder
	w, h       float64 // the view box
	left, top  float64 // the plotting area's corner
	pw, ph     float64 // and size
	x0, x1     float64 // seconds at the area's left and right
	ymax       float64
	unit       string // the value axis's unit, for the readout
	originNS   uint64
	legend     []legendEntry
	title, sub string
}

type legendEntry struct {
	label, color, dash string
	area               bool
}

const (
	chartW = 1000
	chartH = 230
)

func newChart(title string, x0, x1, ymax float64, unit string, originNS uint64, h float64) *chart {
	c := &chart{w: chartW, h: h, left: 64, top: 12, x0: x0, x1: x1, unit: unit, originNS: originNS, title: title}
	c.pw, c.ph = c.w-c.left-16, c.h-c.top-34
	if c.x1 <= c.x0 {
		c.x1 = c.x0 + 1
	}
	c.ymax = niceCeil(ymax)
	return c
}

func (c *chart) x(sec float64) float64 { return c.left + (sec-c.x0)/(c.x1-c.x0)*c.pw }
func (c *chart) y(v float64) float64 {
	return c.top + c.ph - math.Min(v, c.ymax)/c.ymax*c.ph
}

// sec is an instant's seconds on the time axis.
func (c *chart) sec(ns uint64) float64 {
	if ns < c.originNS {
		return 0
	}
	return float64(ns-c.originNS) / 1e9
}

// axes draws the grid and both axes' ticks into b, under the marks.
func (c *chart) axes(b *strings.Builder) {
	fmt.Fprintf(b, `<g class="axes">`)
	for _, v := range ticks(0, c.ymax, 4) {
		y := c.y(v)
		fmt.Fprintf(b, `<line class="grid" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, c.left, c.left+c.pw, y, y)
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`, c.left-6, y+4, html.EscapeString(valueText(v, c.unit)))
	}
	for _, s := range ticks(c.x0, c.x1, 8) {
		x := c.x(s)
		fmt.Fprintf(b, `<line class="tickmark" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, x, x, c.top+c.ph, c.top+c.ph+4)
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x, c.top+c.ph+17, timeText(s))
	}
	fmt.Fprintf(b, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f"/>`, c.left, c.left+c.pw, c.top+c.ph, c.top+c.ph)
	fmt.Fprintf(b, `</g>`)
}

// markAttrs names a bin's items and a field's value for a mark.
func markAttrs(pid uint32, b *bin, field string, v float64) string {
	return fmt.Sprintf(`data-pid="%d" data-first="%d" data-last="%d" data-n="%d" data-field="%s" data-mean="%.9g"`,
		pid, b.First, b.Last, b.N, field, v)
}

// stack draws the bins as columns of stacked fields, each column as wide
// as the time its items covered; scale turns a field's mean into the
// axis's unit.
func (c *chart) stack(pid uint32, s *series, fields []int, names, colors []string, scale float64) {
	fmt.Fprintf(&c.b, `<g class="stack" data-scale="%g">`, scale)
	for i := range s.bins {
		b := &s.bins[i]
		if b.EndNS < c.originNS {
			continue // before the plots' zero
		}
		x0, x1 := c.x(c.sec(b.StartNS)), c.x(c.sec(b.EndNS))
		if x1-x0 < 0.6 {
			x1 = x0 + 0.6 // a mark narrower than this does not show
		}
		base := 0.0
		for j, f := range fields {
			v, ok := b.Mean(f)
			if !ok {
				continue
			}
			y0, y1 := c.y(base*scale), c.y((base+v)*scale)
			base += v
			fmt.Fprintf(&c.b, `<rect class="seg" x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s" %s/>`,
				x0, y1, x1-x0, math.Max(0, y0-y1), colors[j], markAttrs(pid, b, names[j], v))
		}
		if base*scale > c.ymax {
			// A column cut at the axis's top: a dark cap says so.
			fmt.Fprintf(&c.b, `<rect class="cut" x="%.2f" y="%.2f" width="%.2f" height="3"/>`, x0, c.top, x1-x0)
		}
	}
	fmt.Fprintf(&c.b, `</g>`)
	for j := range fields {
		c.legend = append(c.legend, legendEntry{label: names[j], color: colors[j], area: true})
	}
}

// line draws a field's bin means as a line through the bins' middles,
// broken where a bin has none, with a point on each that carries its
// data.
func (c *chart) line(pid uint32, s *series, field int, name, label, color, dash string, scale float64) {
	var path strings.Builder
	var pts strings.Builder
	pen := false
	for i := range s.bins {
		b := &s.bins[i]
		v, ok := b.Mean(field)
		if !ok || b.EndNS < c.originNS {
			pen = false
			continue
		}
		x := c.x((c.sec(b.StartNS) + c.sec(b.EndNS)) / 2)
		y := c.y(v * scale)
		if pen {
			fmt.Fprintf(&path, "L%.1f %.1f", x, y)
		} else {
			fmt.Fprintf(&path, "M%.1f %.1f", x, y)
		}
		pen = true
		fmt.Fprintf(&pts, `<circle class="pt" cx="%.1f" cy="%.1f" r="2.2" fill="%s" %s/>`, x, y, color, markAttrs(pid, b, name, v))
	}
	fmt.Fprintf(&c.b, `<g class="line" data-scale="%g"><path d="%s" stroke="%s" stroke-dasharray="%s" fill="none"/>%s</g>`,
		scale, path.String(), color, dash, pts.String())
	c.legend = append(c.legend, legendEntry{label: label, color: color, dash: dash})
}

// svg is the finished chart, its legend above it.
func (c *chart) svg(id string) string {
	var out strings.Builder
	fmt.Fprintf(&out, `<figure class="chart" id="%s"><figcaption><span class="title">%s</span>`, id, html.EscapeString(c.title))
	if c.sub != "" {
		fmt.Fprintf(&out, ` <span class="sub">%s</span>`, html.EscapeString(c.sub))
	}
	out.WriteString(`<span class="legend">`)
	for _, l := range c.legend {
		if l.area {
			fmt.Fprintf(&out, `<span class="key"><svg width="12" height="12"><rect width="12" height="12" fill="%s"/></svg>%s</span>`, l.color, html.EscapeString(l.label))
		} else {
			fmt.Fprintf(&out, `<span class="key"><svg width="22" height="12"><line x1="1" x2="21" y1="6" y2="6" stroke="%s" stroke-width="2.5" stroke-dasharray="%s"/></svg>%s</span>`,
				l.color, l.dash, html.EscapeString(l.label))
		}
	}
	out.WriteString(`</span></figcaption>`)
	fmt.Fprintf(&out, `<svg class="plot" viewBox="0 0 %.0f %.0f" role="img" aria-label="%s" data-unit="%s">`, c.w, c.h, html.EscapeString(c.title), c.unit)
	c.axes(&out)
	out.WriteString(c.b.String())
	out.WriteString(`</svg></figure>`)
	return out.String()
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten (1 for nothing).
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// ticks are about n round values from lo to hi.
func ticks(lo, hi float64, n int) []float64 {
	if hi <= lo {
		return []float64{lo}
	}
	step := niceCeil((hi - lo) / float64(n))
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi*(1+1e-9); v += step {
		out = append(out, v)
	}
	return out
}

// timeText writes seconds on the time axis: 0s, 45s, 2m, 1h30m.
func timeText(s float64) string {
	switch {
	case s < 60:
		return strings.TrimSuffix(fmt.Sprintf("%.3g", s), ".0") + "s"
	case s < 3600:
		m, r := math.Floor(s/60), math.Mod(s, 60)
		if r < 0.5 {
			return fmt.Sprintf("%.0fm", m)
		}
		return fmt.Sprintf("%.0fm%.0fs", m, r)
	}
	h, r := math.Floor(s/3600), math.Mod(s, 3600)/60
	if r < 0.5 {
		return fmt.Sprintf("%.0fh", h)
	}
	return fmt.Sprintf("%.0fh%.0fm", h, r)
}

// valueText writes a tick value with its unit.
func valueText(v float64, unit string) string {
	s := strings.TrimSuffix(strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), "."), ".")
	if s == "" || s == "-0" {
		s = "0"
	}
	switch unit {
	case "%", "":
		return s + unit
	}
	return s + " " + unit
}
