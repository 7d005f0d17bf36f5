package topview

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuprof/gpuprof/correlate"
)

// procStats is one process over the window: the summary of its steps
// (correlate.SummarizeSteps), its verdict and its pace.
type procStats struct {
	procWindow
	sum     correlate.Summary
	verdict correlate.Verdict
	engine  bool    // an inference engine's iterations (correlate.EngineProcess)
	rate    float64 // steps a second, from the window's first step end to its last; 0 with one step
}

func statsOf(p procWindow) procStats {
	st := procStats{procWindow: p, sum: correlate.SummarizeSteps(p.steps)}
	st.engine = correlate.EngineProcess(st.sum)
	st.verdict = correlate.Diagnose(st.sum)
	if st.engine {
		st.verdict = correlate.Verdict{Bottleneck: "inference engine"}
	}
	if n := len(p.steps); n > 1 {
		if span := p.steps[n-1].EndNS - p.steps[0].EndNS; span > 0 {
			st.rate = float64(n-1) / (float64(span) / 1e9)
		}
	}
	return st
}

// name is how the tables call a process: its rank where it has one.
func (p procWindow) name() string {
	if p.rank != nil {
		return fmt.Sprintf("rank %d", *p.rank)
	}
	return fmt.Sprintf("PID %d", p.pid)
}

// verdict is the bottleneck line over the window: the one process's, or
// with several the job's (correlate.DiagnoseJob: the straggler's, with
// the engines' capacity), and how the trainers' window steps split by
// what each was bound by (correlate.StepBound).
type verdict struct {
	correlate.Verdict
	whose  string // with several processes: whose verdict it is
	steps  int    // the trainers' steps in the window
	bounds []boundShare
}

type boundShare struct {
	bound correlate.Bound
	share float64
}

func windowVerdict(ps []procStats) verdict {
	var v verdict
	var trainers []procStats
	for _, p := range ps {
		if !p.engine {
			trainers = append(trainers, p)
		}
	}
	switch {
	case len(ps) == 1 || len(trainers) == 0:
		v.Verdict = ps[0].verdict
	default:
		runs := make([]correlate.ProcessRun, len(ps))
		for i, p := range ps {
			runs[i] = correlate.ProcessRun{PID: p.pid, Run: p.sum}
			if p.rank != nil {
				runs[i].Rank, runs[i].Ranked = *p.rank, true
			}
		}
		j, ok := correlate.DiagnoseJob(runs)
		if !ok {
			v.Verdict = trainers[0].verdict
			break
		}
		v.Verdict = j.Verdict
		slow := slices.IndexFunc(ps, func(p procStats) bool { return p.pid == j.Slowest })
		// As the summary's job view says it (report.WriteJob).
		switch {
		case len(j.Processes) == 1:
			v.whose = "the trainer's, with the engines' I: " + ps[slow].name()
		case j.Lockstep && j.Straggler():
			v.whose = fmt.Sprintf("the straggler's: %s, %.0f%% more work of its own a step", ps[slow].name(), 100*j.Skew)
		case j.Lockstep:
			v.whose = "balanced ranks, the busiest's: " + ps[slow].name()
		default:
			v.whose = fmt.Sprintf("the slowest's: %s, %.0f%% longer a step than the fastest", ps[slow].name(), 100*j.Skew)
		}
	}
	counts := map[correlate.Bound]int{}
	for _, p := range trainers {
		for _, s := range p.steps {
			counts[correlate.StepBound(s)]++
			v.steps++
		}
	}
	for b, n := range counts {
		v.bounds = append(v.bounds, boundShare{b, float64(n) / float64(v.steps)})
	}
	slices.SortFunc(v.bounds, func(a, b boundShare) int {
		if c := cmp.Compare(b.share, a.share); c != 0 {
			return c
		}
		return strings.Compare(string(a.bound), string(b.bound))
	})
	return v
}
