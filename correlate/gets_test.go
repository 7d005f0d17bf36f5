package correlate

import (
	"fmt"
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

// wholeGetAPI is the whole gets' user probe in these tests, and
// wholeGetCfg its role, as attach gives it.
const wholeGetAPI = 0x8000

var wholeGetCfg = Config{User: map[uint16]UserProbe{wholeGetAPI: {Role: events.RoleGet, Name: "multiprocessing.queues:Queue.get"}}}

// getAndTrain ends a whole get begun at start, then trains a step: a copy
// in, launches (n of them; none: idle instead) and the sync that ends it.
func (tr *thread) getAndTrain(t *testing.T, start uint64, launches int) {
	tr.evs = append(tr.evs, events.Event{Kind: events.KindCall, API: wholeGetAPI, PID: tr.pid, TID: tr.tid, Start: start, End: tr.t})
	tr.idle(300 * us)
	tr.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 1<<20, 1, 0)
	if launches > 0 {
		tr.launch(launches, 10*us)
	} else {
		tr.idle(300 * us)
	}
	tr.call(t, "cudaStreamSynchronize", ms, 0)
}

// TestWholeGetTakesItsWaitsKind: a whole get (--probe get=..., attach's
// whole multiprocessing gets) is the kind of wait the waits inside it are:
// for a sample pool, dispatch wait, the unpickling after the block
// included, and so is a later get that did not block; for a DataLoader's
// batches, data, never dispatch; on a thread whose gets never blocked,
// no wait at all, and never a step boundary.
func TestWholeGetTakesItsWaitsKind(t *testing.T) {
	pool := []events.PyFrame{{Func: "Connection.recv_bytes", File: "/usr/lib/python3.12/multiprocessing/connection.py"},
		{Func: "Queue.get", File: "/usr/lib/python3.12/multiprocessing/queues.py"}, {Func: "train", File: "train.py"}}
	loader := []events.PyFrame{{Func: "Connection.poll", File: "/usr/lib/python3.12/multiprocessing/connection.py"},
		{Func: "Queue.get", File: "/usr/lib/python3.12/multiprocessing/queues.py"},
		{Func: "_MultiProcessingDataLoaderIter._try_get_data", File: "/site-packages/torch/utils/data/dataloader.py"}}
	for _, tc := range []struct {
		name           string
		frames         []events.PyFrame // nil: the gets never block
		blockFrom      int              // the first step whose get blocks
		dispatch, data float64          // per step (after the first blocking get)
	}{
		{"pool", pool, 3, 4e-3 + 70e-6, 0},
		{"dataloader", loader, 3, 0, 4e-3 + 70e-6},
		{"never blocks", nil, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newThread(100, 101, 0)
			for i := range 40 {
				start := tr.t
				tr.idle(30 * us) // the get's Python before it blocks
				blocks := tc.frames != nil && i >= tc.blockFrom && i%2 == 1
				if blocks {
					tr.evs = append(tr.evs, events.Event{Kind: events.KindPyWait, PID: 100, TID: 101, Start: tr.t, End: tr.t + 4*ms,
						Frames: tc.frames})
					tr.t += 4 * ms
				}
				tr.idle(40 * us) // and after: unpickling what it got
				tr.getAndTrain(t, start, 30)
			}
			c, steps := run(t, wholeGetCfg, tr.evs)
			if a, _ := c.Boundary(); a.Calls == "user probe" || len(steps) != 39 {
				t.Fatalf("boundary %+v, %d steps", a, len(steps))
			}
			for _, s := range steps {
				// Step k begins with iteration k+1's get.
				if int(s.Index)+1 < tc.blockFrom {
					continue // the gets before the first that blocked: no kind known yet
				}
				blocked := tc.frames != nil && s.Index%2 == 0
				dispatch, data := 70e-6, 0.0
				if tc.data > 0 {
					dispatch, data = 0, 70e-6
				}
				if blocked {
					dispatch, data = tc.dispatch, tc.data
				}
				if tc.frames == nil {
					dispatch, data = 0, 0
				}
				within(t, "dispatch_wait", s.DispatchWait, dispatch, 1e-9)
				if data > 0 && s.DataTime < data {
					t.Errorf("step %d: data_time %.6f, less than its get's %.6f", s.Index, s.DataTime, data)
				}
			}
		})
	}
}

