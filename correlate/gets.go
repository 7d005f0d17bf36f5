package correlate

import (
	"strings"

	"github.com/gpuprof/gpuprof/events"
)

// wholeGets gives each whole get (a --probe get=..., as attach adds for
// multiprocessing queues) the kind of wait it is: that of the last wait
// inside it on its thread, else that of the thread's last get that had
// one. A get that blocked on nothing, on a thread whose gets never did,
// is no wait: nothing says whether it took samples or batches.
//
// A wait seen inside the get function before any whole get came counts
// too: gpuprof starts timing a thread's gets once it sees it wait inside
// one, and where the pool then stays full no later get may block before
// the wait probes go with the launch probes (1 s in 40): every get of the
// run was no wait, and its time data_time (seen beside a busy loop on 2
// CPUs, in 1 run of 2).
type wholeGets struct {
	last map[uint64]waitEnd  // by pid<<32|tid: the thread's last wait
	kind map[uint64]WaitKind // by pid<<32|tid: the kind of its last get known
	// polled: by pid<<32|tid, when the thread's last get poll that found
	// its sample there returned (takes).
	polled map[uint64]uint64
	// polls: by pid<<32|tid, threads whose gets were seen polling the
	// queue's pipe (get_nowait, get(timeout=...)): they wait only there.
	polls map[uint64]bool
	fns   []getFunc // the functions whole gets are probed on
}

// getFunc is a Python function whole gets are probed on (a role get
// probe's MODULE:QUALNAME): the file a frame of it ends in, and its names
// (3.10's frames name a method without its class).
type getFunc struct {
	file, qualname, name string
}

// getFuncs are the functions of the user probes of role get.
func getFuncs(user map[uint16]UserProbe) []getFunc {
	var out []getFunc
	for _, up := range user {
		module, qualname, ok := strings.Cut(up.Name, ":")
		if up.Role != events.RoleGet || !ok || module == "" || qualname == "" {
			continue
		}
		out = append(out, getFunc{file: "/" + strings.ReplaceAll(module, ".", "/") + ".py", qualname: qualname,
			name: qualname[strings.LastIndexByte(qualname, '.')+1:]})
	}
	return out
}

// inGet says whether frames hold a call of a function whole gets are
// probed on.
func (g *wholeGets) inGet(frames []events.PyFrame) bool {
	for _, f := range frames {
		for _, fn := range g.fns {
			if (f.Func == fn.qualname || f.Func == fn.name) && strings.HasSuffix(f.File, fn.file) {
				return true
			}
		}
	}
	return false
}

type waitEnd struct {
	kind WaitKind
	end  uint64
	// take: the wait was part of taking a sample that was there (takes).
	take bool
}

// blockedMin is how long a get's poll must block to be a wait: a
// get_nowait's poll(0) took 6-40 µs on the H200 host, and over 100 µs now
// and then beside a busy loop on the dev VM's 2 CPUs. A get(timeout=...)
// whose sample comes within it is counted as taking, not waiting.
const blockedMin = 1e6

func newWholeGets(user map[uint16]UserProbe) wholeGets {
	return wholeGets{last: map[uint64]waitEnd{}, kind: map[uint64]WaitKind{}, polled: map[uint64]uint64{},
		polls: map[uint64]bool{}, fns: getFuncs(user)}
}

// takes says whether a wait inside a multiprocessing get was part of
// taking a sample that was there, not waiting for one. A get that may not
// block (get_nowait, get(block=False)) or may only for a while
// (get(timeout=...)) polls the queue's pipe first and reads the item after:
// such a get waited only if its poll blocked (blockedMin). polledAt is when
// the thread's last such short poll returned: a read right after it is the
// same get's.
func takes(e *events.Event, polledAt uint64) bool {
	switch {
	case pipePoll(e.Frames):
		return e.Duration() < blockedMin
	case inFunc(e.Frames, "Queue.get_nowait"):
		return true
	}
	return polledAt != 0 && e.Start >= polledAt && e.Start-polledAt < blockedMin
}

// noteWait remembers a Python wait; it comes before the get it is in
// (events come as calls return). One inside the get function names the
// kind of the thread's gets, whole gets timed yet or not. It says whether
// the wait was part of taking a sample that was there (takes).
//
// A thread whose gets poll waits only in the polls: a read inside its get
// with no poll reported before it came after a poll too short to report
// (under PyMinWait), and read a sample that was there; under a busy CPU
// such reads of a get_nowait were seen to take over 0.5 ms (polled/compute
// in TestLoopShapes, 2 runs in 5), and, once counted a dispatch wait, to
// name every later get of the thread one. A take inside a get clears what
// the thread's gets are known to be.
func (g *wholeGets) noteWait(e *events.Event, kind WaitKind) bool {
	k := threadID(e.PID, e.TID)
	poll, inGet := pipePoll(e.Frames), g.inGet(e.Frames)
	take := takes(e, g.polled[k]) || g.polls[k] && inGet && !poll
	switch {
	case poll && inGet:
		g.polls[k] = true
		fallthrough
	case poll:
		if take {
			g.polled[k] = e.End
		}
	}
	g.last[k] = waitEnd{kind, e.End, take}
	switch {
	case take && inGet:
		delete(g.kind, k)
	case (kind == WaitDispatch || kind == WaitData) && !take && inGet:
		g.kind[k] = kind
	}
	return take
}

// pipePoll says whether a wait is a multiprocessing connection's poll.
func pipePoll(frames []events.PyFrame) bool {
	for _, f := range frames {
		if strings.HasSuffix(f.File, "multiprocessing/connection.py") && strings.HasSuffix(f.Func, "poll") {
			return true
		}
	}
	return false
}

// inFunc says whether frames hold a multiprocessing queue's fn.
func inFunc(frames []events.PyFrame, fn string) bool {
	for _, f := range frames {
		if f.Func == fn && strings.HasSuffix(f.File, "multiprocessing/queues.py") {
			return true
		}
	}
	return false
}

// kindOf returns the kind of wait a whole get e is, if known. A get that
// took a sample that was there (takes) is no wait however the thread's
// other gets waited: a controller polling qsize() and then taking its
// batch with get_nowait; its time is the step's data time.
func (g *wholeGets) kindOf(e *events.Event) (WaitKind, bool) {
	k := threadID(e.PID, e.TID)
	if p := g.polled[k]; p >= e.Start && p <= e.End {
		return 0, false
	}
	if w, ok := g.last[k]; ok && w.end >= e.Start && w.end <= e.End && (w.kind == WaitDispatch || w.kind == WaitData) {
		if w.take {
			return 0, false
		}
		g.kind[k] = w.kind
		return w.kind, true
	}
	kind, ok := g.kind[k]
	return kind, ok
}
