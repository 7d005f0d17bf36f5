package correlate

import (
	"cmp"
	"slices"
	"sort"

	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Dist summarises one per-step quantity.
type Dist struct {
	N                   int
	Mean, P10, P50, P90 float64
}

func dist(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	q := func(p float64) float64 { return s[int(p*float64(len(s)-1)+0.5)] }
	return Dist{N: len(s), Mean: sum / float64(len(s)), P10: q(0.1), P50: q(0.5), P90: q(0.9)}
}

// ThreadTotals is what one thread did over the whole run.
type ThreadTotals struct {
	PID, TID      uint32
	Launches      uint64
	GraphLaunches uint64
	Calls         uint64
	Syncs         uint64
	SyncTime      float64
	Copies        uint64
	H2DBytes      uint64
	D2HBytes      uint64
	ElapsedReads  uint64
	AllocBytes    uint64
}

// WaitTotal is how long one thread waited in one kind of call.
type WaitTotal struct {
	PID, TID uint32
	Kind     WaitKind
	What     string
	Count    int
	Seconds  float64
}

// Summary is the whole run.
type Summary struct {
	WallTime     Dist
	User         []UserTotal // the user-named probes, by name
	UserThreads  []UserTotal // the same, by name and thread (PID and TID set)
	DispatchWait Dist        // over steps, when Python waits are probed
	DataTime     Dist
	// DataEstimated is how many steps' data time was estimated
	// (DataCalibrated): their launches were not counted.
	DataEstimated int
	// LoaderBatches: the process takes whole batches from a DataLoader,
	// whose items are no sample counts (pools.measure).
	LoaderBatches bool
	FetchTime     Dist
	TrainCapacity Dist
	InferCapacity Dist
	Pool          Dist   // the sample pool's length at the steps' ends
	Samples       Dist   // items taken from the pool a step
	PoolKind      string // the pool's kind ("queue.Queue", ...)
	// DispatchOn is what the steps' dispatch waits waited in the most
	// (their waited_on, weighted by the wait): the training loop's own
	// waits, not a sleep before training began.
	DispatchOn    string
	Waits         []WaitTotal // longest first
	Engines       []Engine    // inference engine threads, by PID and TID
	Boundary      *Boundary
	Steps         int
	StepTime      Dist
	ComputeTime   Dist
	ComputeSource ComputeSource // the most common source
	SyncTime      Dist
	Launches      Dist
	// Of the steps whose launches were counted and that launched CUDA
	// graphs: the graph launches a step, the kernels they ran where known
	// (Step.GraphKernels), and how many steps' were not known.
	GraphLaunches Dist
	GraphKernels  Dist
	GraphUnknown  int
	// CapturedLaunches are the launches recorded into CUDA graphs by
	// stream capture, over the counted steps.
	CapturedLaunches int
	H2DBytes         Dist
	D2HBytes         Dist
	Threads          []ThreadTotals // most launches first
	GPU              GPUSteps       // the steps' GPU state, where sampled (NVML)
	FirstNS          uint64
	LastNS           uint64
	Events           uint64
	// Dropped is what the correlator let go of to stay bounded.
	Dropped Dropped
}

type waitKey struct {
	pid, tid uint32
	what     string
}

type summaryAcc struct {
	user        map[string]*UserTotal
	userThreads map[waitKey]*UserTotal // by function (what) and thread
	waits       map[waitKey]*WaitTotal
	wallT       series
	fetchT      series
	trainCap    series
	inferCap    series
	pool        series
	poolKind    string
	dispatchOn  map[string]float64
	samples     series
	dispatch    series
	dataT       series
	dataEst     int
	threads     map[uint64]*ThreadTotals
	first       uint64
	last        uint64
	events      uint64
	steps       int
	stepT       series
	computeT    series
	syncT       series
	launches    series
	graphL      series // graph launches, in counted steps with any
	graphK      series // their kernels, where known
	graphUnk    int
	captured    int
	h2d, d2h    series
	// foldedThreads counts the events of threads past maxThreadRows,
	// added to their process's TID 0 row.
	foldedThreads uint64
	sources       map[ComputeSource]int
	gpu           gpuStepsAcc
}

// maxThreadRows bounds the per-thread rows a summary keeps (threads,
// waits, user probes, each): past it, a new thread's events go to its
// process's row for TID 0, "other threads".
const maxThreadRows = 4096

func newSummaryAcc() summaryAcc {
	return summaryAcc{threads: map[uint64]*ThreadTotals{}, sources: map[ComputeSource]int{}, waits: map[waitKey]*WaitTotal{},
		user: map[string]*UserTotal{}, userThreads: map[waitKey]*UserTotal{}}
}

func (s *summaryAcc) addEvent(e *events.Event, a cudaapi.API) {
	s.events++
	if s.first == 0 || e.Start < s.first {
		s.first = e.Start
	}
	s.last = max(s.last, e.End)
	id := threadID(e.PID, e.TID)
	t := s.threads[id]
	if t == nil && len(s.threads) >= maxThreadRows {
		// A job starting ever new threads: the rest share one row, TID 0.
		s.foldedThreads++
		id = threadID(e.PID, 0)
		t = s.threads[id]
	}
	if t == nil {
		t = &ThreadTotals{PID: e.PID, TID: uint32(id)}
		s.threads[id] = t
	}
	t.Calls++
	t.Launches += uint64(e.Launches)
	t.GraphLaunches += uint64(e.GraphLaunches)
	switch a.Class {
	case cudaapi.ClassSync:
		t.Syncs++
		t.SyncTime += seconds(e.Duration())
	case cudaapi.ClassCopy:
		t.Copies++
		switch e.Dir() {
		case cudaapi.DirHtoD:
			t.H2DBytes += e.Bytes()
		case cudaapi.DirDtoH:
			t.D2HBytes += e.Bytes()
		}
	case cudaapi.ClassElapsed:
		t.ElapsedReads++
	case cudaapi.ClassAlloc:
		if e.OK() {
			t.AllocBytes += e.Bytes()
		}
	}
}

// UserTotal is the time in one user-named probe.
type UserTotal struct {
	Role     events.Role
	Name     string
	PID, TID uint32 // in UserThreads
	Calls    int
	Seconds  float64
	Threads  int
}

func (s *summaryAcc) addUser(e *events.Event, up UserProbe) {
	u := s.user[up.Name]
	if u == nil {
		u = &UserTotal{Role: up.Role, Name: up.Name}
		s.user[up.Name] = u
	}
	k := waitKey{e.PID, e.TID, up.Name}
	t := s.userThreads[k]
	if t == nil && len(s.userThreads) >= maxThreadRows {
		s.foldedThreads++
		k.tid = 0
		t = s.userThreads[k]
	}
	if t == nil {
		t = &UserTotal{Role: up.Role, Name: up.Name, PID: e.PID, TID: k.tid, Threads: 1}
		s.userThreads[k] = t
		u.Threads++
	}
	for _, x := range []*UserTotal{u, t} {
		x.Calls++
		x.Seconds += seconds(e.Duration())
	}
}

func (s *summaryAcc) addWait(e *events.Event, kind WaitKind, what string) {
	k := waitKey{e.PID, e.TID, what}
	w := s.waits[k]
	if w == nil && len(s.waits) >= maxThreadRows {
		s.foldedThreads++
		k.tid = 0
		w = s.waits[k]
	}
	if w == nil {
		w = &WaitTotal{PID: e.PID, TID: k.tid, Kind: kind, What: what}
		s.waits[k] = w
	}
	w.Count++
	w.Seconds += seconds(e.Duration())
}

func (s *summaryAcc) addStep(st *Step) {
	s.steps++
	s.gpu.add(st)
	s.stepT.add(st.StepTime)
	s.wallT.add(st.WallTime)
	if st.WaitsObserved {
		s.dispatch.add(st.DispatchWait)
	}
	if st.DataMeasured {
		s.dataT.add(st.DataTime)
	}
	if st.DataSource == DataCalibrated {
		s.dataEst++
	}
	if st.FetchCalls > 0 {
		s.fetchT.add(st.FetchTime)
	}
	if st.TrainCapacity > 0 {
		s.trainCap.add(st.TrainCapacity)
	}
	if st.InferCapacity > 0 {
		s.inferCap.add(st.InferCapacity)
	}
	if st.DispatchWait > 0 && st.WaitedOn != "" {
		if s.dispatchOn == nil {
			s.dispatchOn = map[string]float64{}
		}
		s.dispatchOn[st.WaitedOn] += st.DispatchWait
	}
	if st.SamplesMeasured {
		s.samples.add(float64(st.Samples))
	}
	if st.PoolMeasured {
		s.pool.add(float64(st.Pool))
		s.poolKind = st.PoolKind
	}
	if st.ComputeSource != ComputeNone {
		s.computeT.add(st.ComputeTime)
	}
	s.sources[st.ComputeSource]++
	s.syncT.add(st.SyncTime)
	if st.LaunchesCounted {
		s.launches.add(float64(st.Launches + st.GraphLaunches))
		s.captured += st.CapturedLaunches
		if st.GraphLaunches > 0 {
			s.graphL.add(float64(st.GraphLaunches))
			if st.GraphKernelsKnown {
				s.graphK.add(float64(st.GraphKernels))
			} else {
				s.graphUnk++
			}
		}
	}
	s.h2d.add(float64(st.H2DBytes))
	s.d2h.add(float64(st.D2HBytes))
}

// SummarizeSteps is what steps alone say, as Summary would of a run of
// them: their distributions, pool, capacities and GPU state, for
// Diagnose over a window of a run (gpuprof top). What only the events
// give is left out: the boundary, waits, threads, user probes, engines
// and event counts; FirstNS and LastNS are the steps' own span.
func SummarizeSteps(steps []Step) Summary {
	s := newSummaryAcc()
	for i := range steps {
		st := &steps[i]
		s.addStep(st)
		if i == 0 || st.StartNS < s.first {
			s.first = st.StartNS
		}
		s.last = max(s.last, st.EndNS)
	}
	return s.stepSummary()
}

// stepSummary is the part of a summary the steps make.
func (s *summaryAcc) stepSummary() Summary {
	out := Summary{Steps: s.steps, StepTime: s.stepT.dist(), ComputeTime: s.computeT.dist(),
		SyncTime: s.syncT.dist(), Launches: s.launches.dist(), H2DBytes: s.h2d.dist(),
		D2HBytes: s.d2h.dist(), FirstNS: s.first, LastNS: s.last, Events: s.events}
	out.WallTime, out.DispatchWait, out.DataTime = s.wallT.dist(), s.dispatch.dist(), s.dataT.dist()
	out.DataEstimated = s.dataEst
	out.GraphLaunches, out.GraphKernels, out.GraphUnknown = s.graphL.dist(), s.graphK.dist(), s.graphUnk
	out.CapturedLaunches = s.captured
	out.FetchTime, out.TrainCapacity, out.InferCapacity = s.fetchT.dist(), s.trainCap.dist(), s.inferCap.dist()
	out.Pool, out.PoolKind, out.Samples = s.pool.dist(), s.poolKind, s.samples.dist()
	out.DispatchOn, _ = largest(s.dispatchOn)
	out.GPU = s.gpu.summary()
	out.ComputeSource, _ = largest(s.sources)
	return out
}

// Summary returns the run so far.
func (c *Correlator) Summary() Summary {
	s := &c.sum
	out := s.stepSummary()
	out.Dropped = c.Dropped()
	if a, ok := c.Boundary(); ok {
		out.Boundary = &a
	}
	if c.pools.loader && c.cfg.BatchSize == 0 {
		// Steps reported before a DataLoader's wait was first seen
		// counted its batches as samples (pools.measure).
		out.TrainCapacity, out.Samples, out.LoaderBatches = Dist{}, Dist{}, true
	}
	out.Engines = c.Engines()
	for _, u := range s.user {
		out.User = append(out.User, *u)
	}
	sort.Slice(out.User, func(i, j int) bool { return out.User[i].Name < out.User[j].Name })
	for _, u := range s.userThreads {
		out.UserThreads = append(out.UserThreads, *u)
	}
	sort.Slice(out.UserThreads, func(i, j int) bool {
		a, b := out.UserThreads[i], out.UserThreads[j]
		return a.Name < b.Name || a.Name == b.Name && (a.PID < b.PID || a.PID == b.PID && a.TID < b.TID)
	})
	for _, w := range s.waits {
		out.Waits = append(out.Waits, *w)
	}
	sort.Slice(out.Waits, func(i, j int) bool {
		a, b := out.Waits[i], out.Waits[j]
		if a.Seconds != b.Seconds {
			return a.Seconds > b.Seconds
		}
		return a.TID < b.TID || a.TID == b.TID && a.What < b.What
	})
	for _, t := range s.threads {
		out.Threads = append(out.Threads, *t)
	}
	sort.Slice(out.Threads, func(i, j int) bool {
		a, b := out.Threads[i], out.Threads[j]
		if a.Launches != b.Launches {
			return a.Launches > b.Launches
		}
		return a.TID < b.TID
	})
	return out
}

// largest is the key with the largest value, the smallest such key on a
// tie (so that summaries do not depend on map order); ok is false for an
// empty map.
func largest[K, V cmp.Ordered](m map[K]V) (k K, ok bool) {
	var best V
	for key, v := range m {
		if !ok || v > best || v == best && key < k {
			k, best, ok = key, v, true
		}
	}
	return k, ok
}
