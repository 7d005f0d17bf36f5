package topview

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/report"
)

// Glyphs are the phase bar's characters, a letter a phase so that the bar
// reads without colour too (and in tmux capture-pane); the screen colours
// them.
var Glyphs = map[correlate.Phase]rune{
	correlate.PhaseDispatchWait: 'W',
	correlate.PhaseData:         'D',
	correlate.PhaseCompute:      'C',
	correlate.PhaseSync:         'S',
	correlate.PhaseOther:        '.',
}

// phaseOrder is the order the numbers beside a bar come in.
var phaseOrder = []struct {
	phase correlate.Phase
	name  string
}{
	{correlate.PhaseDispatchWait, "dispatch wait"},
	{correlate.PhaseData, "data"},
	{correlate.PhaseCompute, "compute"},
	{correlate.PhaseSync, "sync"},
	{correlate.PhaseOther, "other"},
}

// phaseBlocks are, per process, its latest step's phases: the times and
// shares of its wall time, and a bar of its timeline.
func phaseBlocks(ps []procStats, width int) []block {
	var legend []string
	for _, p := range phaseOrder {
		legend = append(legend, fmt.Sprintf("%c %s", Glyphs[p.phase], p.name))
	}
	bs := []block{{head: []Line{{Text: "PHASES of the latest step   " + strings.Join(legend, "  "), Kind: Title}},
		keep: keepLegend, sep: true}}
	for _, p := range ps {
		s := p.steps[len(p.steps)-1]
		bs = append(bs, block{head: []Line{{Text: phaseTimes(p.name(), s)}}, keep: keepPhaseTimes})
		label := "  "
		if len(ps) > 1 {
			label = p.name() + " "
		}
		bar := "(no timeline)"
		if n := width - len(label) - 2; n > 0 && len(s.Phases) > 0 {
			bar = "[" + phaseBar(s.Phases, n) + "]"
		}
		bs = append(bs, block{head: []Line{{Text: label + bar, Kind: Bar}}, keep: keepBars})
	}
	return bs
}

func phaseTimes(name string, s correlate.Step) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s step %d  %s:", name, s.Index, report.Duration(s.WallTime))
	var total float64
	for _, p := range phaseOrder {
		total += s.PhaseTime(p.phase)
	}
	for _, p := range phaseOrder {
		// The phases the step had: where Python waits are not probed
		// there is no dispatch wait in its timeline, known or not.
		if t := s.PhaseTime(p.phase); t > 0 {
			fmt.Fprintf(&b, "  %s %s %.0f%%", p.name, report.Duration(t), 100*t/total)
		}
	}
	return b.String()
}

// phaseBar draws a timeline n cells wide, each cell the phase that holds
// the most of its stretch of the step, so the bar keeps the timeline's
// order (a step of micro-batches shows each one's data and compute).
func phaseBar(spans []correlate.PhaseSpan, n int) string {
	start, end := spans[0].StartNS, spans[len(spans)-1].EndNS
	if end <= start {
		return strings.Repeat(" ", n)
	}
	dur := float64(end - start)
	out := make([]rune, n)
	j := 0
	for i := range out {
		lo, hi := float64(start)+dur*float64(i)/float64(n), float64(start)+dur*float64(i+1)/float64(n)
		for j < len(spans) && float64(spans[j].EndNS) <= lo {
			j++
		}
		held := map[correlate.Phase]float64{}
		for k := j; k < len(spans) && float64(spans[k].StartNS) < hi; k++ {
			held[spans[k].Phase] += min(hi, float64(spans[k].EndNS)) - max(lo, float64(spans[k].StartNS))
		}
		out[i] = Glyphs[mostHeld(held)]
	}
	return string(out)
}

// mostHeld is the phase holding the most time, in phaseOrder on a tie.
func mostHeld(held map[correlate.Phase]float64) correlate.Phase {
	best := correlate.PhaseOther
	bestT := -1.0
	for _, p := range phaseOrder {
		if t, ok := held[p.phase]; ok && t > bestT {
			best, bestT = p.phase, t
		}
	}
	return best
}

func sortByEnd(steps []correlate.Step) {
	slices.SortStableFunc(steps, func(a, b correlate.Step) int { return cmp.Compare(a.EndNS, b.EndNS) })
}
