package correlate

// While a process's boundary is learned its launches may be counted only
// part of the time (control's learning phases): a stretch without launch
// counts makes a whole step look like calls with no work between, so the
// boundary is learned from the stretches in which they were counted, and
// confirmed by its calls going on while they are not.

// countedStretches cuts items (the buffer, in order of their ends) into
// the stretches in which launches were counted all through, by the
// launch-probe markers seen while learning. Counting is on at the start.
func (c *Correlator) countedStretches(items []item) [][]item {
	if c.cfg.NoLaunchCounts {
		return [][]item{items}
	}
	var out [][]item
	counted, since, begin, i := true, uint64(0), 0, 0
	for _, m := range c.learnMarks {
		on := m.Out == 1
		if on == counted {
			continue // a change of the Python wait probes alone
		}
		for i < len(items) && items[i].ev.End <= m.End {
			i++
		}
		if counted {
			out = append(out, startingAfter(items[begin:i], since))
		} else {
			since, begin = m.End, i
		}
		counted = on
	}
	if counted {
		out = append(out, startingAfter(items[begin:], since))
	}
	return out
}

// startingAfter drops the items at the head of items that began before
// t: launches made in them may not have been counted.
func startingAfter(items []item, t uint64) []item {
	i := 0
	for i < len(items) && items[i].ev.Start < t {
		i++
	}
	return items[i:]
}

// uncountedSince says whether launches went uncounted at some time since
// t: the boundary's clusters cannot all be told by the kernels between.
func (c *Correlator) uncountedSince(t uint64) bool {
	return !c.counted || c.countedSince > t
}

// goesOn says whether the boundary proposed in p has come again at least
// confirmClusters times on its thread since, telling clusters apart by
// the other calls between where launches were not counted: a pattern of
// a job starting up ends, a loop's goes on.
func (c *Correlator) goesOn(p *proposal) bool {
	i := len(c.buf)
	for i > 0 && c.buf[i-1].ev.End > p.since {
		i--
	}
	var mine []item
	for _, it := range c.buf[i:] {
		if it.ev.TID == p.boundary.TID && it.ev.PID == p.boundary.PID {
			mine = append(mine, it)
		}
	}
	threads := collect(mine) // the one thread, where it made calls since
	if len(threads) == 0 {
		return false
	}
	ends, _ := clusters(threads[0].toks, p.boundary.m, true)
	return len(ends) > confirmClusters
}
