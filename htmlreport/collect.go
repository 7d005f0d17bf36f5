package htmlreport

import (
	"math"
	"slices"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// The fields of a step series: the step thread's phases (they sum to the
// wall time), the step's times, capacities, pool and launches, and its
// bound (1 in the field of the step's bound: a bin's mean is the share of
// its steps so bound).
const (
	fDispatch = iota
	fData
	fSync
	fCompute
	fOther
	fWall
	fStepTime
	fDataTime
	fComputeTime
	fSyncTime
	fTrainCap
	fThru
	fInferCap
	fPool
	fLaunches
	fSamples
	fBoundInference
	fBoundData
	fBoundCompute
	fBoundBalanced
)

// phaseFields are the phases in the order they stack, bottom up, with
// their names (correlate.Phase) and colours (phaseColor).
var phaseFields = []struct {
	field int
	phase correlate.Phase
	label string
}{
	{fCompute, correlate.PhaseCompute, "compute"},
	{fSync, correlate.PhaseSync, "sync"},
	{fData, correlate.PhaseData, "data"},
	{fDispatch, correlate.PhaseDispatchWait, "dispatch wait"},
	{fOther, correlate.PhaseOther, "other"},
}

// boundFields are the step bounds a series counts.
var boundFields = []struct {
	field int
	bound correlate.Bound
	label string
}{
	{fBoundCompute, correlate.BoundCompute, "GPU compute"},
	{fBoundData, correlate.BoundData, "data loading"},
	{fBoundInference, correlate.BoundInference, "inference"},
	{fBoundBalanced, correlate.BoundBalanced, "balanced"},
}

// The fields of a GPU's series of NVML samples.
const (
	gUtil = iota
	gSMActive
	gPower
	gMemUsed
	gSMClock
	gTemp
)

// Collector takes a run's events and steps as they come, in bounded
// memory. Calls come from one goroutine at a time (gpuprof's sink holds
// its lock around them), so it has no lock of its own.
type Collector struct {
	procs   map[uint32]*procSeries
	pids    []uint32 // in the order their first step came
	gpus    map[int]*series
	gpuIDs  []int
	samples map[int]int // NVML samples seen, by GPU: their index
	firstNS uint64      // the earliest instant seen
	lastNS  uint64
	// stepNS is the earliest step's start: the plots' zero, so that the
	// wait before a job's first step (imports, loading a model) does not
	// take their width.
	stepNS uint64
	notes  []string
}

type procSeries struct {
	steps  series
	rank   int
	ranked bool
	tid    uint32
}

// maxNotes bounds the notes kept: the first ones say how steps were found.
const maxNotes = 40

// NewCollector returns an empty collector.
func NewCollector() *Collector {
	return &Collector{procs: map[uint32]*procSeries{}, gpus: map[int]*series{}, samples: map[int]int{}}
}

func (c *Collector) seen(start, end uint64) {
	if start > 0 && (c.firstNS == 0 || start < c.firstNS) {
		c.firstNS = start
	}
	c.lastNS = max(c.lastNS, end)
}

// Event takes an event: the GPUs' samples; the rest come as steps.
func (c *Collector) Event(e *events.Event) {
	if e.Kind != events.KindGPUSamples {
		return
	}
	for i := range e.GPUs {
		s := &e.GPUs[i]
		ser := c.gpus[s.GPU]
		if ser == nil {
			ser = &series{}
			c.gpus[s.GPU] = ser
			c.gpuIDs = append(c.gpuIDs, s.GPU)
			slices.Sort(c.gpuIDs)
		}
		it := item{index: c.samples[s.GPU], startNS: s.TimeNS, endNS: s.TimeNS}
		c.samples[s.GPU]++
		set := func(f int, v float64) {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				it.set(f, v)
			}
		}
		set(gUtil, s.GPUUtil)
		set(gSMActive, 100*s.SMActive)
		set(gPower, s.PowerW)
		set(gMemUsed, s.MemUsed)
		set(gSMClock, s.SMClockMHz)
		set(gTemp, s.TempC)
		ser.add(&it)
		c.seen(s.TimeNS, s.TimeNS)
	}
}

// Step takes a step (control.Output).
func (c *Collector) Step(st correlate.Step) {
	p := c.procs[st.PID]
	if p == nil {
		p = &procSeries{}
		c.procs[st.PID] = p
		c.pids = append(c.pids, st.PID)
	}
	if st.Rank != nil {
		p.rank, p.ranked = *st.Rank, true
	}
	p.tid = st.TID
	it := stepItem(&st)
	p.steps.add(&it)
	c.seen(st.StartNS, st.EndNS)
	if st.StartNS > 0 && (c.stepNS == 0 || st.StartNS < c.stepNS) {
		c.stepNS = st.StartNS
	}
}

// stepItem is a step's fields, those measured in it.
func stepItem(st *correlate.Step) item {
	it := item{index: st.Index, startNS: st.StartNS, endNS: st.EndNS}
	for _, pf := range phaseFields {
		it.set(pf.field, st.PhaseTime(pf.phase))
	}
	it.set(fWall, st.WallTime)
	it.set(fStepTime, st.StepTime)
	it.set(fSyncTime, st.SyncTime)
	if st.DataMeasured {
		it.set(fDataTime, st.DataTime)
	}
	if st.ComputeSource != correlate.ComputeNone {
		it.set(fComputeTime, st.ComputeTime)
	}
	positive := func(f int, v float64) {
		if v > 0 {
			it.set(f, v)
		}
	}
	positive(fTrainCap, st.TrainCapacity)
	positive(fThru, st.Thru)
	positive(fInferCap, st.InferCapacity)
	if st.PoolMeasured {
		it.set(fPool, float64(st.Pool))
	}
	if st.SamplesMeasured {
		it.set(fSamples, float64(st.Samples))
	}
	if st.LaunchesCounted {
		it.set(fLaunches, float64(st.Launches+st.GraphLaunches))
	}
	b := correlate.StepBound(*st)
	for _, bf := range boundFields {
		v := 0.0
		if b == bf.bound {
			v = 1
		}
		it.set(bf.field, v)
	}
	return it
}

// origin is the plots' zero: the first step's start, or without steps
// the first instant seen.
func (c *Collector) origin() uint64 {
	if c.stepNS > 0 {
		return c.stepNS
	}
	return c.firstNS
}

// Note keeps the run's first notes (control.Output).
func (c *Collector) Note(msg string) {
	if len(c.notes) < maxNotes {
		c.notes = append(c.notes, msg)
	}
}

// Processes is control.Output's; the page counts processes itself.
func (c *Collector) Processes(int) {}
