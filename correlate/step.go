package correlate

import "github.com/gpuprof/gpuprof/cudaapi"

// ComputeSource says where a step's compute time came from.
type ComputeSource string

const (
	// ComputeEvents: the application's own cudaEventElapsedTime readings.
	ComputeEvents ComputeSource = "cuda_events"
	// ComputeDerived: from the first launch of the step to the return of
	// the last host sync after it; the GPU time the step's work took if the
	// GPU was idle when the step began.
	ComputeDerived ComputeSource = "derived"
	// ComputeProbe: the time in the functions named with --probe compute=.
	ComputeProbe ComputeSource = "probe"
	// ComputeNone: no readings and no sync to bound the work.
	ComputeNone ComputeSource = ""
)

// Step is one training step of the step thread. Times are in seconds,
// instants in CLOCK_MONOTONIC nanoseconds.
type Step struct {
	Index    int     `json:"step"`
	PID      uint32  `json:"pid"`
	Rank     *int    `json:"rank,omitempty"` // in a distributed job (torchrun's RANK), where the process has one
	TID      uint32  `json:"tid"`
	StartNS  uint64  `json:"t_start_ns"` // the previous boundary
	EndNS    uint64  `json:"t_end_ns"`   // this boundary
	WallTime float64 `json:"wall_time"`  // from boundary to boundary
	// StepTime is the wall time less the dispatch wait: the step's data,
	// compute and optimizer, as AngelSpec's perf/step_time.
	StepTime float64 `json:"step_time"`

	// Python waits on the step's thread (WaitsObserved: the interpreter's
	// lock waits are probed, so zero means none).
	WaitsObserved bool    `json:"-"`
	DispatchWait  float64 `json:"dispatch_wait"` // waiting for work to arrive: queue gets, events, futures
	DataWait      float64 `json:"data_wait"`     // waiting for DataLoader workers
	LockWait      float64 `json:"lock_wait"`     // waiting for a plain lock
	IOWait        float64 `json:"io_wait"`       // in poll or select on other descriptors
	FullWait      float64 `json:"full_wait"`     // for room in a full queue (a blocked put)
	// GILWait is the part of those waits spent taking the GIL back after
	// the awaited lock was free: other Python threads held it.
	GILWait  float64 `json:"gil_wait"`
	WaitedOn string  `json:"waited_on,omitempty"`
	// WaitKindsCounted says the Python waits were probed all through the
	// step: where they go with the launch probes (probes/sampling.go) the
	// dispatch wait is still whole (the gets time it) but the data, lock,
	// I/O, full and GIL waits are only known in such steps.
	WaitKindsCounted bool `json:"-"`
	// LeadIn is the time from the previous boundary to a dispatch wait
	// that opens the step: the loop's bookkeeping between steps, neither
	// waiting nor working on this step.
	LeadIn float64 `json:"lead_in"`
	// DataTime is the step's data phases, less dispatch wait: from the
	// step's start, and from each data event after compute began, to where
	// compute begins (phases.go).
	DataTime     float64    `json:"data_time"`
	DataMeasured bool       `json:"-"`
	DataSource   DataSource `json:"data_source,omitempty"` // where its data phases were found to end

	// Time in functions named with --probe: fetch= or data= (a store
	// fetch) on the step's thread, compute= likewise, and infer= on any
	// thread (the engines' generate calls, their mean, and the calls a
	// second the engines seen could make).
	FetchTime       float64 `json:"fetch_time,omitempty"`
	FetchCalls      int     `json:"fetch_calls,omitempty"`
	ComputeCallTime float64 `json:"compute_call_time,omitempty"`
	InferCalls      int     `json:"infer_calls,omitempty"`
	// Without infer= probes: the iterations of inference engine threads
	// (engines.go) that ended in the step.
	InferIterations int     `json:"infer_iterations,omitempty"`
	InferEngines    int     `json:"infer_engines,omitempty"`
	InferBatchTime  float64 `json:"infer_batch_time,omitempty"`
	InferCapacity   float64 `json:"infer_capacity,omitempty"`

	// Pool is the sample pool's length at the step's end (the queue the
	// step thread gets from, or engines put into; pools.go).
	Pool         int    `json:"pool"`
	PoolKind     string `json:"pool_kind,omitempty"`
	PoolMeasured bool   `json:"-"`
	// Samples is how many items were taken from the pool since the previous
	// step's reading (a queue.Queue's deque counts its appends and pops):
	// the step's batch, for train_capacity and thru without --batch-size.
	Samples         int  `json:"samples"`
	SamplesMeasured bool `json:"-"`

	// With the batch size known (--batch-size, else the step's Samples):
	// samples a second the step could train if data were always there, and
	// the samples a second it did (the seed's T and thru).
	TrainCapacity float64 `json:"train_capacity,omitempty"`
	Thru          float64 `json:"thru,omitempty"`

	ComputeTime   float64       `json:"compute_time"`
	ComputeSource ComputeSource `json:"compute_source"`
	Readings      int           `json:"elapsed_readings"`

	SyncTime float64 `json:"sync_time"` // host blocked in synchronisations
	Syncs    int     `json:"syncs"`

	// LaunchesCounted says launch probes were attached all through the
	// step, so Launches, GraphLaunches and OtherLaunches are complete
	// (launch counting is sampled once steps are found).
	LaunchesCounted bool `json:"launches_counted"`
	Launches        int  `json:"launches"`
	GraphLaunches   int  `json:"graph_launches"`
	// GraphKernels are the kernels the step's graph launches ran, known
	// (GraphKernelsKnown) where every one replayed a graph captured while
	// launches were counted (graphs.go): the kernels the step ran are
	// Launches + GraphKernels.
	GraphKernels      int  `json:"graph_kernels"`
	GraphKernelsKnown bool `json:"-"`
	// CapturedLaunches are launches made while the thread captured a
	// CUDA graph: recorded into it, not run, so not in Launches.
	CapturedLaunches int `json:"captured_launches,omitempty"`
	// OtherLaunches are kernels other threads of the process launched
	// meanwhile: PyTorch's autograd thread runs the backward pass, for one,
	// and inference engine threads their own work.
	OtherLaunches int `json:"other_launches"`

	// Device-to-device copies are probed with the launches (probes/sampling.go):
	// D2DBytes is complete, and the copies counted in Copies and CopyTime
	// include them, only where LaunchesCounted.
	CopyTime       float64 `json:"copy_time"` // host time inside copy calls
	Copies         int     `json:"copies"`
	H2DBytes       uint64  `json:"h2d_bytes"`
	D2HBytes       uint64  `json:"d2h_bytes"`
	D2DBytes       uint64  `json:"d2d_bytes"`
	OtherCopyBytes uint64  `json:"other_copy_bytes"` // default direction or host-to-host

	AllocBytes uint64 `json:"alloc_bytes"`
	FreeBytes  uint64 `json:"free_bytes"`

	// GPU is the hardware state of the process's GPUs while the step ran
	// (NVML), where sampled.
	GPU *StepGPU `json:"gpu,omitempty"`
	// LostEvents is how many events the probes lost (the ring buffer
	// full) in spans of loss overlapping the step: its numbers are then
	// incomplete (calls, waits, launches missing; a boundary missed merges
	// two steps into one). 0: none lost around it.
	LostEvents uint64 `json:"lost_events,omitempty"`

	// Phases is the step thread's timeline from StartNS to EndNS
	// (timeline.go), for labelling profile samples by phase; its sums are
	// the times above (PhaseTime). Not written: the JSONL has the sums.
	Phases []PhaseSpan `json:"-"`
}

func addCopy(s *Step, dir cudaapi.Dir, n uint64) {
	switch dir {
	case cudaapi.DirHtoD:
		s.H2DBytes += n
	case cudaapi.DirDtoH:
		s.D2HBytes += n
	case cudaapi.DirDtoD:
		s.D2DBytes += n
	default:
		s.OtherCopyBytes += n
	}
}
