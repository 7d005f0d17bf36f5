package correlate

// series holds one per-step quantity for its distribution over the run
// (Dist): every value up to seriesCap, then a uniform sample of that
// many (reservoir sampling), so that a job attached for days holds no
// more than the first hours' worth; the count and the mean stay exact,
// the quantiles become those of the sample. At ~90 steps a second (the
// soak's trainer) the cap is ~6 minutes of steps; a summary's ~25 of them
// hold ~6.5 MB at most per process.
type series struct {
	n    int     // values added
	sum  float64 // of all of them
	kept []float64
	rng  uint64 // xorshift state: the sample is the same run after run
}

// seriesCap is how many values a series keeps.
const seriesCap = 1 << 15

func (s *series) add(x float64) {
	s.n++
	s.sum += x
	if len(s.kept) < seriesCap {
		s.kept = append(s.kept, x)
		return
	}
	// Algorithm R: the n-th value replaces a kept one with probability
	// seriesCap/n.
	if j := s.next() % uint64(s.n); j < seriesCap {
		s.kept[j] = x
	}
}

// next is xorshift64*.
func (s *series) next() uint64 {
	if s.rng == 0 {
		s.rng = 0x9e3779b97f4a7c15
	}
	s.rng ^= s.rng >> 12
	s.rng ^= s.rng << 25
	s.rng ^= s.rng >> 27
	return s.rng * 0x2545f4914f6cdd1d
}

// dist is the values' distribution: N and Mean over all of them.
func (s *series) dist() Dist {
	d := dist(s.kept)
	if s.n > 0 {
		d.N, d.Mean = s.n, s.sum/float64(s.n)
	}
	return d
}

// dropped is how many values are not among those kept.
func (s *series) dropped() int { return s.n - len(s.kept) }
