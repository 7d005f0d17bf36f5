package probes

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestWholeGetsByNativeAnchors: on every interpreter here, gpuprof's own
// whole gets time multiprocessing's Queue.get by its native anchors, with
// no watchpoint, both ways a get takes the queue's lock (`with` when it
// waits as long as it takes, acquire with a timeout): each get the
// consumer logged after the attach is timed once, inside the span the
// consumer measured around it and covering nearly all of it, and the
// three threads waiting on an Event beside it time nothing. The anchors
// go in once a thread is seen waiting in a get, not at the attach: the
// processes that only put (an engine) pay nothing.
func TestWholeGetsByNativeAnchors(t *testing.T) {
	testenv.RequireRoot(t)
	for name, python := range testenv.Pythons(t) {
		for _, timeout := range []string{"none", "10"} {
			t.Run(name+"/timeout-"+timeout, func(t *testing.T) {
				u := wholeGetsProbe(t, "multiprocessing.queues:Queue.get")
				s := openSessionWith(t, u)
				truth := filepath.Join(t.TempDir(), "waits.jsonl")
				pid := startScript(t, python, "mp_waits.py", "150", "0.01", "0.3", truth, "3", timeout)
				if _, err := s.Attach(pid); err != nil {
					t.Fatal(err)
				}
				s.mu.Lock()
				w := s.targets[pid].pyCalls[u.ID]
				s.mu.Unlock()
				if w != nil && w.anchors != nil {
					t.Errorf("anchors attached before a thread was seen waiting in a get: a process that never gets would pay for them")
				}
				c, err := runFor(t, s, 2500*time.Millisecond)
				if err != nil && !strings.Contains(err.Error(), "exited") {
					t.Fatal(err)
				}
				s.mu.Lock()
				w = s.targets[pid].pyCalls[u.ID]
				s.mu.Unlock()
				if w == nil || w.fn == nil || w.anchors == nil {
					t.Fatalf("Queue.get not timed by native anchors: %+v", w)
				}
				for _, p := range w.anchorPlaces {
					// SemLock.__enter__ jumps on to its acquire: followed,
					// the probe is on an instruction the kernel emulates.
					if !p.Emulated {
						t.Errorf("an anchor's probe at %s: single-stepped, the slow path", p)
					}
				}
				if len(w.events) != 0 || w.sites() != 0 {
					t.Errorf("%d watchpoints open, %d debug registers taken: want none", len(w.events), w.sites())
				}
				var gets []events.Event
				for _, e := range c.evs {
					if e.Kind != events.KindCall || e.API != u.ID {
						continue
					}
					if e.TID != uint32(pid) {
						t.Errorf("a get timed on thread %d: only the main thread gets", e.TID)
					}
					gets = append(gets, e)
				}
				first := uint64(0)
				if len(gets) > 0 {
					first = gets[0].Start
				}
				logged, matched, short := 0, 0, 0
				var shortest string
				for _, g := range loggedGets(t, truth) {
					if g.Start < first {
						continue // before the first get timed: the anchors were not in place
					}
					logged++
					n := 0
					for _, e := range gets {
						if e.Start < g.Start || e.End > g.End {
							continue
						}
						n++
						// The consumer's timer adds the call's own overhead
						// (µs); a wakeup delayed on a loaded machine is inside
						// both. A consumer that loses the GIL or its CPU
						// between its timer and the get's first anchor is
						// timed short by that much: at most 1 in 50.
						if got := float64(e.End-e.Start) / 1e9; got < 0.9*g.Wait-200e-6 {
							short++
							shortest = fmt.Sprintf("get timed %.4fs, the consumer measured %.4fs around it", got, g.Wait)
						}
					}
					if n > 1 {
						t.Errorf("a get of the consumer's timed %d times", n)
					}
					matched += n
				}
				t.Logf("%d of the consumer's %d gets since the first timed were timed, %d short", matched, logged, short)
				if short > 0 && short*50 > matched {
					t.Errorf("%d of %d gets timed short of the consumer's own timer; one: %s", short, matched, shortest)
				} else if short > 0 {
					t.Logf("timed short (allowed, 1 in 50): %s", shortest)
				}
				if logged < 50 || matched < logged-1 {
					t.Errorf("%d of the consumer's %d gets since the first timed were timed (%d events)", matched, logged, len(gets))
				}
			})
		}
	}
}

