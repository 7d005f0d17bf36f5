package probes

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/internal/testenv"
)

// TestPythonQueueWaits attaches to a real CPython blocked in
// queue.Queue.get, multiprocessing.Queue.get and a shared descriptor's
// detach (torch's tensors through multiprocessing queues), and holds the
// waits gpuprof saw to the program's own log, with the Python functions
// that waited.
func TestPythonQueueWaits(t *testing.T) {
	testenv.RequireRoot(t)
	for name, python := range testenv.Pythons(t) {
		for _, prog := range []struct {
			script, file, fn string
			gets             string
			cover            float64 // share of the logged waits gpuprof's waits must cover (of each, 0.8 of it)
			native           string  // a native wait that must be among them, if any
		}{
			{"queue_waits.py", "queue.py", "get", "12", 0.95, ""},
			{"mp_waits.py", "multiprocessing/queues.py", "get", "12", 0.95, ""},
			// The detach connects to the sender's resource-sharer thread
			// (a handshake of reads) and waits in recvmsg for the
			// descriptor; the Python between them is not a wait.
			{"fd_waits.py", "multiprocessing/resource_sharer.py", "detach", "16", 0.6, "recvmsg"},
		} {
			script := filepath.Join(testenv.Root(), "testdata", "python", prog.script)
			t.Run(name+"/"+prog.script, func(t *testing.T) {
				s := openSession(t)
				truth := filepath.Join(t.TempDir(), "waits.jsonl")
				cmd := exec.Command(python, script, prog.gets, "0.03", "0.5", truth)
				cmd.Dir = t.TempDir()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				time.Sleep(200 * time.Millisecond)
				plans, err := s.Attach(cmd.Process.Pid)
				if err != nil {
					t.Fatal(err)
				}
				var py *PythonPlan
				for _, p := range plans {
					if p.Python != nil {
						py = p.Python
					}
				}
				if py == nil || py.Err != nil {
					t.Fatalf("interpreter plan %+v", py)
				}
				attached := monotonicNow() // the probes are in place: waits from here on are seen
				c, err := runFor(t, s, 20*time.Second)
				if !errors.Is(err, ErrTargetsExited) {
					t.Fatal(err)
				}
				var waits []events.Event
				for _, e := range c.evs {
					// The consumer is the main thread; the producer's
					// sleeps are waits too.
					if e.Kind == events.KindPyWait && e.TID == uint32(cmd.Process.Pid) {
						waits = append(waits, e)
					}
				}
				data, err := os.ReadFile(truth)
				if err != nil {
					t.Fatal(err)
				}
				matched, withNative, blocking := 0, 0, 0
				var seen, logged float64 // over the matched gets
				for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
					var w struct {
						Start uint64  `json:"t_start_ns"`
						End   uint64  `json:"t_end_ns"`
						Wait  float64 `json:"wait"`
					}
					json.Unmarshal([]byte(line), &w)
					if w.Wait < 0.005 || w.Start < attached {
						continue // the item was there already, or gpuprof was not yet
					}
					blocking++
					var got float64
					native := prog.native == ""
					for _, e := range waits {
						if e.Start < w.Start || e.End > w.End {
							continue
						}
						got += float64(e.End-e.Start) / 1e9
						native = native || e.Name == prog.native
						if !hasFrame(e.Frames, prog.file, prog.fn) || !hasFrame(e.Frames, prog.script, "consume") {
							t.Errorf("frames %+v, want %s's %s called from consume", e.Frames, prog.file, prog.fn)
						}
					}
					if got == 0 {
						continue
					}
					matched++
					seen, logged = seen+got, logged+w.Wait
					// Each get on its own within a looser bound: a wakeup
					// delayed on a loaded machine is the program's time,
					// not a wait's (CI: 31.3 ms of waits in a 33.9 ms get).
					if got < 0.8*prog.cover*w.Wait || got > w.Wait {
						t.Errorf("waits %.4fs in all, the program measured %.4fs around them", got, w.Wait)
					}
					if native {
						withNative++
					}
				}
				// On a loaded machine the attach may come late; of what came
				// after it, most must be seen.
				if matched < 3 || float64(matched) < 0.8*float64(blocking) {
					t.Fatalf("matched %d of %d blocking %ss of the program's log to gpuprof's %d waits", matched, blocking, prog.fn, len(waits))
				}
				if seen < prog.cover*logged {
					t.Errorf("waits %.4fs in all in the %d gets, the program measured %.4fs around them: under %.0f%%", seen, matched, logged, 100*prog.cover)
				}
				// The descriptor can be there already by the time it is
				// asked for, once the handshake has waited.
				if prog.native != "" && withNative < 3 {
					t.Errorf("%d of %d %ss waited in %s, want 3 or more", withNative, matched, prog.fn, prog.native)
				}
			})
		}
	}
}

