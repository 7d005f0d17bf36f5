package pyroscope

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// sample is a test sample: its stack root first ("main;train;step"), its
// values by sample type, its string labels.
type sample struct {
	stack  string
	values []int64
	labels map[string]string
}

// buildProfile is a pprof profile of the sample types given ("cpu/
// nanoseconds"), period type and period, at time at (zero: none, for Push
// to set), holding samples.
// Frames of the same name share one function and location, as a
// profiler's builder would have them.
func buildProfile(types []string, periodType string, period int64, at time.Time, samples []sample) *profile.Profile {
	vt := func(s string) *profile.ValueType {
		typ, unit, _ := strings.Cut(s, "/")
		return &profile.ValueType{Type: typ, Unit: unit}
	}
	p := &profile.Profile{PeriodType: vt(periodType), Period: period, DurationNanos: int64(10 * time.Second)}
	if !at.IsZero() { // else Push sets it
		p.TimeNanos = at.UnixNano()
	}
	for _, t := range types {
		p.SampleType = append(p.SampleType, vt(t))
	}
	locs := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l, ok := locs[name]; ok {
			return l
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name, Filename: "train.py"}
		p.Function = append(p.Function, f)
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f, Line: int64(len(p.Location) + 1)}}}
		p.Location = append(p.Location, l)
		locs[name] = l
		return l
	}
	for _, s := range samples {
		frames := strings.Split(s.stack, ";")
		ps := &profile.Sample{Value: slices.Clone(s.values)}
		for i := len(frames) - 1; i >= 0; i-- { // leaf first
			ps.Location = append(ps.Location, loc(frames[i]))
		}
		for k, v := range s.labels {
			if ps.Label == nil {
				ps.Label = map[string][]string{}
			}
			ps.Label[k] = []string{v}
		}
		p.Sample = append(p.Sample, ps)
	}
	return p
}

// manySamples is a cpu profile of n samples of distinct stacks, sample i
// worth i+1 periods.
func manySamples(n int, at time.Time) *profile.Profile {
	samples := make([]sample, n)
	for i := range samples {
		samples[i] = sample{stack: fmt.Sprintf("main;train;f%d", i), values: []int64{int64(i+1) * cpuPeriod}}
	}
	return buildProfile([]string{"cpu/nanoseconds"}, "cpu/nanoseconds", cpuPeriod, at, samples)
}

// cpuPeriod is 97 Hz's period, the convention of Grafana Alloy's eBPF
// profiler that gpuprof follows.
const cpuPeriod = int64(1_000_000_000 / 97)

// totals sums each sample type's values.
func totals(p *profile.Profile) []int64 {
	t := make([]int64, len(p.SampleType))
	for _, s := range p.Sample {
		for i, v := range s.Value {
			t[i] += v
		}
	}
	return t
}
