package htmlreport

// A series keeps a run's per-step (or per-sample) values in at most
// 2*maxBins bins, however long the run: when it fills, neighbours merge
// and each bin takes twice as many items from then on. A bin keeps each
// field's sum and count, so its mean is exact for the items it holds, and
// the items it holds are named (first and last index), so a plot can be
// checked against the JSON lines.
type series struct {
	bins  []bin
	width int // items a bin takes before the next one opens
}

// maxBins is the fewest columns a plot has once a run has more items
// than that: enough for a laptop-wide plot, few enough for a small page.
const maxBins = 300

// nFields is the most fields a series holds (stepFields, gpuFields).
const nFields = 20

type bin struct {
	First, Last    int    // the items' indexes (a step's index, a sample's number)
	StartNS, EndNS uint64 // the span the items cover
	N              int    // items
	Sum            [nFields]float64
	Count          [nFields]int // items that had the field
}

// Mean is field f's mean over the items that had it; ok is false where
// none did.
func (b *bin) Mean(f int) (float64, bool) {
	if b.Count[f] == 0 {
		return 0, false
	}
	return b.Sum[f] / float64(b.Count[f]), true
}

// item is one step or sample: which fields it has, and their values.
type item struct {
	index          int
	startNS, endNS uint64
	has            [nFields]bool
	v              [nFields]float64
}

func (it *item) set(f int, v float64) { it.has[f], it.v[f] = true, v }

func (s *series) add(it *item) {
	if s.width == 0 {
		s.width = 1
	}
	if n := len(s.bins); n == 0 || s.bins[n-1].N >= s.width {
		if n == 2*maxBins {
			s.halve()
		}
		if n := len(s.bins); n == 0 || s.bins[n-1].N >= s.width {
			s.bins = append(s.bins, bin{First: it.index, StartNS: it.startNS})
		}
	}
	b := &s.bins[len(s.bins)-1]
	b.Last, b.N = it.index, b.N+1
	b.StartNS, b.EndNS = min(b.StartNS, it.startNS), max(b.EndNS, it.endNS)
	for f := range nFields {
		if it.has[f] {
			b.Sum[f] += it.v[f]
			b.Count[f]++
		}
	}
}

// halve merges neighbouring bins: the series holds maxBins bins of twice
// the width.
func (s *series) halve() {
	out := s.bins[:0]
	for i := 0; i < len(s.bins); i += 2 {
		b := s.bins[i]
		if i+1 < len(s.bins) {
			c := s.bins[i+1]
			b.Last, b.N = c.Last, b.N+c.N
			b.StartNS, b.EndNS = min(b.StartNS, c.StartNS), max(b.EndNS, c.EndNS)
			for f := range nFields {
				b.Sum[f] += c.Sum[f]
				b.Count[f] += c.Count[f]
			}
		}
		out = append(out, b)
	}
	s.bins = out
	s.width *= 2
}

// total is field f's sum and count over the whole series.
func (s *series) total(f int) (sum float64, n int) {
	for i := range s.bins {
		sum += s.bins[i].Sum[f]
		n += s.bins[i].Count[f]
	}
	return sum, n
}

// items is how many items the series took.
func (s *series) items() int {
	n := 0
	for i := range s.bins {
		n += s.bins[i].N
	}
	return n
}
