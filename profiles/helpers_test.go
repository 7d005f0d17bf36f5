package profiles

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/gpuprof/gpuprof/correlate"
)

const (
	us = uint64(1e3)
	ms = uint64(1e6)
	s  = uint64(1e9)
)

// step is a step of process 100's thread 101 with the given timeline,
// from its first span's start to its last one's end.
func step(index int, spans ...correlate.PhaseSpan) correlate.Step {
	return correlate.Step{Index: index, PID: 100, TID: 101, StartNS: spans[0].StartNS, EndNS: spans[len(spans)-1].EndNS, Phases: spans}
}

func span(p correlate.Phase, a, b uint64) correlate.PhaseSpan {
	return correlate.PhaseSpan{Phase: p, StartNS: a, EndNS: b}
}

// only is the one profile of type typ among ps, checked valid and
// written and parsed back as the pusher will send it.
func only(t *testing.T, ps []Profile, typ Type) *profile.Profile {
	t.Helper()
	var found []Profile
	for _, p := range ps {
		if p.Type == typ {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s profiles, want 1", len(found), typ)
	}
	return roundTrip(t, found[0].Prof)
}

func roundTrip(t *testing.T, p *profile.Profile) *profile.Profile {
	t.Helper()
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	back, err := profile.ParseData([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// names is a sample's stack, root first, as a flame graph reads it.
func names(s *profile.Sample) string {
	var out []string
	for _, l := range s.Location {
		out = append(out, l.Line[0].Function.Name)
	}
	slices.Reverse(out)
	return strings.Join(out, ";")
}

// sum adds value v of the samples, by what key says of each.
func sum(p *profile.Profile, v int, key func(*profile.Sample) string) map[string]int64 {
	out := map[string]int64{}
	for _, s := range p.Sample {
		out[key(s)] += s.Value[v]
	}
	return out
}

func label(name string) func(*profile.Sample) string {
	return func(s *profile.Sample) string { return strings.Join(s.Label[name], ",") }
}

func labels2(a, b string) func(*profile.Sample) string {
	return func(s *profile.Sample) string {
		return strings.Join(s.Label[a], ",") + "/" + strings.Join(s.Label[b], ",")
	}
}

func total(p *profile.Profile, v int) int64 {
	var n int64
	for _, s := range p.Sample {
		n += s.Value[v]
	}
	return n
}