// TestNativeAnchorsShared: Queue.get and SimpleQueue.get named together
// (user probes: anchored at the attach, not lazily) share one set of
// anchor probes, and each get is timed once, as the function it is.
func TestNativeAnchorsShared(t *testing.T) {
	python, ok := testenv.Pythons(t)["pyenv-3.12"]
	if !ok {
		testenv.Skip(t, "needs pyenv's 3.12")
	}
	var ups []UserProbe
	for i, spec := range []string{"get=py:multiprocessing.queues:Queue.get", "data=py:multiprocessing.queues:SimpleQueue.get"} {
		u, err := ParseUserProbe(spec, i)
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, u)
	}
	stats, err := bpf.EnableStats()
	if err != nil {
		testenv.Skip(t, "needs BPF statistics: "+err.Error())
	}
	defer stats.Close()
	s := openSessionWith(t, ups...)
	truth := filepath.Join(t.TempDir(), "gets.jsonl")
	pid := startScript(t, python, "mp_two_queues.py", "200", "0.005", truth)
	time.Sleep(300 * time.Millisecond) // both queues made
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	c, err := runFor(t, s, 2*time.Second)
	if err != nil && !strings.Contains(err.Error(), "exited") {
		t.Fatal(err)
	}
	s.mu.Lock()
	ws := s.targets[pid].pyCalls
	owners := 0
	for _, u := range ups {
		if w := ws[u.ID]; w == nil || w.anchors == nil {
			t.Errorf("%s not timed by native anchors: %+v", u.Spec(), w)
		} else if len(w.anchors) > 0 {
			owners++
		}
	}
	s.mu.Unlock()
	if owners != 1 {
		t.Errorf("%d sets of anchor probes, want one shared", owners)
	}
	want := map[string]uint16{"Queue": ups[0].ID, "SimpleQueue": ups[1].ID}
	logged, timed := 0, 0
	for _, g := range loggedGets(t, truth) {
		n := 0
		for _, e := range c.evs {
			if e.Kind != events.KindCall || e.Start < g.Start || e.End > g.End {
				continue
			}
			if e.API != ups[0].ID && e.API != ups[1].ID {
				continue
			}
			if e.API != want[g.Queue] {
				t.Errorf("a %s get timed as probe %d", g.Queue, e.API)
			}
			n++
		}
		if n > 1 {
			t.Errorf("a %s get timed %d times", g.Queue, n)
		}
		logged++
		timed += n
	}
	if timed < 100 {
		t.Errorf("%d of the %d gets logged were timed", timed, logged)
	}
	// Shared, the anchors trap once at each end of a get whichever
	// function it is (the job's cost, counted by --probe-stats). The
	// start traps at every SemLock taken in the process too: a Queue.put
	// takes two (its bounded semaphore, then the feeder thread's write
	// lock), a SimpleQueue.put one. The end traps at nothing else here.
	runs := map[string]uint64{}
	for _, st := range s.objs.ProgramStats() {
		runs[st.Name] = st.Runs
	}
	t.Logf("%d gets logged, %d timed; py_anchor_start ran %d times, py_anchor_end %d", logged, timed, runs["py_anchor_start"], runs["py_anchor_end"])
	if end := runs["py_anchor_end"]; end < uint64(timed) || end > uint64(logged)+2 {
		t.Errorf("py_anchor_end ran %d times for %d gets timed of %d logged: want one run a get", end, timed, logged)
	}
	if start := runs["py_anchor_start"]; start < uint64(timed) || start > 3*uint64(logged)+4 {
		t.Errorf("py_anchor_start ran %d times for %d gets timed of %d logged: want one a get and no more than two a put", start, timed, logged)
	}
}