// hasFrame reports whether a frame of function fn (qualified or not) in a
// file ending in file is among frames.
func hasFrame(frames []events.PyFrame, file, fn string) bool {
	for _, f := range frames {
		if strings.HasSuffix(f.File, file) && (f.Func == fn || strings.HasSuffix(f.Func, "."+fn)) {
			return true
		}
	}
	return false
}

// TestPythonLayouts checks the offsets table against each version's own
// headers, compiled with offsetof.
func TestPythonLayouts(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		testenv.Skip(t, "needs gcc to compile testdata/python/offsets.c")
	}
	src := filepath.Join(testenv.Root(), "testdata", "python", "offsets.c")
	for name, python := range testenv.Pythons(t) {
		if !strings.HasPrefix(name, "pyenv-") {
			continue
		}
		minor, _ := strconv.Atoi(strings.TrimPrefix(name, "pyenv-3."))
		include := filepath.Join(filepath.Dir(filepath.Dir(python)), "include", "python3."+strconv.Itoa(minor))
		bin := filepath.Join(t.TempDir(), "offsets")
		if out, err := exec.Command("gcc", "-I"+include, "-o", bin, src).CombinedOutput(); err != nil {
			t.Fatalf("%s: compile offsets.c: %v\n%s", name, err, out)
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatal(err)
		}
		want := pyLayouts[minor]
		v := reflect.ValueOf(want)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			field, val, _ := strings.Cut(line, " ")
			n, _ := strconv.ParseInt(val, 10, 64)
			if got := v.FieldByName(field); !got.IsValid() || got.Convert(reflect.TypeOf(int64(0))).Int() != n {
				t.Errorf("Python 3.%d: %s is %d in the headers, %v in pyLayouts", minor, field, n, got)
			}
		}
	}
}

