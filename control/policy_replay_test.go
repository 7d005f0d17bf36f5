package control

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

// boundaryNote is the note the loop makes as a boundary is found or moves.
var boundaryNote = regexp.MustCompile(`^PID (\d+): step boundary: .+ on thread (\d+) \(`)

// learnNote is the note the loop makes as a process's launches are
// counted part of the time while its boundary is learned.
var learnNote = regexp.MustCompile(`^PID (\d+): ~\d+ launches and ~\d+ Python waits and kernel lookups a second, each probed would cost ~[\d.]+% of its time: launches, waits and lookups probed \S+ in every \S+, the phases doubling each cycle, while its steps are learned$`)

// TestReplayTellsProbes replays every trace under attach's policy and
// holds what the probes were told to what the steps showed:
//   - each boundary noted is told at once to SetStepThread, its thread
//     the boundary's, and the last told is where the process's boundary
//     ended; a process whose boundary was never found is told nothing;
//   - SampleLaunches once a process, 1 s in 40, after its step thread,
//     unless its boundary is a device-to-device copy, and NarrowRecords
//     once unless it is an event record (none of these traces' found
//     boundaries is either: TestReplayBoundaryKinds names them);
//   - FitLaunchPhases only with the median of the latest 8 wall times of
//     the process's steps, each more than a quarter over the last told;
//   - the wait keeper samples a process's waits once, then only adds to
//     what it keeps, and brings all back at most once, last; what it
//     keeps covers what the steps were last found to need.
func TestReplayTellsProbes(t *testing.T) {
	found := 0
	for _, tr := range traces(t) {
		cfg := configFor(t, tr)
		l, f := replay(t, tr, cfg, true)
		if f.procs != len(l.PIDs()) {
			t.Errorf("%s: told of %d processes, %d seen", tr.name, f.procs, len(l.PIDs()))
		}
		checkBoundariesTold(t, tr.name, f)
		for _, pid := range l.PIDs() {
			p := l.procs[pid]
			a, ok := p.corr.Boundary()
			if !ok || a.TID == 0 {
				for _, c := range f.calls {
					if c.pid == int(pid) && c.op != "step" && c.op != "note" && c.op != "added" {
						t.Errorf("%s: PID %d, no boundary found, told %v", tr.name, pid, c)
					}
				}
				continue
			}
			found++
			name := fmt.Sprintf("%s: PID %d", tr.name, pid)
			if a.TID != p.boundary.TID || a.Calls != p.boundary.Calls {
				t.Errorf("%s: boundary %s on %d, last told %s on %d", name, a.Calls, a.TID, p.boundary.Calls, p.boundary.TID)
			}
			threads := f.of("thread", int(pid))
			if len(threads) == 0 || threads[len(threads)-1].tid != a.TID {
				t.Errorf("%s: step threads told %v, the boundary's %d last", name, threads, a.TID)
			}
			// What planBoundary's table says, held to the calls made.
			wantLaunches, wantNarrow := !matchesDeviceCopies(a.CallKind()), !matchesRecords(a.CallKind())
			period, on := cfg.LaunchCycle()
			ls := f.of("launches", int(pid))
			learned := checkLearned(t, name, cfg, f, int(pid))
			switch {
			case !wantLaunches && learned && (len(ls) != 1 || ls[0].on < ls[0].period):
				t.Errorf("%s: launches sampled %v, its boundary %s: want every launch counted again", name, ls, a.Calls)
			case !wantLaunches && !learned && len(ls) > 0:
				t.Errorf("%s: launches sampled %v, its boundary %s", name, ls, a.Calls)
			case wantLaunches && (len(ls) != 1 || ls[0].period != period || ls[0].on != on):
				t.Errorf("%s: launches sampled %v, want once, %v in %v", name, ls, on, period)
			case wantLaunches && slices.IndexFunc(f.calls, func(c call) bool { return c.op == "launches" && c.pid == int(pid) }) <
				slices.IndexFunc(f.calls, func(c call) bool { return c.op == "thread" && c.pid == int(pid) }):
				t.Errorf("%s: launches sampled before its step thread was told", name)
			}
			wantRecords := 0
			if wantNarrow {
				wantRecords = 1
			}
			if rs := f.of("records", int(pid)); len(rs) != wantRecords {
				t.Errorf("%s: records narrowed %d times, its boundary %s", name, len(rs), a.Calls)
			}
			checkFits(t, name, cfg.StepTimes, f, int(pid))
			checkWaitsKept(t, name, f, p)
		}
	}
	if found == 0 {
		t.Fatal("no trace's boundary found")
	}
}

