package probes

import (
	"slices"
	"sync"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/events"
)

// LossSpan is a span of time (monotonic ns, the events' clock) in which
// Events events were lost to a full ring buffer, of the Kinds listed.
type LossSpan struct {
	Start, End uint64
	Events     uint64
	Kinds      []events.Kind
}

// maxLossSpans bounds the spans kept: past it the two nearest merge, so
// that a job losing events now and then for days keeps a bounded list
// that still covers every loss.
const maxLossSpans = 256

// lossGap is how far apart two spans may be and still be one: the C
// side's LOSS_GAP_NS, the gap that ends a run of drops.
const lossGap = 10e6

// losses reads the BPF programs' per-kind drop counts (the losses map)
// into exact totals by kind and the spans of time they cover. The spans
// come from each CPU's latest run of drops: where a read finds a run that
// began since the last read and holds every new drop, the span is the
// run's; where it continues the run the last read saw, it begins at that
// read's latest drop; otherwise (more than one run between two reads) it
// begins at the last read. So a span may start early, never late.
type losses struct {
	mu       sync.Mutex
	m        lossMap
	prev     map[uint32][]bpf.Loss // each kind's per-CPU values as last read
	byKind   map[events.Kind]uint64
	spans    []LossSpan
	lastRead uint64 // monotonic ns
	now      func() uint64
}

// lossMap is the BPF losses map (a per-CPU array by record kind).
type lossMap interface {
	Lookup(key, valueOut any) error
	MaxEntries() uint32
}

func newLosses(m lossMap, now func() uint64) *losses {
	return &losses{m: m, prev: map[uint32][]bpf.Loss{}, byKind: map[events.Kind]uint64{}, now: now, lastRead: now()}
}

// read takes in what the map holds now.
func (l *losses) read() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var cur []bpf.Loss
	for k := uint32(0); k < l.m.MaxEntries(); k++ {
		if err := l.m.Lookup(k, &cur); err != nil {
			continue
		}
		prev := l.prev[k]
		for cpu, c := range cur {
			var p bpf.Loss
			if cpu < len(prev) {
				p = prev[cpu]
			}
			if c.Count <= p.Count {
				continue
			}
			d := c.Count - p.Count
			start := l.lastRead
			switch {
			case c.FirstNs == p.FirstNs:
				start = p.LastNs
			case d <= c.Run:
				start = c.FirstNs
			}
			kind := events.Kind(0)
			if int(k) < len(eventKinds) {
				kind = eventKinds[k]
			}
			l.byKind[kind] += d
			l.add(LossSpan{Start: min(start, c.LastNs), End: max(c.LastNs, start), Events: d, Kinds: []events.Kind{kind}})
		}
		l.prev[k] = slices.Clone(cur)
	}
	l.lastRead = now
}

// add merges s into the spans, which stay sorted and disjoint (further
// apart than lossGap), and no more than maxLossSpans.
func (l *losses) add(s LossSpan) {
	i, _ := slices.BinarySearchFunc(l.spans, s.Start, func(x LossSpan, t uint64) int {
		if x.Start < t {
			return -1
		}
		if x.Start > t {
			return 1
		}
		return 0
	})
	l.spans = slices.Insert(l.spans, i, s)
	out := l.spans[:1]
	for _, x := range l.spans[1:] {
		last := &out[len(out)-1]
		if x.Start <= last.End+lossGap {
			last.End = max(last.End, x.End)
			last.Events += x.Events
			last.Kinds = mergeKinds(last.Kinds, x.Kinds)
			continue
		}
		out = append(out, x)
	}
	l.spans = out
	for len(l.spans) > maxLossSpans {
		j := 0 // the pair j, j+1 nearest each other
		for i := 1; i+1 < len(l.spans); i++ {
			if l.spans[i+1].Start-l.spans[i].End < l.spans[j+1].Start-l.spans[j].End {
				j = i
			}
		}
		a, b := &l.spans[j], l.spans[j+1]
		a.End, a.Events, a.Kinds = b.End, a.Events+b.Events, mergeKinds(a.Kinds, b.Kinds)
		l.spans = slices.Delete(l.spans, j+1, j+2)
	}
}

func mergeKinds(a, b []events.Kind) []events.Kind {
	out := slices.Clone(a)
	for _, k := range b {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// between is how many events the spans overlapping [start, end] lost.
func (l *losses) between(start, end uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n uint64
	for _, s := range l.spans {
		if s.Start <= end && s.End >= start {
			n += s.Events
		}
	}
	return n
}

// snapshot is the totals by kind and the spans so far.
func (l *losses) snapshot() (map[events.Kind]uint64, []LossSpan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	spans := make([]LossSpan, len(l.spans))
	for i, s := range l.spans {
		s.Kinds = slices.Clone(s.Kinds)
		spans[i] = s
	}
	byKind := make(map[events.Kind]uint64, len(l.byKind))
	for k, v := range l.byKind {
		byKind[k] = v
	}
	return byKind, spans
}
