package htmlreport

import (
	"cmp"
	"fmt"
	"html/template"
	"slices"
	"strings"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/report"
)

// phaseWords says what each phase is, for the headline.
var phaseWords = map[int]string{
	fDispatch: "waiting for samples (dispatch wait)",
	fData:     "data loading",
	fCompute:  "compute (the step's GPU work, as the host sees it)",
	fSync:     "blocked in CUDA syncs, waiting for the GPU",
	fOther:    "between steps (the loop's own bookkeeping)",
}

// headline is the verdict of the focus process (the job's straggler, or
// the trainer) with how much of its steps' wall time each phase took:
// what bounds the job, and by how much, in the page's first lines.
func (c *Collector) headline(focus *Process, job correlate.Job, isJob bool) headline {
	var h headline
	if focus == nil {
		h.NoSteps = true
		h.Bottleneck = "no training steps found"
		h.Evidence = []string{"no process repeated a CUDA call once a step"}
		h.Next = []string{"name the step's end with --step-boundary CALL or --probe step=LIB:SYMBOL"}
		return h
	}
	verdict := correlate.Diagnose(focus.Run)
	h.Whose = who(focus.PID, focus.Rank, focus.Ranked)
	if isJob && len(job.Processes) > 1 {
		verdict = job.Verdict
		h.Whose = "the job's straggler, " + h.Whose
		if job.Straggler() {
			how := "its median step is"
			if job.Lockstep {
				how = "the ranks step in lockstep; its own work a step (less syncs) is"
			}
			h.Straggler = fmt.Sprintf("%s: %s %.0f%% longer than the others'", who(focus.PID, focus.Rank, focus.Ranked), how, 100*job.Skew)
		} else {
			h.Straggler = "no straggler: the ranks' steps are within 5% of each other"
		}
	}
	h.Bottleneck, h.Evidence, h.Next = verdict.Bottleneck, verdict.Evidence, verdict.Next
	ps := c.procs[focus.PID]
	if ps == nil || ps.steps.items() == 0 {
		return h
	}
	wallSum, n := ps.steps.total(fWall)
	if wallSum <= 0 || n == 0 {
		return h
	}
	var shares []phaseShare
	for _, pf := range phaseFields {
		s, _ := ps.steps.total(pf.field)
		shares = append(shares, phaseShare{pf.field, s / wallSum})
	}
	byFrac := slices.Clone(shares)
	slices.SortStableFunc(byFrac, func(a, b phaseShare) int { return cmp.Compare(b.frac, a.frac) })
	top := byFrac[0]
	var rest []string
	for _, s := range byFrac[1:] {
		if s.frac >= 0.01 {
			rest = append(rest, fmt.Sprintf("%s %.0f%%", label(s.field), 100*s.frac))
		}
	}
	h.ByHowMuch = fmt.Sprintf("%.0f%% of the step thread's time is %s; a step takes %s (mean of %d)",
		100*top.frac, phaseWords[top.field], report.Duration(wallSum/float64(n)), n)
	if len(rest) > 0 {
		h.ByHowMuch += "; then " + strings.Join(rest, ", ")
	}
	var bounds []string
	for _, bf := range boundFields {
		if s, k := ps.steps.total(bf.field); k > 0 && s > 0 {
			bounds = append(bounds, fmt.Sprintf("%s %.0f%%", bf.label, 100*s/float64(k)))
		}
	}
	if len(bounds) > 0 {
		h.StepsBound = "steps bound by " + strings.Join(bounds, ", ")
	}
	h.Shares = shareBar(focus.PID, shares)
	return h
}

func label(field int) string {
	for _, pf := range phaseFields {
		if pf.field == field {
			return pf.label
		}
	}
	return ""
}

// phaseShare is a phase's share of the steps' wall time.
type phaseShare struct {
	field int
	frac  float64
}

// shareBar is one full-width bar of the phases' shares of the wall time,
// labelled where a share is wide enough to hold its label.
func shareBar(pid uint32, shares []phaseShare) template.HTML {
	const w, h = 1000.0, 44.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="shares" viewBox="0 0 %.0f %.0f" role="img" aria-label="share of the step by phase">`, w, h)
	x := 0.0
	for _, f := range shares {
		if f.frac <= 0 {
			continue
		}
		width := f.frac * w
		fmt.Fprintf(&b, `<rect class="share" x="%.2f" y="0" width="%.2f" height="%.0f" fill="%s" data-pid="%d" data-field="%s" data-share="%.6f"/>`,
			x, width, h, phaseColor[f.field], pid, label(f.field), f.frac)
		if width >= 90 {
			fill := "#fff"
			if f.field == fOther || f.field == fData || f.field == fSync {
				fill = "#000"
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="%s" text-anchor="middle">%s %.0f%%</text>`, x+width/2, h/2+6, fill, label(f.field), 100*f.frac)
		}
		x += width
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