// checkLearned: a process's launches are thinned for its learning at
// most once, before its boundary is found (its step thread told), to the
// cycle its launch rate (in the note) gives; it says whether they were.
func checkLearned(t *testing.T, name string, cfg Config, f *fakeProbes, pid int) bool {
	t.Helper()
	learns := f.of("learn", pid)
	if len(learns) == 0 {
		return false
	}
	i := slices.IndexFunc(f.calls, func(c call) bool { return c.op == "learn" && c.pid == pid })
	if th := slices.IndexFunc(f.calls, func(c call) bool { return c.op == "thread" && c.pid == pid }); len(learns) > 1 || th >= 0 && th < i {
		t.Errorf("%s: learning thinned %v, after its step thread was told or more than once", name, learns)
	}
	var r probeRate
	if _, err := fmt.Sscanf(f.calls[i+1].note, fmt.Sprintf("PID %d: ~%%f launches and ~%%f Python waits", pid), &r.launches, &r.reports); err != nil {
		t.Errorf("%s: note %q after LearnLaunches: %v", name, f.calls[i+1].note, err)
	}
	// The note rounds the rates: the cycle is held to within their rounding.
	lo, on, ok := cfg.learnCycle(probeRate{r.launches - 0.5, r.reports - 0.5})
	hi, _, _ := cfg.learnCycle(probeRate{r.launches + 0.5, r.reports + 0.5})
	if c := learns[0]; !ok || c.on != on || c.period < lo || c.period > hi {
		t.Errorf("%s: learning thinned to %v in %v at ~%.0f launches and ~%.0f reports a second; want %v in %v..%v", name, c.on, c.period, r.launches, r.reports, on, lo, hi)
	}
	return true
}

// checkBoundariesTold: each boundary noted is told next to SetStepThread.
func checkBoundariesTold(t *testing.T, name string, f *fakeProbes) {
	t.Helper()
	for i, c := range f.calls {
		if c.op != "note" {
			continue
		}
		if m := learnNote.FindStringSubmatch(c.note); m != nil {
			pid, _ := strconv.Atoi(m[1])
			if i == 0 || f.calls[i-1].op != "learn" || f.calls[i-1].pid != pid {
				t.Errorf("%s: %q not after its LearnLaunches", name, c.note)
			}
			continue
		}
		m := boundaryNote.FindStringSubmatch(c.note)
		if m == nil {
			t.Errorf("%s: note %q", name, c.note)
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		tid, _ := strconv.ParseUint(m[2], 10, 32)
		if want := (call{op: "thread", pid: pid, tid: uint32(tid)}); i+1 >= len(f.calls) || f.calls[i+1].String() != want.String() {
			t.Errorf("%s: %q not followed by its step thread", name, c.note)
		}
	}
}

// checkFits: each step time told pid's launch phases is the median wall
// time of its latest steps as they were cut (the steps the same event cut,
// told to the output just after, included), once there were enough, and
// grew by more than a quarter.
func checkFits(t *testing.T, name string, cfg StepTimes, f *fakeProbes, pid int) {
	t.Helper()
	var walls []float64 // pid's steps' wall times so far
	var last time.Duration
	pending := -1 // the call telling a step time, until the event's steps are in
	steps := 0
	for i, c := range f.calls {
		switch {
		case c.op == "step":
			if s := f.steps[steps]; c.pid == pid && s.WallTime > 0 {
				walls = append(walls, s.WallTime)
			}
			steps++
		case c.op == "added" && pending >= 0:
			want := median(walls[max(0, len(walls)-cfg.Window):])
			if told := f.calls[pending].step; len(walls) < cfg.Min || told != want {
				t.Errorf("%s: launch phases told %v after %d steps, their median %v", name, told, len(walls), want)
			}
			pending = -1
		case c.op == "fit" && c.pid == pid:
			if c.step <= last+last/4 {
				t.Errorf("%s: launch phases told %v after %v: not a quarter longer", name, c.step, last)
			}
			last, pending = c.step, i
		}
	}
}

func isWaitCall(op string) bool { return op == "sample" || op == "more" || op == "all" }

func median(walls []float64) time.Duration {
	if len(walls) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(walls))
	return time.Duration(sorted[len(sorted)/2] * float64(time.Second))
}

// checkWaitsKept: the wait keeper's calls of a process follow its needs.
func checkWaitsKept(t *testing.T, name string, f *fakeProbes, p *proc) {
	t.Helper()
	var kept WaitProbes
	sampled, all := false, false
	for _, c := range f.calls {
		if c.pid != int(p.boundary.PID) || !isWaitCall(c.op) {
			continue
		}
		now := WaitProbes{Funcs: c.keep, Writes: c.writes}
		switch {
		case all:
			t.Errorf("%s: %v after all were kept", name, c)
		case c.op == "sample" && sampled, c.op != "sample" && !sampled:
			t.Errorf("%s: %v: sampled once, first", name, c)
		case c.op == "more" && (!now.Covers(kept) || now.Equal(kept)):
			t.Errorf("%s: kept %+v, then %+v", name, kept, now)
		case c.op == "all":
			all = true
		}
		sampled, kept = true, now
	}
	if sampled && !all && p.waitsTold && !kept.Covers(p.waitNeeds) {
		t.Errorf("%s: keeps %+v, its steps need %+v", name, kept, p.waitNeeds)
	}
}

