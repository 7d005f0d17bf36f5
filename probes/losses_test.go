package probes

import (
	"testing"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/events"
)

// fakeLosses is the BPF losses map as the programs leave it: per kind,
// per CPU.
type fakeLosses map[uint32][]bpf.Loss

func (f fakeLosses) Lookup(key, out any) error {
	*out.(*[]bpf.Loss) = append((*out.(*[]bpf.Loss))[:0], f[key.(uint32)]...)
	return nil
}

func (f fakeLosses) MaxEntries() uint32 { return 16 }

// drop adds n drops of kind on cpu at times from..to as the BPF side
// does: a new run where the last drop is more than lossGap ago.
func (f fakeLosses) drop(kind uint32, cpu int, from, to, n uint64) {
	if f[kind] == nil {
		f[kind] = make([]bpf.Loss, 2)
	}
	l := &f[kind][cpu]
	if from-l.LastNs > lossGap {
		l.FirstNs, l.Run = from, 0
	}
	l.LastNs, l.Run, l.Count = to, l.Run+n, l.Count+n
}

// TestLossSpans: the spans hold every drop, exactly, by kind; a run seen
// across reads is one span; runs far apart stay apart until there are
// more than maxLossSpans of them, when the nearest merge, still covering
// every drop.
func TestLossSpans(t *testing.T) {
	m := fakeLosses{}
	now := uint64(1e9)
	l := newLosses(m, func() uint64 { return now })
	m.drop(uint32(bpf.KindCall), 0, 2e9, 2.5e9, 100)
	now = 3e9
	l.read()
	m.drop(uint32(bpf.KindCall), 0, 2.5e9+1e6, 3.5e9, 50) // the same run, read again
	m.drop(uint32(bpf.KindPyWait), 1, 3.2e9, 3.3e9, 7)
	now = 4e9
	l.read()
	byKind, spans := l.snapshot()
	if byKind[events.KindCall] != 150 || byKind[events.KindPyWait] != 7 {
		t.Fatalf("by kind %v, want 150 calls and 7 Python waits", byKind)
	}
	if len(spans) != 1 || spans[0].Start != 2e9 || spans[0].End != 3.5e9 || spans[0].Events != 157 || len(spans[0].Kinds) != 2 {
		t.Fatalf("spans %+v, want one 2e9-3.5e9 of 157 events, two kinds", spans)
	}
	if l.between(0, 1.9e9) != 0 || l.between(3.4e9, 5e9) != 157 {
		t.Errorf("between: %d before, %d overlapping", l.between(0, 1.9e9), l.between(3.4e9, 5e9))
	}

	// Two runs between reads: the span begins at the previous read.
	m.drop(uint32(bpf.KindCall), 0, 10e9, 10.1e9, 5)
	m.drop(uint32(bpf.KindCall), 0, 11e9, 11.1e9, 5)
	now = 12e9
	l.read()
	_, spans = l.snapshot()
	if last := spans[len(spans)-1]; last.Start != 4e9 || last.End != 11.1e9 || last.Events != 10 {
		t.Errorf("two runs between reads gave %+v, want 4e9-11.1e9 of 10", last)
	}

	// Many runs far apart: bounded, every drop still in a span.
	total := uint64(167)
	for i := range uint64(4 * maxLossSpans) {
		at := 20e9 + i*1e9
		m.drop(uint32(bpf.KindCall), int(i%2), at, at+1e6, i+1)
		total += i + 1
		now = at + 5e8
		l.read()
		if len(l.spans) > maxLossSpans {
			t.Fatalf("%d spans, want at most %d", len(l.spans), maxLossSpans)
		}
	}
	byKind, spans = l.snapshot()
	var inSpans uint64
	for i, s := range spans {
		inSpans += s.Events
		if i > 0 && s.Start <= spans[i-1].End {
			t.Fatalf("spans %d and %d overlap: %+v %+v", i-1, i, spans[i-1], s)
		}
	}
	if inSpans != total || byKind[events.KindCall]+byKind[events.KindPyWait] != total {
		t.Errorf("spans hold %d, by kind %v, want %d", inSpans, byKind, total)
	}
	if got := l.between(0, ^uint64(0)); got != total {
		t.Errorf("between everything %d, want %d", got, total)
	}
}