// TestWholeGetKindFromAWaitBeforeTheWatch: gpuprof starts timing a
// thread's gets once it sees it wait inside one, so that first wait comes
// before any whole get; where the pool then stays full, none of the gets
// timed blocks. They are the kind of wait the one before was (here,
// dispatch), in the 3.11+ frames' names and 3.10's alike.
func TestWholeGetKindFromAWaitBeforeTheWatch(t *testing.T) {
	for _, fn := range []string{"Queue.get", "get"} {
		t.Run(fn, func(t *testing.T) {
			tr := newThread(100, 101, 0)
			tr.evs = append(tr.evs, events.Event{Kind: events.KindPyWait, PID: 100, TID: 101, Start: tr.t, End: tr.t + 4*ms,
				Frames: []events.PyFrame{{Func: "Connection.recv_bytes", File: "/usr/lib/python3.10/multiprocessing/connection.py"},
					{Func: fn, File: "/usr/lib/python3.10/multiprocessing/queues.py"}, {Func: "train", File: "train.py"}}})
			tr.t += 5 * ms
			for range 40 {
				start := tr.t
				tr.idle(70 * us) // a get that does not block
				tr.getAndTrain(t, start, 30)
			}
			_, steps := run(t, wholeGetCfg, tr.evs)
			if len(steps) != 39 {
				t.Fatalf("%d steps, want 39", len(steps))
			}
			for _, s := range steps {
				within(t, "dispatch_wait", s.DispatchWait, 70e-6, 1e-9)
			}
		})
	}
}