// TestReplayedWaitNeeds replays the sampled H200 trace and holds what each
// process's steps were found to need of the Python wait probes, and what
// the wait keeper kept: the ranks nothing (every wait of theirs is inside
// a whole get), the engine its sleeps and blocked puts, and never the
// writes. Its step thread's buffered log flushes once in ~180 iterations;
// one step whose lead-in ended at such a write made the writes needed,
// and on the H200 host the engine then kept them for good (~760 a second
// on the thread answering the ranks' gets).
func TestReplayedWaitNeeds(t *testing.T) {
	tr := trace(t, "h200x2-ranks/engine-ddp-two-ranks-sampled")
	l, f := replay(t, tr, configFor(t, tr), true)
	want := map[uint32]string{704: "[]", 705: "[]", 706: "[clock_nanosleep sem_timedwait]"} // the ranks, the engine
	for pid, funcs := range want {
		p := l.procs[pid]
		if p == nil || !p.waitsTold {
			t.Errorf("PID %d: its steps' needs never known", pid)
			continue
		}
		if got := fmt.Sprint(p.waitNeeds.Funcs); got != funcs || p.waitNeeds.Writes || p.waitNeeds.All {
			t.Errorf("PID %d: needs %+v, want %s", pid, p.waitNeeds, funcs)
		}
		var kept []string
		for _, c := range f.calls {
			if c.pid == int(pid) && isWaitCall(c.op) {
				kept = append(kept, c.String())
			}
		}
		if len(kept) == 0 || kept[len(kept)-1] != fmt.Sprintf("sample %d %s false", pid, funcs) &&
			kept[len(kept)-1] != fmt.Sprintf("more %d %s false", pid, funcs) {
			t.Errorf("PID %d: wait probes kept %q; want %s last, no writes", pid, kept, funcs)
		}
	}
}

// TestReplayBoundaryKinds replays a spec pipeline trace (its loop makes
// device-to-device copies and event records each step) with the boundary
// named and the policy changed: a device-to-device copy boundary, or
// copies of any direction, keeps every launch counted; an event record
// boundary keeps the records probed at their functions; a duty of 1 counts
// every launch and record sites off narrows none.
func TestReplayBoundaryKinds(t *testing.T) {
	tr := trace(t, "h200-spec-pipeline/balanced")
	for _, tc := range []struct {
		name             string
		edit             func(*Config)
		launches, narrow bool
	}{
		{"found", func(*Config) {}, true, true},
		{"d2d copy", func(c *Config) { c.Correlate.Boundary = "cudaMemcpyAsync:d2d" }, false, true},
		{"copy, any direction", func(c *Config) { c.Correlate.Boundary = "cudaMemcpyAsync" }, false, true},
		{"event record", func(c *Config) { c.Correlate.Boundary = "cudaEventRecordWithFlags" }, true, false},
		{"every launch", func(c *Config) { c.LaunchDuty = 1 }, false, true},
		{"record sites off", func(c *Config) { c.RecordSites = false }, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := configFor(t, tr)
			tc.edit(&cfg)
			l, f := replay(t, tr, cfg, true)
			n := 0
			for _, pid := range l.PIDs() {
				a, ok := l.procs[pid].corr.Boundary()
				if !ok || a.TID == 0 {
					continue
				}
				n++
				ls := f.of("launches", int(pid))
				if len(f.of("learn", int(pid))) > 0 && len(ls) == 1 && ls[0].on >= ls[0].period {
					ls = nil // every launch counted again, after the learning
				}
				if got := len(ls) == 1; got != tc.launches {
					t.Errorf("PID %d, boundary %s: launches sampled %v, want %v", pid, a.Calls, f.of("launches", int(pid)), tc.launches)
				}
				if got := len(f.of("records", int(pid))) == 1; got != tc.narrow {
					t.Errorf("PID %d, boundary %s: records narrowed %v, want %v", pid, a.Calls, got, tc.narrow)
				}
				if th := f.of("thread", int(pid)); len(th) == 0 || th[len(th)-1].tid != a.TID {
					t.Errorf("PID %d: step threads told %v, want %d last", pid, th, a.TID)
				}
			}
			if n == 0 {
				t.Fatal("no boundary found")
			}
		})
	}
}
