package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuprof/gpuprof/correlate"
)

// Every step metric is labelled with its process and, in a distributed
// job, its rank ("" where the process has none, which Prometheus treats
// as no label): a bounded set, one per process profiled.
var procLabels = []string{"pid", "rank"}

func withLabels(extra ...string) []string { return append(append([]string{}, procLabels...), extra...) }

// Phases of a step, as gpuprof_phase_seconds' phase label.
const (
	phaseData     = "data"
	phaseCompute  = "compute"
	phaseDispatch = "dispatch_wait"
	phaseSync     = "sync"
)

// What a step's counts were complete for (gpuprof_counted_*{counts}):
// launch counting is sampled (--launch-duty), and the kinds of Python
// waits may go with it, so a per-step or per-second figure divides by
// the steps, or the wall time, in which they were counted.
const (
	countsLaunches  = "launches"   // LaunchesCounted: launches and device-to-device copies
	countsWaits     = "waits"      // WaitsObserved: the dispatch wait
	countsWaitKinds = "wait_kinds" // WaitKindsCounted: data, lock, I/O, full and GIL waits
	// GraphKernelsKnown: the kernels of every graph launch (none, or
	// graphs captured while attached, their launches counted)
	countsGraphKernels = "graph_kernels"
)

// stepMetrics are what each step adds to.
type stepMetrics struct {
	step, wall    *prometheus.HistogramVec
	phase         *prometheus.HistogramVec
	steps         *prometheus.CounterVec // by verdict
	computeSource *prometheus.CounterVec
	counted       *prometheus.CounterVec
	countedWall   *prometheus.CounterVec
	launches      *prometheus.CounterVec // by thread
	graphLaunches *prometheus.CounterVec
	graphKernels  *prometheus.CounterVec
	copyBytes     *prometheus.CounterVec // by direction
	waits         *prometheus.CounterVec // by kind
	samples       *prometheus.CounterVec
	pool          *prometheus.GaugeVec
	inferCap      *prometheus.GaugeVec
	trainCap      *prometheus.GaugeVec
	thru          *prometheus.GaugeVec
}

func newStepMetrics() *stepMetrics {
	hist := func(name, help string, buckets []float64, extra ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, withLabels(extra...))
	}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, withLabels(extra...))
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, procLabels)
	}
	return &stepMetrics{
		step: hist("gpuprof_step_seconds",
			"Step time: from one step boundary to the next, less the dispatch wait and lead-in (the JSON lines' step_time).", stepBuckets),
		wall: hist("gpuprof_step_wall_seconds",
			"Wall time from one step boundary to the next (wall_time).", stepBuckets),
		phase: hist("gpuprof_phase_seconds",
			"Time of each phase of a step, in the steps where it was measured: data (data_time), compute (compute_time), "+
				"dispatch_wait (waiting for samples), sync (blocked in CUDA synchronisations).", phaseBuckets, "phase"),
		steps: counter("gpuprof_steps_total",
			"Steps, by what each was bound by (the seed's rules on the one step): inference, data_loading, gpu_compute, balanced, unknown.", "verdict"),
		computeSource: counter("gpuprof_compute_source_steps_total",
			"Steps by where their compute time came from: cuda_events (the job's own readings), derived (first launch to last sync), probe, none.", "source"),
		counted: counter("gpuprof_counted_steps_total",
			"Steps whose counts were complete, by what: launches (launch counting is sampled, --launch-duty), waits (the dispatch wait), "+
				"wait_kinds (data, lock, io, full and GIL waits), graph_kernels (the kernels of every graph launch).", "counts"),
		countedWall: counter("gpuprof_counted_wall_seconds_total",
			"Wall time of the steps counted in gpuprof_counted_steps_total, by what was counted: the denominator of a share.", "counts"),
		launches: counter("gpuprof_kernel_launches_total",
			"Kernel launches in steps whose launches were counted, by the step's thread (step) or the process's other threads (other).", "thread"),
		graphLaunches: counter("gpuprof_graph_launches_total",
			"CUDA graph launches by the step's thread, in steps whose launches were counted."),
		graphKernels: counter("gpuprof_graph_kernels_total",
			"Kernels the step's thread's CUDA graph launches ran, in steps where every one's graph was captured while attached "+
				"with its launches counted (gpuprof_counted_steps_total{counts=\"graph_kernels\"})."),
		copyBytes: counter("gpuprof_copy_bytes_total",
			"Bytes copied by CUDA memcpy calls, by direction: h2d, d2h, other (default or host to host) in every step; "+
				"d2d only in steps whose launches were counted.", "direction"),
		waits: counter("gpuprof_wait_seconds_total",
			"Time the step's thread waited, by kind: dispatch (for samples) in steps whose waits were observed; "+
				"data (DataLoader), lock, io, full (a put into a full queue), gil in steps whose wait kinds were counted.", "kind"),
		samples: counter("gpuprof_pool_takes_total",
			"Items taken from the sample pool by the step's thread, where its takes are counted."),
		pool: gauge("gpuprof_pool_items",
			"Length of the sample pool at the latest step's end, where it is read."),
		inferCap: gauge("gpuprof_inference_capacity_samples_per_second",
			"Inference capacity I at the latest step where known: samples a second the engines could make."),
		trainCap: gauge("gpuprof_train_capacity_samples_per_second",
			"Training capacity T of the latest step where known: its batch over its step time."),
		thru: gauge("gpuprof_throughput_samples_per_second",
			"Throughput of the latest step where known: its batch over its wall time."),
	}
}