// TestWholeGetsWatchOnlyWaitingThreads: where Queue.get's native anchors
// are not found, gpuprof's own whole gets put
// their watchpoints only on the threads seen waiting inside a get (a
// watched thread pays at every context switch), here the consumer's main
// thread and not the three threads waiting on an Event beside it, and
// time the gets once it is watched.
func TestWholeGetsWatchOnlyWaitingThreads(t *testing.T) {
	testenv.RequireRoot(t)
	python, ok := testenv.Pythons(t)["pyenv-3.12"]
	if !ok {
		testenv.Skip(t, "needs pyenv's 3.12")
	}
	u := wholeGetsProbe(t, "multiprocessing.queues:Queue.get")
	s := openSessionWith(t, u)
	// Queue.get's last native anchor, a C loads, is not there: the get
	// falls back to watchpoints once a thread is seen waiting in it.
	t.Setenv("MP_WAITS_PURE_PICKLE", "1")
	pid := startScript(t, python, "mp_waits.py", "400", "0.01", "0.3", filepath.Join(t.TempDir(), "waits.jsonl"), "3")
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	c, err := runFor(t, s, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	w := s.targets[pid].pyCalls[u.ID]
	s.mu.Unlock()
	if why := testenv.NoWatchpoints(t); why != "" {
		// Where no watchpoint traps, the get is given up once a thread
		// waits in it: no watchpoint left open, no register counted.
		if w == nil || len(w.events) > 0 || w.sites() > 0 || w.anchors != nil {
			t.Errorf("Queue.get with no watchpoint that traps: %+v, want it given up", w)
		}
		testenv.SkipNoWatchpoints(t, why)
	}
	if w == nil || w.fn == nil {
		t.Fatalf("Queue.get not watched: %+v", w)
	}
	if w.anchors != nil || w.anchorable {
		t.Fatalf("Queue.get timed by native anchors with pickle's Python loads: %+v", w)
	}
	if len(w.threads) != 1 || !w.threads[pid] {
		t.Errorf("threads watched %v, want the main thread %d only", w.threads, pid)
	}
	if len(w.events) != w.sites() {
		t.Errorf("%d watchpoints open, want %d: the main thread's", len(w.events), w.sites())
	}
	idle := map[uint32]bool{}
	for _, e := range c.evs {
		if e.Kind == events.KindPyWait && e.TID != uint32(pid) {
			idle[e.TID] = true
		}
	}
	if len(idle) < 3 {
		t.Errorf("waits seen on %d other threads, want the 3 idle ones: the test shows nothing", len(idle))
	}
	c2, err := runFor(t, s, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gets := 0
	for _, e := range c2.evs {
		if e.Kind == events.KindCall && e.API == u.ID && e.TID == uint32(pid) {
			gets++
		}
	}
	if gets < 50 {
		t.Errorf("%d gets timed in a second of ~100, want the watched thread's gets timed", gets)
	}
}

// TestPythonWaitsGoWithLaunchProbes: once told (SamplePythonWaits), a
// process's Python wait probes are detached and attached again with its
// launch probes, the markers saying so (Args[0] 1), but for those it is
// told to keep: the producer thread's sleeps go on being seen.
// KeepPythonWaits puts them all back for good.
func TestPythonWaitsGoWithLaunchProbes(t *testing.T) {
	s, pid, c, closes, stop := runQueueWaits(t, 400) // ~8 s
	time.Sleep(500 * time.Millisecond)
	keep := []string{"clock_nanosleep"}
	if s.sampling.SamplePythonWaits(pid, keep, false) {
		t.Fatal("Python waits sampled before the launches are")
	}
	const period, on = 600 * time.Millisecond, 150 * time.Millisecond
	s.sampling.SampleLaunches(pid, period, on)
	if !s.sampling.SamplePythonWaits(pid, keep, false) {
		t.Fatal("SamplePythonWaits: false")
	}
	time.Sleep(3 * period)
	if !s.sampling.KeepPythonWaits(pid) {
		t.Fatal("KeepPythonWaits: false")
	}
	kept := monotonicNow()
	time.Sleep(2 * period)
	stop()
	marks, waits := marksAndWaits(c.evs, pid) // the consumer's waits
	sleeps := producerSleeps(c.evs, pid)
	paused := pausedSpans(marks, closes, pid)
	// The producer sleeps ~20 ms at a time; a pause the probes' closes ate
	// into (a close waits for the kernel, longer under load: one pause was
	// 10 ms) may hold no sleep's start, so the kept probes are looked for
	// in the pauses of 60 ms or more, of which there must be one.
	const sleepsSeenIn = 60 * time.Millisecond
	long := 0
	for _, span := range paused {
		if n := countIn(waits, span); n > 0 {
			t.Errorf("%d waits began in a pause of the wait probes, %v after they were closed", n, offsetsIn(waits, span))
		}
		if time.Duration(span[1]-span[0]) < sleepsSeenIn {
			continue
		}
		long++
		if countIn(sleeps, span) == 0 {
			t.Errorf("no sleep seen in a pause of the wait probes (%v): they were to be kept", time.Duration(span[1]-span[0]))
		}
	}
	if long == 0 {
		t.Errorf("no pause of the wait probes of %v or more in %d: the kept probes were not checked", sleepsSeenIn, len(paused))
	}
	if len(paused) < 2 {
		t.Fatalf("%d pauses of the wait probes in %d markers, want 2 or more", len(paused), len(marks))
	}
	if last := marks[len(marks)-1]; last.Args[0] != 0 {
		t.Errorf("last marker %+v: want the waits probed for good (Args[0] 0)", last)
	}
	seenThroughout(t, waits, kept, 40, on)
}

// inOffPhase starts queue_waits.py (a consumer blocking ~20 ms a get, a
// producer sleeping between puts), attaches, runs the session, and samples
// its launches 100 ms in every 20 s; it returns a second later, in the off
// phase, with the pauses' closes recorded and what stops the session.
func inOffPhase(t *testing.T) (s *Session, pid int, c *collector, closes *pauseCloses, stop func()) {
	t.Helper()
	s, pid, c, closes, stop = runQueueWaits(t, 300)
	s.sampling.SampleLaunches(pid, 20*time.Second, 100*time.Millisecond)
	time.Sleep(time.Second)
	return s, pid, c, closes, stop
}

// runQueueWaits starts queue_waits.py for gets gets of ~20 ms (pyenv's
// 3.12), attaches and runs a session on it, its pauses' closes recorded;
// stop ends the session.
func runQueueWaits(t *testing.T, gets int) (s *Session, pid int, c *collector, closes *pauseCloses, stop func()) {
	t.Helper()
	testenv.RequireRoot(t)
	python, ok := testenv.Pythons(t)["pyenv-3.12"]
	if !ok {
		testenv.Skip(t, "needs pyenv's 3.12")
	}
	s = openSession(t)
	closes = watchPauses(s)
	pid = startScript(t, python, "queue_waits.py", strconv.Itoa(gets), "0.02", "0.3", filepath.Join(t.TempDir(), "waits.jsonl"))
	if _, err := s.Attach(pid); err != nil {
		t.Fatal(err)
	}
	c = &collector{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, c.sink) }()
	t.Cleanup(cancel)
	return s, pid, c, closes, func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestPythonWaitsPausedAtOnceInOffPhase: waits sampled while the launch
// probes are off go at once, with a marker, not at the end of the next on
// phase (here 20 s away).
func TestPythonWaitsPausedAtOnceInOffPhase(t *testing.T) {
	s, pid, c, closes, stop := inOffPhase(t)
	asked := monotonicNow()
	if !s.sampling.SamplePythonWaits(pid, []string{"clock_nanosleep"}, false) {
		t.Fatal("SamplePythonWaits: false")
	}
	time.Sleep(2 * time.Second)
	end := monotonicNow()
	stop()
	marks, waits := marksAndWaits(c.evs, pid)
	i := slices.IndexFunc(marks, func(m events.Event) bool { return m.Out == 0 && m.Args[0] == 1 })
	if i < 0 {
		t.Fatalf("no marker of the waits gated in %+v", marks)
	}
	if m := marks[i]; m.End < asked || time.Duration(m.End-asked) > 100*time.Millisecond {
		t.Fatalf("waits gated %v after they were sampled, want at once", time.Duration(int64(m.End)-int64(asked)))
	}
	closed := closes.first(closes.at, pid, marks[i].End, end)
	if closed == 0 {
		t.Fatalf("the wait probes were not closed in the %v after their marker", time.Duration(end-marks[i].End))
	}
	span := [2]uint64{closed, end}
	if n := countIn(waits, span); n > 0 {
		t.Errorf("%d waits began after the wait probes were closed, %v after", n, offsetsIn(waits, span))
	}
	if n := countIn(producerSleeps(c.evs, pid), span); n < 20 {
		t.Errorf("%d sleeps seen after the pause, want 20 or more: they were to be kept", n)
	}
	if countIn(waits, [2]uint64{asked - uint64(time.Second/2), asked}) == 0 {
		t.Error("no wait seen before the pause: the test shows nothing")
	}
}

// TestKeepMorePythonWaits: a wait function a step turned out to need is
// kept attached with those kept before, the rest still paused.
func TestKeepMorePythonWaits(t *testing.T) {
	s, pid, c, closes, stop := inOffPhase(t)
	if !s.sampling.SamplePythonWaits(pid, []string{"clock_nanosleep"}, false) {
		t.Fatal("SamplePythonWaits: false")
	}
	paused := monotonicNow()
	time.Sleep(time.Second)
	c.mu.Lock()
	var names []string // the consumer's wait functions, seen before the pause
	for _, e := range c.evs {
		if e.Kind == events.KindPyWait && e.TID == uint32(pid) && e.End < paused && !slices.Contains(names, e.Name) {
			names = append(names, e.Name)
		}
	}
	c.mu.Unlock()
	if len(names) == 0 {
		t.Fatal("no wait of the consumer seen before the pause")
	}
	more := monotonicNow()
	if !s.sampling.KeepMorePythonWaits(pid, names, false) {
		t.Fatal("KeepMorePythonWaits: false")
	}
	kept := monotonicNow() // attached again once it returns: they were paused
	time.Sleep(1500 * time.Millisecond)
	end := monotonicNow()
	stop()
	marks, waits := marksAndWaits(c.evs, pid)
	closed := closes.first(closes.at, pid, paused-uint64(100*time.Millisecond), more)
	if closed == 0 {
		t.Fatalf("the wait probes were not closed in the %v after they were paused", time.Duration(more-paused))
	}
	if n := countIn(waits, [2]uint64{closed, more}); n > 0 {
		t.Errorf("%d waits of the consumer (%v) began while they were paused", n, names)
	}
	if n := countIn(waits, [2]uint64{kept, end}); n < 20 {
		t.Errorf("%d waits of the consumer (%v) seen once kept, want 20 or more", n, names)
	}
	for _, m := range marks {
		if m.End > paused && m.Args[0] != 1 {
			t.Errorf("marker %+v after the pause: want the waits still gated (Args[0] 1)", m)
		}
	}
}

// marksAndWaits are pid's launch-probe markers, and the starts of its
// main thread's Python waits.
func marksAndWaits(evs []events.Event, pid int) (marks []events.Event, waits []uint64) {
	for _, e := range evs {
		switch {
		case e.Kind == events.KindLaunchProbes && e.PID == uint32(pid):
			marks = append(marks, e)
		case e.Kind == events.KindPyWait && e.TID == uint32(pid):
			waits = append(waits, e.Start)
		}
	}
	return marks, waits
}

// producerSleeps are the starts of queue_waits.py's producer's sleeps
// (the threads of pid but its main one), which the tests keep probed.
func producerSleeps(evs []events.Event, pid int) (starts []uint64) {
	for _, e := range evs {
		if e.Kind == events.KindPyWait && e.TID != uint32(pid) && e.Name == "clock_nanosleep" {
			starts = append(starts, e.Start)
		}
	}
	return starts
}

// pauseCloses are the times each pause of a process's Python wait probes
// closed the last of them (Session.pyPaused). A pause begins there, not
// at its marker: the links close in the background, for as long as the
// host's load makes it (over 250 ms at times in CI).
//
// A pause ends where the probes begin to be attached again, not at the
// next marker either: that is stamped once they are all in place, and
// under load attaching them took over 260 ms, while they reported.
type pauseCloses struct {
	mu      sync.Mutex
	at      map[int][]uint64 // by process
	resumed map[int][]uint64 // by process: when attaching began
}

// watchPauses records s's pauses, from its debug lines; before s runs.
func watchPauses(s *Session) *pauseCloses {
	p := &pauseCloses{at: map[int][]uint64{}, resumed: map[int][]uint64{}}
	s.cfg.Log = slog.New(pauseLog{p: p, next: s.cfg.Log.Handler()})
	return p
}

// pauseLog hears a session's lines that say when its Python wait probes
// were paused and began to be attached again, and hands every line on.
type pauseLog struct {
	p    *pauseCloses
	next slog.Handler
}

func (h pauseLog) Enabled(context.Context, slog.Level) bool { return true }

func (h pauseLog) Handle(ctx context.Context, r slog.Record) error {
	var pid int
	var at uint64
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "pid":
			pid = int(a.Value.Int64())
		case "at":
			at = a.Value.Uint64()
		}
		return true
	})
	h.p.mu.Lock()
	switch r.Message {
	case logPaused:
		h.p.at[pid] = append(h.p.at[pid], at)
	case logResuming:
		h.p.resumed[pid] = append(h.p.resumed[pid], at)
	}
	h.p.mu.Unlock()
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h pauseLog) WithAttrs(as []slog.Attr) slog.Handler {
	return pauseLog{p: h.p, next: h.next.WithAttrs(as)}
}