// TestWaitsGoWithLaunchProbes: a loop whose every wait lies inside the
// whole gets that open its steps needs none of the Python wait probes
// (StepWaits), which may then go with the launch probes. Steps
// while they are off keep their dispatch wait (the gets time it) and lose
// only the kinds of wait. A wait outside the gets (a sleep before the get)
// needs its function's probe.
func TestWaitsGoWithLaunchProbes(t *testing.T) {
	pool := []events.PyFrame{{Func: "Connection.recv_bytes", File: "/usr/lib/python3.12/multiprocessing/connection.py"},
		{Func: "Queue.get", File: "/usr/lib/python3.12/multiprocessing/queues.py"}, {Func: "train", File: "train.py"}}
	sleep := []events.PyFrame{{Func: "train", File: "train.py"}}
	for _, tc := range []struct {
		name    string
		sleeps  int // the steps before this one sleep before their get
		needs   string
		offFrom int // the marker that pauses the waits (with the launches), before this iteration
		writes  int // a logging write begins every writes-th step
	}{
		{"waits inside gets", 0, "[] false true", 40, 0},
		{"a sleep outside", 70, "[clock_nanosleep] false true", 0, 0},
		// Only the latest steps count: a get is watched from its thread's
		// first wait in it on, and the steps before need what it covers.
		{"a sleep outside the first steps", 20, "[] false true", 0, 0},
		{"a loop logging each step", 0, "[] true true", 0, 1},
		{"a loop logging every 4th step", 0, "[] true true", 0, 4},
		// A print now and then: its steps' lead-in is not worth a probe
		// on every write of every thread.
		{"a print in one step of 20", 0, "[] false true", 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newThread(100, 101, 0)
			tr.evs = append(tr.evs, events.Event{Kind: events.KindPyAttached, PID: 100})
			waitsOn := true
			var offAt, onAt uint64
			for i := range 70 {
				if tc.offFrom > 0 && (i == tc.offFrom || i == tc.offFrom+10) {
					waitsOn = i != tc.offFrom
					mark := events.Event{Kind: events.KindLaunchProbes, PID: 100, Start: tr.t, End: tr.t, Args: [5]uint64{1}}
					if waitsOn {
						mark.Out, onAt = 1, tr.t
					} else {
						offAt = tr.t
					}
					tr.evs = append(tr.evs, mark)
				}
				if i < tc.sleeps {
					tr.evs = append(tr.evs, events.Event{Kind: events.KindPyWait, PID: 100, TID: 101, Start: tr.t, End: tr.t + 200*us,
						Frames: sleep, Name: "clock_nanosleep"})
					tr.t += 200 * us
				}
				if tc.writes > 0 && i%tc.writes == 0 {
					tr.idle(20 * us)
					tr.evs = append(tr.evs, events.Event{Kind: events.KindWrite, PID: 100, TID: 101, Start: tr.t, End: tr.t + 5*us})
					tr.t += 5 * us
				}
				start := tr.t
				tr.idle(30 * us)
				if waitsOn {
					tr.evs = append(tr.evs, events.Event{Kind: events.KindPyWait, PID: 100, TID: 101, Start: tr.t, End: tr.t + 2*ms, Frames: pool})
				}
				tr.idle(2*ms + 40*us)
				launches := 0
				if waitsOn {
					launches = 30
				}
				tr.getAndTrain(t, start, launches)
			}
			c, steps := run(t, wholeGetCfg, tr.evs)
			need, ok := c.StepWaits()
			if got := fmt.Sprint(need.Funcs, need.Writes, ok); got != tc.needs {
				t.Fatalf("StepWaits %s, want %s", got, tc.needs)
			}
			if len(steps) < 60 {
				t.Fatalf("%d steps", len(steps))
			}
			uncounted := 0
			for _, s := range steps {
				// A step is measured once the next one's work begins: one
				// that ended just before the pause may count as paused too,
				// never the other way round.
				paused := offAt != 0 && s.EndNS > offAt && s.StartNS < onAt
				if !s.WaitKindsCounted {
					uncounted++
				}
				if paused && s.WaitKindsCounted {
					t.Errorf("step %d (%d-%d, waits paused %d-%d): wait kinds counted", s.Index, s.StartNS, s.EndNS, offAt, onAt)
				}
				if tc.sleeps == 0 {
					within(t, "dispatch_wait", s.DispatchWait, 2.07e-3, 1e-9)
				}
			}
			if want := 10 * min(tc.offFrom, 1); uncounted < want || uncounted > want+3 {
				t.Errorf("%d steps without their kinds of wait, want the %d of the pause and at most 3 more", uncounted, want)
			}
		})
	}
}