func (m *stepMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.step, m.wall, m.phase, m.steps, m.computeSource, m.counted, m.countedWall,
		m.launches, m.graphLaunches, m.graphKernels, m.copyBytes, m.waits, m.samples, m.pool, m.inferCap, m.trainCap, m.thru}
}

// observe adds one step. Where a number was not measured it is left out,
// never added as zero: a phase's histogram has only the steps that
// measured it, a sampled count only the steps it was counted in.
func (m *stepMetrics) observe(s correlate.Step) {
	pid := strconv.FormatUint(uint64(s.PID), 10)
	rank := ""
	if s.Rank != nil {
		rank = strconv.Itoa(*s.Rank)
	}
	m.step.WithLabelValues(pid, rank).Observe(s.StepTime)
	m.wall.WithLabelValues(pid, rank).Observe(s.WallTime)
	m.steps.WithLabelValues(pid, rank, string(correlate.StepBound(s))).Inc()
	source := string(s.ComputeSource)
	if s.ComputeSource == correlate.ComputeNone {
		source = "none"
	}
	m.computeSource.WithLabelValues(pid, rank, source).Inc()

	phase := func(name string, v float64) { m.phase.WithLabelValues(pid, rank, name).Observe(v) }
	if s.DataMeasured {
		phase(phaseData, s.DataTime)
	}
	if s.ComputeSource != correlate.ComputeNone {
		phase(phaseCompute, s.ComputeTime)
	}
	if s.WaitsObserved {
		phase(phaseDispatch, s.DispatchWait)
	}
	phase(phaseSync, s.SyncTime)

	counted := func(what string) {
		m.counted.WithLabelValues(pid, rank, what).Inc()
		m.countedWall.WithLabelValues(pid, rank, what).Add(s.WallTime)
	}
	bytes := func(dir string, n uint64) { m.copyBytes.WithLabelValues(pid, rank, dir).Add(float64(n)) }
	bytes("h2d", s.H2DBytes)
	bytes("d2h", s.D2HBytes)
	bytes("other", s.OtherCopyBytes)
	if s.LaunchesCounted {
		counted(countsLaunches)
		m.launches.WithLabelValues(pid, rank, "step").Add(float64(s.Launches))
		m.launches.WithLabelValues(pid, rank, "other").Add(float64(s.OtherLaunches))
		m.graphLaunches.WithLabelValues(pid, rank).Add(float64(s.GraphLaunches))
		bytes("d2d", s.D2DBytes)
	}
	if s.GraphKernelsKnown {
		counted(countsGraphKernels)
		m.graphKernels.WithLabelValues(pid, rank).Add(float64(s.GraphKernels))
	}
	wait := func(kind string, v float64) { m.waits.WithLabelValues(pid, rank, kind).Add(v) }
	if s.WaitsObserved {
		counted(countsWaits)
		wait("dispatch", s.DispatchWait)
	}
	if s.WaitKindsCounted {
		counted(countsWaitKinds)
		wait("data", s.DataWait)
		wait("lock", s.LockWait)
		wait("io", s.IOWait)
		wait("full", s.FullWait)
		wait("gil", s.GILWait)
	}

	if s.SamplesMeasured {
		m.samples.WithLabelValues(pid, rank).Add(float64(s.Samples))
	}
	if s.PoolMeasured {
		m.pool.WithLabelValues(pid, rank).Set(float64(s.Pool))
	}
	// Zero is how a Step says a capacity is unknown (omitempty).
	for _, c := range [...]struct {
		g *prometheus.GaugeVec
		v float64
	}{{m.inferCap, s.InferCapacity}, {m.trainCap, s.TrainCapacity}, {m.thru, s.Thru}} {
		if c.v > 0 {
			c.g.WithLabelValues(pid, rank).Set(c.v)
		}
	}
}