func (h pauseLog) WithGroup(g string) slog.Handler {
	return pauseLog{p: h.p, next: h.next.WithGroup(g)}
}

// first is the first of times in [from, until); 0 if none.
func (p *pauseCloses) first(times map[int][]uint64, pid int, from, until uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range times[pid] {
		if at >= from && at < until {
			return at
		}
	}
	return 0
}

// pausedSpans are the stretches in which pid's Python wait probes were
// paused: from the close that followed an off marker carrying them
// (Args[0] 1) to the next marker, or to where attaching them again began
// if that was before it. A pause whose close came only after that has
// none.
func pausedSpans(marks []events.Event, closes *pauseCloses, pid int) [][2]uint64 {
	var out [][2]uint64
	for i, m := range marks {
		if m.Out != 0 || m.Args[0] != 1 || i+1 == len(marks) {
			continue
		}
		end := marks[i+1].End
		if at := closes.first(closes.resumed, pid, m.End, end); at != 0 {
			end = at
		}
		if at := closes.first(closes.at, pid, m.End, end); at != 0 {
			out = append(out, [2]uint64{at, end})
		}
	}
	return out
}

// countIn counts the times in [span[0], span[1]).
func countIn(times []uint64, span [2]uint64) int {
	n := 0
	for _, x := range times {
		if x >= span[0] && x < span[1] {
			n++
		}
	}
	return n
}