// TestGetsThatFindTheirSampleAreTakes: a controller that polls qsize()
// and then takes its batch with get_nowait: each get's pipe poll returns
// at once and the read after it finds the item. Those gets are taking
// samples that were there, data time, however the thread's earlier get
// waited; a get(timeout=...) whose poll blocks is a wait.
func TestGetsThatFindTheirSampleAreTakes(t *testing.T) {
	conn := "/usr/lib/python3.12/multiprocessing/connection.py"
	queues := "/usr/lib/python3.12/multiprocessing/queues.py"
	poll := []events.PyFrame{{Func: "_PollLikeSelector.select", File: "/usr/lib/python3.12/selectors.py"},
		{Func: "Connection._poll", File: conn}, {Func: "_ConnectionBase.poll", File: conn}, {Func: "Queue.get", File: queues},
		{Func: "controller", File: "train.py"}}
	read := []events.PyFrame{{Func: "Connection._recv", File: conn}, {Func: "_ConnectionBase.recv_bytes", File: conn},
		{Func: "Queue.get", File: queues}, {Func: "Queue.get_nowait", File: queues}, {Func: "controller", File: "train.py"}}
	blocked := []events.PyFrame{{Func: "Connection.recv_bytes", File: conn}, {Func: "Queue.get", File: queues},
		{Func: "controller", File: "train.py"}}
	tr := newThread(100, 101, 0)
	var timed []bool // steps whose get blocked in its poll
	for i := range 60 {
		start := tr.t
		tr.idle(30 * us)
		switch {
		case i == 2: // a blocking get that waited: the thread's gets are waits
			tr.pyWait(4*ms, blocked)
		case i%10 == 7: // get(timeout=...): its poll blocks for the sample
			tr.pyWait(3*ms, poll)
		default: // get_nowait: the poll returns at once, the read finds the item
			tr.pyWait(15*us, poll)
			tr.idle(10 * us)
			tr.pyWait(8*us, read)
		}
		timed = append(timed, i == 2 || i%10 == 7)
		tr.idle(40 * us)
		tr.getAndTrain(t, start, 30)
	}
	steps := wholeGetSteps(t, tr, 59)
	for _, s := range steps {
		if s.Index < 3 {
			continue
		}
		// Step k begins with iteration k+1's get.
		if timed[s.Index+1] {
			if s.DispatchWait < 3e-3 {
				t.Errorf("step %d: a get that blocked 3 ms in its poll has dispatch_wait %.6f", s.Index, s.DispatchWait)
			}
			continue
		}
		within(t, "dispatch_wait", s.DispatchWait, 0, 1e-9)
		if s.DataTime < 100e-6 {
			t.Errorf("step %d: data_time %.6f leaves out the get's %.6f", s.Index, s.DataTime, 100e-6)
		}
	}
}

// TestReadsOfPollingGetsAreTakes: a thread whose gets poll the pipe
// (get_nowait, get(timeout=...)) waits only in those polls. A read inside
// one of its gets with no poll reported before it (the poll returned under
// PyMinWait) read a sample that was there, however long a busy CPU made
// it, and it does not name the thread's later gets waits either.
func TestReadsOfPollingGetsAreTakes(t *testing.T) {
	conn := "/usr/lib/python3.12/multiprocessing/connection.py"
	queues := "/usr/lib/python3.12/multiprocessing/queues.py"
	poll := []events.PyFrame{{Func: "Connection._poll", File: conn}, {Func: "_ConnectionBase.poll", File: conn},
		{Func: "Queue.get", File: queues}}
	// Three frames deep, as the probes read them: get_nowait is not among them.
	read := []events.PyFrame{{Func: "Connection._recv", File: conn}, {Func: "_ConnectionBase.recv_bytes", File: conn},
		{Func: "Queue.get", File: queues}}
	tr := newThread(100, 101, 0)
	for i := range 60 {
		start := tr.t
		tr.idle(30 * us)
		switch {
		case i == 1: // a read before any poll was seen: taken for a wait
			tr.pyWait(600*us, read)
		case i == 2: // a poll long enough to be reported, finding the sample
			tr.pyWait(60*us, poll)
		case i%3 == 0: // the poll unreported, the read slow on a busy CPU
			tr.pyWait(600*us, read)
		}
		tr.idle(40 * us)
		tr.getAndTrain(t, start, 30)
	}
	steps := wholeGetSteps(t, tr, 59)
	for _, s := range steps {
		if s.Index < 2 {
			continue
		}
		within(t, "dispatch_wait", s.DispatchWait, 0, 1e-9)
	}
}

// pyWait appends a Python wait of d with frames on tr's thread.
func (tr *thread) pyWait(d uint64, frames []events.PyFrame) {
	tr.evs = append(tr.evs, events.Event{Kind: events.KindPyWait, PID: tr.pid, TID: tr.tid, Start: tr.t, End: tr.t + d, Frames: frames})
	tr.t += d
}

// wholeGetSteps runs tr's events with whole gets probed and wants n steps.
func wholeGetSteps(t *testing.T, tr *thread, n int) []Step {
	t.Helper()
	_, steps := run(t, wholeGetCfg, tr.evs)
	if len(steps) != n {
		t.Fatalf("%d steps, want %d", len(steps), n)
	}
	return steps
}
