package profiles

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/google/pprof/profile"
)

// Sample label names.
const (
	LabelPhase     = "phase"
	LabelWaitKind  = "wait_kind"
	LabelGPUSource = "gpu_time_source"
	// LabelSpanID is the step's index as 16 hex digits: Pyroscope's
	// SelectMergeSpanProfile finds a step's samples by it.
	LabelSpanID = "span_id"
)

// SpanID is the span_id label of step index i.
func SpanID(i int) string { return fmt.Sprintf("%016x", i) }

// profile makes the window's pprof: each frame a Function and a Location
// once, samples in a fixed order so the same samples give the same bytes.
func (w *window) profile(typ Type, timeNanos, durationNanos int64) *profile.Profile {
	p := &profile.Profile{TimeNanos: timeNanos, DurationNanos: durationNanos, Period: 1}
	switch typ {
	case TypeCPU:
		p.SampleType = []*profile.ValueType{{Type: "cpu", Unit: "nanoseconds"}}
		p.PeriodType = &profile.ValueType{Type: "cpu", Unit: "nanoseconds"}
		p.Period = w.period
	case TypeWait:
		p.SampleType = []*profile.ValueType{{Type: "wait", Unit: "nanoseconds"}}
		p.PeriodType = &profile.ValueType{Type: "wait", Unit: "nanoseconds"}
	case TypeGPU:
		// The server names a profile by its last sample type: gpu_time.
		p.SampleType = []*profile.ValueType{{Type: "kernel_launches", Unit: "count"}, {Type: "gpu_time", Unit: "nanoseconds"}}
		p.PeriodType = &profile.ValueType{Type: "gpu_time", Unit: "nanoseconds"}
		p.DefaultSampleType = "gpu_time"
	}
	keys := make([]sampleKey, 0, len(w.agg))
	for k := range w.agg {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b sampleKey) int {
		return cmp.Or(cmp.Compare(a.stack, b.stack), cmp.Compare(a.phase, b.phase), cmp.Compare(a.kind, b.kind), cmp.Compare(a.span, b.span))
	})
	locs := map[frame]*profile.Location{}
	loc := func(f frame) *profile.Location {
		if l := locs[f]; l != nil {
			return l
		}
		fn := &profile.Function{ID: uint64(len(p.Function) + 1), Name: f.name, SystemName: f.name, Filename: f.file}
		p.Function = append(p.Function, fn)
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: fn}}}
		p.Location = append(p.Location, l)
		locs[f] = l
		return l
	}
	stacks := make(map[int][]*profile.Location)
	for _, k := range keys {
		ls, ok := stacks[k.stack]
		if !ok {
			for _, f := range w.frames[k.stack] {
				ls = append(ls, loc(f))
			}
			stacks[k.stack] = ls
		}
		v := w.agg[k]
		s := &profile.Sample{Location: ls, Label: map[string][]string{LabelPhase: {string(k.phase)}}}
		switch typ {
		case TypeGPU:
			s.Value = []int64{v[0], v[1]}
			s.Label[LabelGPUSource] = []string{k.kind}
		case TypeWait:
			s.Value = []int64{v[0]}
			s.Label[LabelWaitKind] = []string{k.kind}
		default:
			s.Value = []int64{v[0]}
			if k.kind != "" {
				// On CPU inside a probed wait: a sync spinning.
				s.Label[LabelWaitKind] = []string{k.kind}
			}
		}
		if k.span > 0 {
			s.Label[LabelSpanID] = []string{SpanID(k.span - 1)}
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}