// offsetsIn are the times in span as offsets from its start: for a
// failure's message.
func offsetsIn(times []uint64, span [2]uint64) (out []time.Duration) {
	for _, x := range times {
		if x >= span[0] && x < span[1] {
			out = append(out, time.Duration(x-span[0]))
		}
	}
	return out
}

// seenThroughout checks that waits were seen all along after from: at
// least least of them, none more than gap apart.
func seenThroughout(t *testing.T, starts []uint64, from uint64, least int, gap time.Duration) {
	t.Helper()
	var after []uint64
	for _, w := range starts {
		if w > from {
			after = append(after, w)
		}
	}
	slices.Sort(after)
	if len(after) < least {
		t.Fatalf("%d waits seen after the probes were attached for good, want %d or more", len(after), least)
	}
	for i := 1; i < len(after); i++ {
		if d := time.Duration(after[i] - after[i-1]); d > gap {
			t.Errorf("%v without a wait after the probes were attached for good", d)
		}
	}
}

// startScript starts one of testdata/python's scripts, killed at the
// test's end, and returns its PID once it has had 200 ms to start.
func startScript(t *testing.T, python, script string, args ...string) int {
	t.Helper()
	cmd := exec.Command(python, append([]string{filepath.Join(testenv.Root(), "testdata", "python", script)}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	time.Sleep(200 * time.Millisecond)
	return cmd.Process.Pid
}
