package perfetto

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

const t0 = 5_000_000_123 // a first event's time, ns

func api(t *testing.T, name string) uint16 {
	t.Helper()
	a, ok := cudaapi.ByName(name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	return a.ID
}

func write(t *testing.T, o Options, do func(w *Writer)) (*parsed, Stats, []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := New(&buf, o)
	do(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return parse(t, buf.Bytes()), w.Stats(), buf.Bytes()
}

func wait(pid, tid uint32, s, e uint64) *events.Event {
	return &events.Event{Kind: events.KindPyWait, PID: pid, TID: tid, Start: s, End: e, Name: "sem_timedwait",
		Frames: []events.PyFrame{{Func: "Condition.wait", File: "/usr/lib/python3.12/threading.py"},
			{Func: "Queue.get", File: "/usr/lib/python3.12/queue.py"}}}
}

// TestClockOrigin: ts 0 is a whole millisecond a second before the first
// time seen, otherData says which, and ts and dur are the events' own
// nanoseconds.
func TestClockOrigin(t *testing.T) {
	p, _, _ := write(t, Options{}, func(w *Writer) {
		w.Event(wait(10, 11, t0, t0+1500))
		w.Event(wait(10, 11, t0-400_000_000, t0-300_000_007)) // began before, came after
	})
	if p.origin != 4_000_000_000 {
		t.Fatalf("clock origin %d", p.origin)
	}
	ss := p.tracks[trackKey{10, 11}]
	if len(ss) != 2 || ss[0].start != t0-p.origin || ss[0].dur != 1500 || ss[1].start != t0-400_000_000-p.origin || ss[1].dur != 99_999_993 {
		t.Fatalf("slices %+v", ss)
	}
	if ss[0].name != "wait dispatch: queue.Queue.get" || ss[0].args["stack"] != "Condition.wait (threading.py) < Queue.get (queue.py)" ||
		ss[0].args["libc"] != "sem_timedwait" {
		t.Errorf("wait slice %+v", ss[0])
	}
	if p.procNames[10] != "PID 10" || p.threadNames[trackKey{10, 11}] != "thread 11" {
		t.Errorf("names %v %v", p.procNames, p.threadNames)
	}
}

// TestOverlapsLane: a slice crossing one of its thread's goes to the
// thread's overlaps lane, not dropped, not clipped; those nested or apart
// stay; a slice containing one that began with it and was written first
// goes to the lane too.
func TestOverlapsLane(t *testing.T) {
	sync := api(t, "cudaStreamSynchronize")
	p, st, _ := write(t, Options{}, func(w *Writer) {
		w.Event(wait(1, 7, t0+100, t0+200))
		w.Event(&events.Event{Kind: events.KindCall, API: sync, PID: 1, TID: 7, Start: t0 + 150, End: t0 + 250}) // crosses
		w.Event(&events.Event{Kind: events.KindPyGIL, PID: 1, TID: 7, Start: t0 + 120, End: t0 + 180})           // inside
		w.Event(wait(1, 7, t0+300, t0+400))                                                                      // apart
		w.Event(&events.Event{Kind: events.KindCall, API: sync, PID: 1, TID: 7, Start: t0 + 300, End: t0 + 500}) // around, same start
		w.Event(wait(1, 7, t0+90, t0+210))                                                                       // around, earlier
	})
	main, lane := p.tracks[trackKey{1, 7}], []slice(nil)
	var laneTID uint32
	for k, ss := range p.tracks {
		if k.pid == 1 && k.tid != 7 {
			lane, laneTID = ss, k.tid
		}
	}
	name := func(ss []slice) (out []string) {
		for _, s := range ss {
			out = append(out, fmt.Sprintf("%s@%d+%d", s.name, s.start-(t0-p.origin), s.dur))
		}
		return out
	}
	if got := fmt.Sprint(name(main)); got != "[wait dispatch: queue.Queue.get@100+100 GIL@120+60 wait dispatch: queue.Queue.get@300+100 wait dispatch: queue.Queue.get@90+120]" {
		t.Errorf("thread track %s", got)
	}
	if got := fmt.Sprint(name(lane)); got != "[cudaStreamSynchronize@150+100 cudaStreamSynchronize@300+200]" {
		t.Errorf("lane %s", got)
	}
	if laneTID < synthBase || p.threadNames[trackKey{1, laneTID}] != "thread 7 (overlaps)" {
		t.Errorf("lane tid %d named %q", laneTID, p.threadNames[trackKey{1, laneTID}])
	}
	if p.threadSort[trackKey{1, laneTID}] != p.threadSort[trackKey{1, 7}]+1 {
		t.Errorf("lane sorted %v, its thread %v", p.threadSort[trackKey{1, laneTID}], p.threadSort[trackKey{1, 7}])
	}
	if st.Overlaps != 2 || st.Slices != 6 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestNestingAnyOrder: slices of one thread crossing at random, in any
// order, are all written, nested on every track, or counted dropped
// where every lane was taken.
func TestNestingAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		type iv struct{ s, e uint64 }
		var ivs []iv
		at := uint64(t0)
		for range 300 {
			at += uint64(rng.IntN(2000))
			ivs = append(ivs, iv{at, at + uint64(rng.IntN(3000))})
			if rng.IntN(4) == 0 { // a parent of what came just before
				ivs = append(ivs, iv{ivs[len(ivs)-1].s - uint64(rng.IntN(500)), at + uint64(rng.IntN(4000))})
			}
		}
		rng.Shuffle(len(ivs), func(i, j int) {
			if rng.IntN(3) == 0 { // mostly in order, as events come
				ivs[i], ivs[j] = ivs[j], ivs[i]
			}
		})
		p, st, _ := write(t, Options{}, func(w *Writer) {
			for _, v := range ivs {
				w.Event(&events.Event{Kind: events.KindPyGIL, PID: 3, TID: 4, Start: v.s, End: v.e})
			}
		})
		if len(p.slices)+st.Dropped != len(ivs) || st.Slices != len(p.slices) {
			t.Fatalf("round %d: %d slices + %d dropped, %d given", round, len(p.slices), st.Dropped, len(ivs))
		}
		if st.Dropped > len(ivs)/20 {
			t.Errorf("round %d: %d of %d dropped", round, st.Dropped, len(ivs))
		}
	}
}

// TestWindowForgets: a slice beginning before the end of one its track
// let go of goes to a lane: it might cross it.
func TestWindowForgets(t *testing.T) {
	p, st, _ := write(t, Options{}, func(w *Writer) {
		for i := range window + 1 {
			s := t0 + uint64(i)*100
			w.Event(&events.Event{Kind: events.KindPyGIL, PID: 3, TID: 4, Start: s, End: s + 50})
		}
		w.Event(&events.Event{Kind: events.KindPyGIL, PID: 3, TID: 4, Start: t0 - 10, End: t0 + 20_000}) // around them all
	})
	if len(p.tracks[trackKey{3, 4}]) != window+1 || st.Overlaps != 1 {
		t.Errorf("%d on the thread, stats %+v", len(p.tracks[trackKey{3, 4}]), st)
	}
}

func phase(p correlate.Phase, s, e uint64) correlate.PhaseSpan {
	return correlate.PhaseSpan{Phase: p, StartNS: s, EndNS: e}
}

// TestSteps: a step and its phases on the process's steps track, the
// step's measures in its args, counters at its end, the process named by
// the step's rank and the step thread marked; a step crossing the one
// before goes to a lane of the steps.
func TestSteps(t *testing.T) {
	rank := 3
	st := correlate.Step{Index: 7, PID: 20, TID: 21, Rank: &rank, StartNS: t0, EndNS: t0 + 10_000_000,
		WallTime: 0.01, StepTime: 0.009, DispatchWait: 0.001, WaitsObserved: true, PoolMeasured: true, Pool: 5,
		LaunchesCounted: true, Launches: 40, GraphLaunches: 2, ComputeTime: 0.004, ComputeSource: correlate.ComputeEvents,
		H2DBytes: 1 << 20, Phases: []correlate.PhaseSpan{phase(correlate.PhaseDispatchWait, t0, t0+1_000_000),
			phase(correlate.PhaseData, t0+1_000_000, t0+2_500_000), phase(correlate.PhaseCompute, t0+2_500_000, t0+10_000_000)}}
	crossing := st
	crossing.Index, crossing.StartNS, crossing.EndNS, crossing.Phases = 8, t0+9_000_000, t0+12_000_000, nil
	p, stats, _ := write(t, Options{ThreadName: func(pid, tid uint32) string { return fmt.Sprintf("pt_%d", tid) }}, func(w *Writer) {
		w.Event(&events.Event{Kind: events.KindPyGIL, PID: 20, TID: 21, Start: t0 + 100, End: t0 + 200})
		w.Step(st)
		w.Step(crossing)
	})
	var steps []slice
	var stepsTID uint32
	for _, s := range p.slices {
		if s.name == "step 7" {
			steps, stepsTID = p.tracks[trackKey{s.pid, s.tid}], s.tid
		}
	}
	if len(steps) != 4 || steps[0].name != "step 7" || steps[0].dur != 10_000_000 {
		t.Fatalf("steps track %+v", steps)
	}
	var sum uint64
	for i, ph := range st.Phases {
		k := steps[i+1]
		if k.name != string(ph.Phase) || k.start != ph.StartNS-p.origin || k.dur != ph.EndNS-ph.StartNS {
			t.Errorf("phase %d: %+v", i, k)
		}
		sum += k.dur
	}
	if sum != steps[0].dur {
		t.Errorf("phases sum to %d, the step %d", sum, steps[0].dur)
	}
	args := steps[0].args
	for k, v := range map[string]float64{"wall_time_ms": 10, "step_time_ms": 9, "dispatch_wait_ms": 1, "pool": 5,
		"launches": 40, "graph_launches": 2, "compute_time_ms": 4, "h2d_bytes": 1 << 20, "rank": 3, "thread": 21} {
		if args[k] != v {
			t.Errorf("arg %s %v, want %v", k, args[k], v)
		}
	}
	if args["compute_source"] != "cuda_events" || args["d2h_bytes"] != nil || args["data_time_ms"] != nil {
		t.Errorf("args %v", args)
	}
	for name, want := range map[string]float64{"step_time ms": 9, "pool items": 5, "launches per step": 42} {
		cs := p.counters[name]
		if len(cs) != 2 || cs[0].pid != 20 || cs[0].ts != st.EndNS-p.origin || cs[0].v != want {
			t.Errorf("counter %s %+v, want %v at the step's end", name, cs, want)
		}
	}
	if p.procNames[20] != "rank 3 · PID 20" || p.procSort[20] != 3 {
		t.Errorf("process %q sorted %v", p.procNames[20], p.procSort[20])
	}
	if p.threadNames[trackKey{20, stepsTID}] != "steps (thread 21)" || p.threadNames[trackKey{20, 21}] != "pt_21 (21), step thread" {
		t.Errorf("thread names %v", p.threadNames)
	}
	if p.threadSort[trackKey{20, stepsTID}] >= p.threadSort[trackKey{20, 21}] {
		t.Errorf("steps sorted after the step thread: %v", p.threadSort)
	}
	lane := 0
	for k, name := range p.threadNames {
		if name == "steps (thread 21) (overlaps)" && len(p.tracks[k]) == 1 && p.tracks[k][0].name == "step 8" {
			lane++
		}
	}
	if lane != 1 || stats.Steps != 2 || stats.Overlaps != 1 || stats.Slices != 6 {
		t.Errorf("step 8 on %d lanes; stats %+v", lane, stats)
	}
}

// TestLeftOut: calls that do not hold their thread, stack samples and
// events of no kind drawn write nothing; a user probe is named by its
// role, one not given by its number.
func TestLeftOut(t *testing.T) {
	user := map[uint16]correlate.UserProbe{cudaapi.UserBase: {Role: events.RoleFetch, Name: "mooncake::get"}}
	p, st, _ := write(t, Options{User: user}, func(w *Writer) {
		for _, name := range []string{"cudaEventRecord", "cuLaunchKernel", "cudaMalloc", "cudaEventElapsedTime"} {
			w.Event(&events.Event{Kind: events.KindCall, API: api(t, name), PID: 1, TID: 1, Start: t0, End: t0 + 10})
		}
		for _, k := range []events.Kind{events.KindCPUSample, events.KindOffCPU, events.KindCallStack, events.KindLaunchStack,
			events.KindPool, events.KindWrite, events.KindLibLoad, events.KindKernelName, events.KindPyAttached} {
			w.Event(&events.Event{Kind: k, PID: 1, TID: 1, Start: t0, End: t0 + 10})
		}
		w.Event(&events.Event{Kind: events.KindCall, API: cudaapi.UserBase, PID: 1, TID: 2, Start: t0, End: t0 + 10})
		w.Event(&events.Event{Kind: events.KindCall, API: cudaapi.UserBase + 1, PID: 1, TID: 2, Start: t0 + 20, End: t0 + 30})
		w.Event(&events.Event{Kind: events.KindCall, API: api(t, "cuMemcpyDtoHAsync_v2"), PID: 1, TID: 3, Start: t0, End: t0 + 10,
			Args: [5]uint64{0, 0, 4096}, Ret: 700})
	})
	var names []string
	for _, s := range p.slices {
		names = append(names, s.name)
	}
	if fmt.Sprint(names) != "[fetch: mooncake::get probe 1 cuMemcpyDtoHAsync_v2]" || st.Slices != 3 {
		t.Fatalf("slices %v", names)
	}
	if a := p.slices[2].args; a["bytes"] != 4096.0 || a["dir"] != "d2h" || a["ret"] != 700.0 {
		t.Errorf("copy args %v", a)
	}
	if _, ok := p.threadNames[trackKey{1, 1}]; ok {
		t.Errorf("thread 1 named, nothing of it drawn")
	}
}

// TestCap: past MaxBytes nothing is written but the closing metadata,
// the file still parses, and Stats and an instant say where it stopped.
func TestCap(t *testing.T) {
	const max = 2_000_000 // about half the file: steps come once the boundary is found
	r := replay(t, specData, max)
	p := parse(t, r.data)
	st := r.stats
	if !st.Truncated || st.AtNS == 0 || st.Bytes != int64(len(r.data)) {
		t.Fatalf("stats %+v", st)
	}
	cut := bytes.Index(r.data, []byte(`{"ph":"i","s":"g","name":"trace cut`))
	if cut < 0 || cut > max || bytes.Index(r.data, []byte(`"ph":"M"`)) < cut {
		t.Fatalf("closing metadata at %d of a %d-byte bound", cut, max)
	}
	if last := p.instants[len(p.instants)-1]; !strings.HasPrefix(last.name, "trace cut") || last.start != st.AtNS-p.origin {
		t.Errorf("last instant %+v, stopped at %d", last, st.AtNS-p.origin)
	}
	if st.Slices != len(p.slices) || st.Slices == 0 || st.Steps == 0 {
		t.Errorf("stats %+v, %d slices in the file", st, len(p.slices))
	}
	for _, s := range p.slices {
		if s.end() > st.AtNS-p.origin+uint64(1e9) {
			t.Errorf("%s ends at %d, a second after the cut at %d", s.name, s.end(), st.AtNS-p.origin)
			break
		}
	}
	t.Logf("%d bytes for a bound of %d: %+v", len(r.data), max, st)
}

// TestProcessRanks: the two-rank trace's processes are named by the
// ranks their process events gave, sorted by them, the engine after.
func TestProcessRanks(t *testing.T) {
	r := replay(t, twoRanks, 0)
	p := parse(t, r.data)
	want := map[uint32]string{641: "rank 0 · PID 641", 642: "rank 1 · PID 642", 643: "PID 643", gpuPID: "GPUs (NVML)"}
	if fmt.Sprint(p.procNames) != fmt.Sprint(want) {
		t.Errorf("processes %v, want %v", p.procNames, want)
	}
	if !(p.procSort[641] < p.procSort[642] && p.procSort[642] < p.procSort[643] && p.procSort[643] < p.procSort[gpuPID]) {
		t.Errorf("processes sorted %v", p.procSort)
	}
	for _, st := range r.steps {
		if st.PID != 643 && (st.Rank == nil || *st.Rank != int(st.PID-641)) {
			t.Fatalf("step %d of PID %d: rank %v", st.Index, st.PID, st.Rank)
		}
	}
}

// TestGPUCounters: each GPU sample of the two-rank trace is a counter
// value of its GPU at its time: util and power as read, SM active as a
// percentage, memory in GiB.
func TestGPUCounters(t *testing.T) {
	r := replay(t, twoRanks, 0)
	p := parse(t, r.data)
	type key struct {
		name string
		ts   uint64
	}
	got := map[key]float64{}
	for name, cs := range p.counters {
		for _, c := range cs {
			if strings.HasPrefix(name, "GPU ") {
				if c.pid != gpuPID {
					t.Fatalf("%s on PID %d", name, c.pid)
				}
				got[key{name, c.ts}] = c.v
			}
		}
	}
	n := 0
	for _, e := range r.evs {
		for _, s := range e.GPUs {
			ts := s.TimeNS - p.origin
			for name, v := range map[string]float64{"util %": s.GPUUtil, "power W": s.PowerW, "SM clock MHz": s.SMClockMHz} {
				name = fmt.Sprintf("GPU %d %s", s.GPU, name)
				if g, ok := got[key{name, ts}]; !ok || g != v {
					t.Fatalf("%s at %d: %v (%v), sampled %v", name, ts, g, ok, v)
				}
				n++
			}
			if g := got[key{fmt.Sprintf("GPU %d memory GiB", s.GPU), ts}]; g < s.MemUsed/(1<<30)-0.0005 || g > s.MemUsed/(1<<30)+0.0005 {
				t.Fatalf("GPU %d memory at %d: %v GiB, sampled %v bytes", s.GPU, ts, g, s.MemUsed)
			}
			if events.Has(s.SMActive) {
				if g := got[key{fmt.Sprintf("GPU %d SM active %%", s.GPU), ts}]; g < s.SMActive*100-0.005 || g > s.SMActive*100+0.005 {
					t.Fatalf("GPU %d SM active at %d: %v %%, sampled %v", s.GPU, ts, g, s.SMActive)
				}
			} else if _, ok := got[key{fmt.Sprintf("GPU %d SM active %%", s.GPU), ts}]; ok {
				t.Fatalf("GPU %d SM active at %d written, not sampled", s.GPU, ts)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no GPU samples in the trace")
	}
}

// TestNotesAndNames: a note is a global instant at the latest time seen
// (held until a time is), its text as given, however odd.
func TestNotesAndNames(t *testing.T) {
	odd := "PID 1: \"quoted\"\n\ttab \\ \x01 \xff end"
	p, _, _ := write(t, Options{}, func(w *Writer) {
		w.Note("before any time")
		w.Event(wait(1, 2, t0, t0+100))
		w.Note(odd)
	})
	if len(p.instants) != 2 || p.instants[0].name != "before any time" || p.instants[0].start != t0-p.origin ||
		p.instants[1].name != strings.ToValidUTF8(odd, "\uFFFD") || p.instants[1].start != t0+100-p.origin {
		t.Errorf("instants %+v", p.instants)
	}
}

// TestEmpty: a Writer that saw nothing still writes a file that parses.
func TestEmpty(t *testing.T) {
	p, st, _ := write(t, Options{}, func(*Writer) {})
	if len(p.slices) != 0 || st.Bytes == 0 {
		t.Errorf("%+v", st)
	}
}

// TestCreate: the file Create makes is what Close finished; a directory
// missing is an error of one line.
func TestCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.json")
	w, err := Create(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Event(wait(1, 2, t0, t0+100))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if p := parse(t, data); len(p.slices) != 1 || int64(len(data)) != w.Stats().Bytes {
		t.Errorf("%d slices, %d bytes, stats %+v", len(p.slices), len(data), w.Stats())
	}
	_, err = Create(filepath.Join(t.TempDir(), "missing", "trace.json"), Options{})
	if err == nil || !strings.HasPrefix(err.Error(), "create trace file: ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v", err)
	}
}

type failing struct{ n int }

func (f *failing) Write(b []byte) (int, error) {
	if f.n -= len(b); f.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(b), nil
}

// TestWriteError: Close returns the first write error.
func TestWriteError(t *testing.T) {
	w := New(&failing{n: 100}, Options{})
	for i := range 10000 {
		w.Event(wait(1, 2, t0+uint64(i)*1000, t0+uint64(i)*1000+500))
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Close: %v", err)
	}
}

// TestWaitTexts: past the waits' texts kept, they are made afresh: every
// wait is still named by its own frames.
func TestWaitTexts(t *testing.T) {
	const n = maxWaitTexts + 100
	p, _, _ := write(t, Options{}, func(w *Writer) {
		for i := range n {
			e := wait(1, 2, t0+uint64(i)*1000, t0+uint64(i)*1000+10)
			e.Frames[0].Func = fmt.Sprintf("f%d", i%(n-50)) // some seen again after the clear
			w.Event(e)
		}
	})
	if len(p.slices) != n {
		t.Fatalf("%d slices", len(p.slices))
	}
	for i, s := range p.slices {
		f := fmt.Sprintf("f%d", i%(n-50))
		if s.name != "wait dispatch: queue.Queue.get" || s.args["stack"] != f+" (threading.py) < Queue.get (queue.py)" {
			t.Fatalf("wait %d: %s %v", i, s.name, s.args)
		}
	}
}
