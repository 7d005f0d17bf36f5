package correlate

import "github.com/gpuprof/gpuprof/events"

// wholeGets gives each whole get (a --probe get=..., as attach adds for
// multiprocessing queues) the kind of wait it is: that of the last wait
// inside it on its thread, else that of the thread's last get that had
// one. A get that blocked on nothing, on a thread whose gets never did,
// is no wait: nothing says whether it took samples or batches.
type wholeGets struct {
	last map[uint64]waitEnd  // by pid<<32|tid: the thread's last wait
	kind map[uint64]WaitKind // by pid<<32|tid: the kind of its last get known
}

type waitEnd struct {
	kind WaitKind
	end  uint64
}

func newWholeGets() wholeGets {
	return wholeGets{last: map[uint64]waitEnd{}, kind: map[uint64]WaitKind{}}
}

// noteWait remembers a Python wait; it comes before the get it is in
// (events come as calls return).
func (g *wholeGets) noteWait(e *events.Event, kind WaitKind) {
	g.last[threadID(e.PID, e.TID)] = waitEnd{kind, e.End}
}

// kindOf returns the kind of wait a whole get e is, if known.
func (g *wholeGets) kindOf(e *events.Event) (WaitKind, bool) {
	k := threadID(e.PID, e.TID)
	if w, ok := g.last[k]; ok && w.end >= e.Start && w.end <= e.End && (w.kind == WaitDispatch || w.kind == WaitData) {
		g.kind[k] = w.kind
		return w.kind, true
	}
	kind, ok := g.kind[k]
	return kind, ok
}