// TestTailJump: SemLock.__enter__ as pyenv's 3.10 builds it (load two
// arguments, jump to the acquire it shares with SemLock.acquire) is seen
// as a tail jump to that function; code that does work first is not.
func TestTailJump(t *testing.T) {
	enter := []byte{
		0x48, 0x8b, 0x15, 0x39, 0x31, 0x00, 0x00, // mov 0x3139(%rip),%rdx
		0xbe, 0x01, 0x00, 0x00, 0x00, // mov $0x1,%esi
		0xe9, 0x3f, 0xfd, 0xff, 0xff, // jmp 0x2bc0 (from 0x2e70)
	}
	if got, ok := tailJump(enter, 0x2e70); !ok || got != 0x2bc0 {
		t.Errorf("tailJump = %#x, %v; want 0x2bc0", got, ok)
	}
	if _, ok := tailJump(enter[:16], 0x2e70); ok {
		t.Error("a jump cut short decoded: want none")
	}
	work := []byte{0x48, 0x83, 0xec, 0x08, 0xe9, 0x00, 0x00, 0x00, 0x00} // sub $8,%rsp; jmp
	if _, ok := tailJump(work, 0x1000); ok {
		t.Error("a function that moves the stack first read as a tail jump")
	}
}

// loggedGet is a get as a test script logged it (one JSON line a get).
type loggedGet struct {
	Queue string  `json:"queue"` // mp_two_queues.py: which queue
	Start uint64  `json:"t_start_ns"`
	End   uint64  `json:"t_end_ns"`
	Wait  float64 `json:"wait"`
}

func loggedGets(t *testing.T, path string) []loggedGet {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []loggedGet
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var g loggedGet
		if json.Unmarshal([]byte(line), &g) == nil {
			out = append(out, g)
		}
	}
	return out
}

// TestAnchoredGetsTakeNoRegisters: gpuprof's own whole gets, anchored,
// take none of the thread's four debug registers, so functions the user
// names that need all four are watched, found after the gets' function,
// without taking it from them.
func TestAnchoredGetsTakeNoRegisters(t *testing.T) {
	python, ok := testenv.Pythons(t)["pyenv-3.12"]
	if !ok {
		testenv.Skip(t, "needs pyenv's 3.12")
	}
	ups := []UserProbe{wholeGetsProbe(t, "multiprocessing.queues:Queue.get")}
	for i, f := range []string{"fetch", "flaky"} { // two sites each
		u, err := ParseUserProbe("data=py:__main__:"+f, i+1)
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, u)
	}
	s := openSessionWith(t, ups...)
	// The script imports multiprocessing.queues at once and defines its
	// functions 1.5 s later: the gets' function is found first.
	pid := startScript(t, python, "pycalls.py", filepath.Join(t.TempDir(), "calls.jsonl"), "--define-late", "1.5", "--start-delay", "2.5")
	time.Sleep(300 * time.Millisecond)
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	if _, err := runFor(t, s, 3500*time.Millisecond); err != nil && !strings.Contains(err.Error(), "exited") {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.targets[pid].pyCalls
	if w := ws[ups[0].ID]; w == nil || w.fn == nil || !w.anchorable {
		t.Errorf("Queue.get no longer to be timed by its anchors once the user's functions were watched: %+v", w)
	}
	why := testenv.NoWatchpoints(t)
	for _, u := range ups[1:] {
		w := ws[u.ID]
		switch {
		case why != "" && (w == nil || !w.finished || w.reason != why || len(w.events) > 0 || w.sites() > 0):
			t.Errorf("%s with no watchpoint that traps: %+v, want it given up: %s", u.Spec(), w, why)
		case why == "" && (w == nil || w.fn == nil || len(w.events) == 0):
			t.Errorf("%s not watched: %+v", u.Spec(), w)
		}
	}
	if why != "" {
		testenv.SkipNoWatchpoints(t, why)
	}
}
