package correlate

import (
	"math"
	"slices"
	"testing"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// thread writes the calls of one simulated thread on a virtual clock.
type thread struct {
	t        uint64
	pid, tid uint32
	evs      []events.Event
	launches uint32
	first    uint64
	last     uint64
}

func newThread(pid, tid uint32, start uint64) *thread {
	return &thread{t: start, pid: pid, tid: tid}
}

func (th *thread) idle(ns uint64) { th.t += ns }

// launch makes n launches, each taking `each` ns of host time.
func (th *thread) launch(n int, each uint64) {
	for range n {
		if th.launches == 0 {
			th.first = th.t
		}
		th.launches++
		th.last = th.t
		th.t += each
	}
}

// apiNamed is the CUDA API of that name; the test fails where there is
// none.
func apiNamed(t testing.TB, name string) cudaapi.API {
	t.Helper()
	a, ok := cudaapi.ByName(name)
	if !ok {
		t.Fatalf("unknown API %s", name)
	}
	return a
}

// call makes one CUDA call lasting dur ns with the given arguments.
func (th *thread) call(t testing.TB, name string, dur uint64, args ...uint64) *events.Event {
	t.Helper()
	a := apiNamed(t, name)
	e := events.Event{Kind: events.KindCall, API: a.ID, PID: th.pid, TID: th.tid, Start: th.t, End: th.t + dur,
		Launches: th.launches, LaunchFirst: th.first, LaunchLast: th.last}
	copy(e.Args[:], args)
	th.launches, th.first, th.last = 0, 0, 0
	th.t += dur
	th.evs = append(th.evs, e)
	return &th.evs[len(th.evs)-1]
}

// elapsed reads ms between two events.
func (th *thread) elapsed(t testing.TB, ms float32, start, end uint64) {
	e := th.call(t, "cudaEventElapsedTime", 2000, 0x7ff0, start, end)
	e.Out = uint64(math.Float32bits(ms))
}

// timedCompute is spec_pipeline's measured compute: the begin event
// recorded, 40 launches, the end event, loss.item() and the elapsed read.
func (th *thread) timedCompute(t testing.TB) {
	th.call(t, "cudaEventRecordWithFlags", 3*us, 0xe1, 0x55)
	th.launch(40, 8*us)
	th.call(t, "cudaEventRecordWithFlags", 3*us, 0xe2, 0x55)
	th.call(t, "cudaMemcpyAsync", 10*us, 0xc000, 0xd000, 4, 2, 0x55)
	th.call(t, "cudaStreamSynchronize", 4*ms, 0x55)
	th.elapsed(t, 4.3, 0xe1, 0xe2)
}

// merge interleaves threads' events in return-time order, as the reader does.
func merge(ths ...*thread) []events.Event {
	var all []events.Event
	for _, th := range ths {
		all = append(all, th.evs...)
	}
	slices.SortStableFunc(all, events.CompareEnd)
	return all
}

func run(t testing.TB, cfg Config, evs []events.Event) (*Correlator, []Step) {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var steps []Step
	for i := range evs {
		steps = append(steps, c.Add(&evs[i])...)
	}
	steps = append(steps, c.Finish()...)
	checkTimelines(t, steps)
	return c, steps
}

// runPython is run for a job whose Python waits are probed.
func runPython(t testing.TB, evs []events.Event) (*Correlator, []Step) {
	t.Helper()
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	c.ObserveWaits()
	var steps []Step
	for i := range evs {
		steps = append(steps, c.Add(&evs[i])...)
	}
	steps = append(steps, c.Finish()...)
	checkTimelines(t, steps)
	return c, steps
}

const (
	ms = uint64(1e6)
	us = uint64(1e3)
)

// engine adds a background thread that launches and syncs on its own
// rhythm, like an inference engine thread in the same process.
func engine(t testing.TB, tid uint32, until uint64) *thread {
	th := newThread(100, tid, 0)
	for th.t < until {
		th.launch(7, 5*us)
		th.call(t, "cudaMemcpyAsync", 30*us, 0xd000, 0xe000, 4<<20, 2, 0x77)
		th.call(t, "cudaStreamSynchronize", 900*us, 0x77)
		th.idle(3 * ms)
	}
	return th
}

// syncStep adds a step ending in a stream sync: 2 ms on the CPU, a 4 MiB
// input copy, 20 launches and a 3 ms sync. It returns the sync (set its
// pool reading before the next call).
func (th *thread) syncStep(t testing.TB) *events.Event {
	th.idle(2 * ms)
	th.call(t, "cudaMemcpyAsync", 20*us, 0xa000, 0xb000, 4<<20, 1, 0x55)
	th.launch(20, 10*us)
	return th.call(t, "cudaStreamSynchronize", 3*ms, 0x55)
}

// pywait makes the thread block in a Python queue get for ns.
func (th *thread) pywait(ns uint64) {
	th.evs = append(th.evs, events.Event{Kind: events.KindPyWait, PID: th.pid, TID: th.tid, Start: th.t, End: th.t + ns,
		Frames: []events.PyFrame{{Func: "Condition.wait", File: "/usr/lib/python3.12/threading.py"},
			{Func: "Queue.get", File: "/usr/lib/python3.12/queue.py"}, {Func: "<module>", File: "spec_pipeline.py"}}})
	th.t += ns
}
