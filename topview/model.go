package topview

import (
	"slices"
	"sync"
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// The recent window each process's table, rate and verdict are taken
// over: its last WindowSteps steps, of those the ones that ended within
// WindowTime of the latest step seen (of any process). A process whose
// steps all fall out of it (it exited, or stopped stepping) leaves the
// view.
const (
	WindowSteps = 200
	WindowTime  = 30 * time.Second
)

// keptNotes is how many of the latest notes are kept.
const keptNotes = 20

// Model is what the view shows. Its methods may be called from any
// goroutine: the profile's outputs and taps call it from one, holding the
// sink's lock, and the screen renders it from another.
type Model struct {
	mu      sync.Mutex
	now     func() time.Time
	start   time.Time
	procs   map[uint32]*proc
	latest  uint64 // the latest step's end (CLOCK_MONOTONIC ns): the window's now
	steps   int    // steps seen, all processes
	gpus    map[int]*gpuState
	names   map[int]string // GPU names by NVML index
	notes   []string       // the latest, oldest first
	nprocs  int            // processes that sent events
	targets []int
	lost    uint64
}

// proc is one process's recent steps, in a ring: memory stays bounded
// however long the run and fast its steps.
type proc struct {
	pid  uint32
	rank *int
	ring [WindowSteps]correlate.Step
	next int // where the next step goes
	n    int // steps in the ring
}

// New returns an empty model, attached from now.
func New() *Model {
	return &Model{now: time.Now, start: time.Now(), procs: map[uint32]*proc{}, gpus: map[int]*gpuState{},
		names: map[int]string{}}
}

// Step takes a step as the control loop cut it.
func (m *Model) Step(s correlate.Step) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps++
	m.latest = max(m.latest, s.EndNS)
	p := m.procs[s.PID]
	if p == nil {
		p = &proc{pid: s.PID}
		m.procs[s.PID] = p
	}
	if s.Rank != nil {
		p.rank = s.Rank
	}
	// Only the latest step's timeline is drawn: the others' are let go.
	if p.n > 0 {
		p.ring[(p.next+WindowSteps-1)%WindowSteps].Phases = nil
	}
	p.ring[p.next] = s
	p.next = (p.next + 1) % WindowSteps
	p.n = min(p.n+1, WindowSteps)
	for pid, q := range m.procs {
		if q.newest().EndNS+uint64(WindowTime) < m.latest {
			delete(m.procs, pid)
		}
	}
}

func (p *proc) newest() *correlate.Step { return &p.ring[(p.next+WindowSteps-1)%WindowSteps] }

// window is the process's steps within the window ending at latest,
// oldest first (copies: the caller may keep them).
func (p *proc) window(latest uint64) []correlate.Step {
	out := make([]correlate.Step, 0, p.n)
	for i := range p.n {
		s := p.ring[(p.next+WindowSteps-p.n+i)%WindowSteps]
		if s.EndNS+uint64(WindowTime) >= latest {
			out = append(out, s)
		}
	}
	return out
}

// Note takes a finding worth a line of its own (the live line's notes).
func (m *Model) Note(msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notes = append(m.notes, msg)
	if len(m.notes) > keptNotes {
		m.notes = slices.Delete(m.notes, 0, len(m.notes)-keptNotes)
	}
}

// Processes says how many processes have sent events.
func (m *Model) Processes(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nprocs = n
}

// Event takes every event the profile sees; it keeps each GPU's latest
// hardware state (events.KindGPUSamples) and lets the rest go.
func (m *Model) Event(e *events.Event) {
	if e.Kind != events.KindGPUSamples {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range e.GPUs {
		st := m.gpus[g.GPU]
		if st == nil {
			st = &gpuState{}
			m.gpus[g.GPU] = st
		}
		st.add(g)
	}
}

// GPUs names the GPUs NVML sees, for the GPU table.
func (m *Model) GPUs(gpus []events.GPU) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range gpus {
		m.names[g.Index] = g.Name
	}
}

// Targets sets the processes attached to, for the header.
func (m *Model) Targets(pids []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.targets = slices.Sorted(slices.Values(pids))
}

// Lost sets how many events were lost so far (ring buffer full).
func (m *Model) Lost(n uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lost = n
}

// snapshot is what one frame is drawn from, copied out under the lock so
// that rendering does not hold up the goroutine adding events.
type snapshot struct {
	attached time.Duration
	steps    int
	nprocs   int
	targets  []int
	lost     uint64
	procs    []procWindow // by rank, then PID
	gpus     []gpuRow     // by NVML index
	notes    []string
}

type procWindow struct {
	pid   uint32
	rank  *int
	steps []correlate.Step // oldest first; the last one has its timeline
}

type gpuRow struct {
	sample events.GPUSample
	name   string
}

func (m *Model) snapshot() snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := snapshot{attached: m.now().Sub(m.start), steps: m.steps, nprocs: m.nprocs, targets: slices.Clone(m.targets),
		lost: m.lost, notes: slices.Clone(m.notes)}
	for _, p := range m.procs {
		if w := p.window(m.latest); len(w) > 0 {
			s.procs = append(s.procs, procWindow{pid: p.pid, rank: p.rank, steps: w})
		}
	}
	slices.SortFunc(s.procs, func(a, b procWindow) int {
		switch {
		case a.rank != nil && b.rank != nil && *a.rank != *b.rank:
			return *a.rank - *b.rank
		case (a.rank == nil) != (b.rank == nil):
			if a.rank != nil {
				return -1
			}
			return 1
		}
		return int(a.pid) - int(b.pid)
	})
	for i, g := range m.gpus {
		s.gpus = append(s.gpus, gpuRow{sample: g.shown, name: m.names[i]})
	}
	slices.SortFunc(s.gpus, func(a, b gpuRow) int { return a.sample.GPU - b.sample.GPU })
	return s
}
