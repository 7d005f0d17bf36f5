package topview

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

const ms = uint64(time.Millisecond)

// step makes step i of a process: data, compute and sync phases one after
// the other, each its duration, the step ending at end.
func step(pid uint32, rank *int, i int, end uint64, data, compute, sync uint64) correlate.Step {
	wall := data + compute + sync
	start := end - wall
	return correlate.Step{Index: i, PID: pid, Rank: rank, StartNS: start, EndNS: end,
		WallTime: sec(wall), StepTime: sec(wall), WaitsObserved: true,
		DataMeasured: true, DataTime: sec(data), DataSource: correlate.DataEvents,
		ComputeSource: correlate.ComputeEvents, ComputeTime: sec(compute), SyncTime: sec(sync), Syncs: 1,
		LaunchesCounted: true, Launches: 40, PoolMeasured: true, Pool: 3,
		Phases: []correlate.PhaseSpan{
			{Phase: correlate.PhaseData, StartNS: start, EndNS: start + data},
			{Phase: correlate.PhaseCompute, StartNS: start + data, EndNS: start + data + compute},
			{Phase: correlate.PhaseSync, StartNS: start + data + compute, EndNS: end},
		}}
}

func sec(ns uint64) float64 { return float64(ns) / 1e9 }

// trainer feeds m n steps of 2 ms data, 6 ms compute and 2 ms sync.
func trainer(m *Model, pid uint32, rank *int, n int, t0 uint64, compute uint64) uint64 {
	t := t0
	for i := range n {
		t += 2*ms + compute + 2*ms
		m.Step(step(pid, rank, i, t, 2*ms, compute, 2*ms))
	}
	return t
}

func gpuSample(gpu int) events.GPUSample {
	g := events.NewGPUSample(gpu, 1)
	g.GPUUtil, g.PowerW, g.PowerLimitW, g.TempC, g.SMClockMHz = 50, 300, 700, 64, 1980
	g.MemUsed, g.MemTotal = 70<<30, 140<<30
	g.Throttle, g.ThrottleKnown = 0x4, true
	return g
}

// fixed returns a model whose clock stands still, attached for 65 s.
func fixed() *Model {
	m := New()
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.start, m.now = t, func() time.Time { return t.Add(65 * time.Second) }
	return m
}

func TestWindowIsBounded(t *testing.T) {
	m := fixed()
	trainer(m, 7, nil, 1000, 0, 6*ms)
	s := m.snapshot()
	if len(s.procs) != 1 || len(s.procs[0].steps) != WindowSteps || s.steps != 1000 {
		t.Fatalf("%d processes, window of %d steps, %d seen: want 1, %d, 1000", len(s.procs), len(s.procs[0].steps), s.steps, WindowSteps)
	}
	w := s.procs[0].steps
	for i, st := range w {
		if st.Index != 800+i {
			t.Fatalf("window step %d is step %d, want the latest %d oldest first", i, st.Index, WindowSteps)
		}
		if (st.Phases != nil) != (i == len(w)-1) {
			t.Fatalf("step %d keeps its timeline: only the latest one should", st.Index)
		}
	}

	// Steps of 1 s: only those within 30 s of the latest are in the window.
	m = fixed()
	end := trainer(m, 7, nil, 100, 0, 996*ms)
	if n := len(m.snapshot().procs[0].steps); n != 31 {
		t.Errorf("1 s steps: %d in the window, want the 31 within %v of the latest", n, WindowTime)
	}
	// A process whose steps stopped leaves once another's are 30 s on.
	trainer(m, 8, nil, 40, end, 996*ms)
	s = m.snapshot()
	if len(s.procs) != 1 || s.procs[0].pid != 8 || len(m.procs) != 1 {
		t.Errorf("processes %+v after PID 7 stopped 40 s ago, want only PID 8", s.procs)
	}
}

func TestEventsKeepTheLatestGPUState(t *testing.T) {
	m := fixed()
	m.Event(&events.Event{Kind: events.KindCall, PID: 1})
	if len(m.snapshot().gpus) != 0 {
		t.Fatal("a call was taken as a GPU sample")
	}
	round := func(at time.Duration, gs ...events.GPUSample) {
		for i := range gs {
			gs[i].TimeNS = uint64(at)
		}
		m.Event(&events.Event{Kind: events.KindGPUSamples, GPUs: gs})
	}
	round(time.Second, gpuSample(1), gpuSample(0))
	// The next round reads what moves fast only: memory, temperature and
	// the throttle reasons keep their latest reading.
	fast := events.NewGPUSample(1, 0)
	fast.GPUUtil, fast.PowerW = 90, 310
	round(time.Second+100*time.Millisecond, fast)
	g := m.snapshot().gpus
	if len(g) != 2 || g[0].sample.GPU != 0 || g[1].sample.GPU != 1 {
		t.Fatalf("GPUs %+v: want 0 and 1", g)
	}
	if s := g[1].sample; s.GPUUtil != 90 || s.PowerW != 310 || s.MemUsed != 70<<30 || s.TempC != 64 || !s.ThrottleKnown || s.Throttle != 0x4 {
		t.Errorf("GPU 1 after a fast round: %+v", s)
	}
	if !math.IsNaN(g[0].sample.SMActive) {
		t.Errorf("SM activity never read, yet %v", g[0].sample.SMActive)
	}
	// A field not read for 30 s is no longer shown.
	for at := time.Second + 200*time.Millisecond; at <= time.Second+gpuStale+200*time.Millisecond; at += 100 * time.Millisecond {
		round(at, fast)
	}
	if s := m.snapshot().gpus[1].sample; !math.IsNaN(s.MemUsed) || !math.IsNaN(s.TempC) || s.ThrottleKnown || s.GPUUtil != 90 {
		t.Errorf("GPU 1 after 30 s of fast rounds: %+v", s)
	}
}

func TestNotesKeepTheLatest(t *testing.T) {
	m := fixed()
	for i := range 30 {
		m.Note(string(rune('a' + i%26)))
	}
	n := m.snapshot().notes
	if len(n) != keptNotes || n[len(n)-1] != "d" {
		t.Errorf("notes %q: want the latest %d", n, keptNotes)
	}
}

func TestRanksFirstThenPIDs(t *testing.T) {
	m := fixed()
	one, zero := 1, 0
	trainer(m, 30, nil, 3, 0, 6*ms)
	trainer(m, 10, &one, 3, 0, 6*ms)
	trainer(m, 20, &zero, 3, 0, 6*ms)
	trainer(m, 5, nil, 3, 0, 6*ms)
	var got []uint32
	for _, p := range m.snapshot().procs {
		got = append(got, p.pid)
	}
	if want := []uint32{20, 10, 5, 30}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v (rank 0, rank 1, then by PID)", got, want)
	}
}
