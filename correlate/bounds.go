package correlate

// DefaultMaxBuffer is how many events a process's correlator holds at most
// while it looks for the boundary: ~300 bytes each, ~80 MB, ~13 s of the
// H200 DDP rank's ~20,000 events a second. A process whose steps are never
// found (no loop, or one gpuprof cannot tell) holds this much for as long
// as it is attached, so it is a share of --max-memory, not all of it: a
// job's ranks each have one.
const DefaultMaxBuffer = 1 << 18

// maxHandles bounds the CUDA event records and allocations remembered
// (by handle, for the elapsed-time reads and frees that name them): a job
// that creates events or allocates without end does not grow gpuprof
// with it. Past it they are forgotten all at once (Dropped.Handles): an
// elapsed read or free of one then finds nothing, as for one made before
// gpuprof attached.
const maxHandles = 1 << 16

// Dropped counts what the correlator let go of to stay within its
// bounds: none of it is lost from the steps already reported.
type Dropped struct {
	// Buffer: events dropped, oldest first, from those held while the
	// boundary was looked for (Config.MaxBuffer): steps are learnt from
	// the newer ones.
	Buffer uint64
	// Window: events left out of the boundary's review window.
	Window uint64
	// Handles: event records and allocations forgotten (maxHandles).
	Handles uint64
	// ThreadEvents: events of threads past maxThreadRows, summed into
	// their process's TID 0 row.
	ThreadEvents uint64
	// StepValues: per-step values not kept for the distributions past
	// seriesCap steps (their quantiles are then those of a uniform
	// sample; counts and means stay exact).
	StepValues uint64
}

// Any says whether anything was dropped.
func (d Dropped) Any() bool { return d != Dropped{} }

// SetMaxBuffer changes Config.MaxBuffer (a job's loop shares one budget
// among its processes' correlators), dropping the oldest events held past
// it.
func (c *Correlator) SetMaxBuffer(n int) {
	if n <= 0 {
		n = DefaultMaxBuffer
	}
	c.cfg.MaxBuffer = n
	if over := len(c.buf) - n; over > 0 {
		c.dropped.Buffer += uint64(over)
		c.buf = append(c.buf[:0], c.buf[over:]...)
	}
	if over := len(c.window) - n; over > 0 {
		c.dropped.Window += uint64(over)
		c.window = append(c.window[:0], c.window[over:]...)
	}
}

// Dropped is what the correlator has let go of so far to stay bounded.
func (c *Correlator) Dropped() Dropped {
	d := c.dropped
	d.StepValues = uint64(c.sum.stepT.dropped())
	d.ThreadEvents = c.sum.foldedThreads
	return d
}
