package perfetto

// Synthetic IDs start where Linux's stop: pid_max is at most 2^22
// (PID_MAX_LIMIT), so no process or thread of the job has these. Perfetto's
// JSON importer knows a thread by its tid alone, so the synthetic tids are
// unique across the file, not per process.
const (
	synthBase = 1 << 22
	// gpuPID is the process the GPUs' counters are on.
	gpuPID = synthBase
)

// window is how many slices a track keeps to check the next against; a
// slice that began before the end of one it has let go of goes to a lane.
const window = 64

// maxLanes is how many overlaps lanes a thread (or a process's steps) may
// have: a slice that fits none is not written (Stats.Dropped).
const maxLanes = 3

type span struct{ start, end uint64 }

// track is one row of slices in the file: a thread, a lane of it, or a
// process's steps. Every slice written to it nests with or is apart from
// every other.
type track struct {
	tid uint32
	// recent[head:] are the latest slices written, sorted by end: events
	// come about in the order they end, so a new one goes at the back
	// and the one ending first, the least likely to meet the next, is let
	// go of from the front.
	recent []span
	head   int
	// gone is the latest end of the slices let go of: a slice beginning
	// before it might cross one of them.
	gone uint64
}

// fits says whether [s, e) can go on t: apart from or nested with every
// slice t keeps (apart from all of them, for steps), and beginning after
// those it let go of ended. A slice containing an earlier one that began at
// the same instant does not fit: the importer might read the earlier one,
// written first, as the parent.
func (t *track) fits(s, e uint64, apart bool) bool {
	if s < t.gone {
		return false
	}
	for _, r := range t.recent[t.head:] {
		switch {
		case e <= r.start || s >= r.end:
		case apart:
			return false
		case s >= r.start && e <= r.end: // inside r
		case s < r.start && e >= r.end: // around r
		default:
			return false
		}
	}
	return true
}

// add keeps [s, e), letting go of the slice that ended first when full.
func (t *track) add(s, e uint64) {
	if len(t.recent)-t.head == window {
		t.gone = max(t.gone, t.recent[t.head].end)
		t.head++
	}
	if t.head >= window { // move down, once a window's worth is gone
		t.recent = append(t.recent[:0], t.recent[t.head:]...)
		t.head = 0
	}
	t.recent = append(t.recent, span{s, e})
	for i := len(t.recent) - 1; i > t.head && t.recent[i-1].end > e; i-- {
		t.recent[i-1], t.recent[i] = t.recent[i], t.recent[i-1]
	}
}

// drawn says whether the track has a slice in the file.
func (t *track) drawn() bool { return len(t.recent) > t.head }

// lanes are a thread's tracks: its own first, then its overlaps lanes.
type lanes []*track

// place finds the first track [s, e) fits on, making a lane with a new
// synthetic tid where none does; nil when the lanes are all taken.
func (l *lanes) place(s, e uint64, apart bool, newTID func() uint32) *track {
	for _, t := range *l {
		if t.fits(s, e, apart) {
			return t
		}
	}
	if len(*l) > maxLanes {
		return nil
	}
	t := &track{tid: newTID()}
	*l = append(*l, t)
	return t
}

// proc is one process of the job as the file shows it.
type proc struct {
	pid      uint32
	rank     int
	ranked   bool
	stepTIDs []uint32 // the threads its steps were on, in order
	steps    lanes    // its steps track and lanes, all synthetic tids
	threads  map[uint32]*thread
	counters bool // it has counters (at its steps' ends)
}

// thread is one thread of a process that has slices.
type thread struct {
	tid   uint32
	name  string // from Options.ThreadName at first sight, "" where none
	lanes lanes  // lanes[0] is the thread's own track
}

// drawn says whether the process has anything in the file.
func (p *proc) drawn() bool {
	if p.counters {
		return true
	}
	for _, t := range p.steps {
		if t.drawn() {
			return true
		}
	}
	for _, th := range p.threads {
		for _, t := range th.lanes {
			if t.drawn() {
				return true
			}
		}
	}
	return false
}

func (p *proc) noteStepThread(tid uint32) {
	for _, t := range p.stepTIDs {
		if t == tid {
			return
		}
	}
	p.stepTIDs = append(p.stepTIDs, tid)
}

func (p *proc) isStepThread(tid uint32) bool {
	for _, t := range p.stepTIDs {
		if t == tid {
			return true
		}
	}
	return false
}
