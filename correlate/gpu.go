package correlate

import (
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/gpuprof/gpuprof/events"
)

// GPUs holds the job's GPU samples (NVML) so that steps can be joined with
// the hardware state they ran on. One is shared by the correlators of a
// job's processes (Config.GPUs); the caller adds samples and steps from one
// goroutine.
type GPUs struct {
	interval uint64 // ns between sampling rounds
	devices  []events.GPU
	recent   map[int][]events.GPUSample // per GPU, the last keepSamples, oldest first
	procs    map[uint32][]int           // PID -> GPUs it has a compute context on
	run      map[int]*gpuRun            // per GPU, the whole run
	xids     []events.Xid
}

// keepSamples bounds each GPU's history (to twice this): a step longer
// than this many sampling rounds is joined with at least its last
// keepSamples.
const keepSamples = 256

// NewGPUs returns an empty state for the GPUs sampled every interval.
func NewGPUs(devices []events.GPU, interval time.Duration) *GPUs {
	return &GPUs{interval: uint64(interval), devices: devices, recent: map[int][]events.GPUSample{},
		procs: map[uint32][]int{}, run: map[int]*gpuRun{}}
}

// Add takes one sampling round.
func (g *GPUs) Add(round []events.GPUSample) {
	seen := map[uint32][]int{}
	for _, s := range round {
		h := append(g.recent[s.GPU], s)
		if len(h) >= 2*keepSamples { // drop the older half at once, not one a round
			h = slices.Delete(h, 0, len(h)-keepSamples)
		}
		g.recent[s.GPU] = h
		r := g.run[s.GPU]
		if r == nil {
			r = newGPURun()
			g.run[s.GPU] = r
		}
		r.add(&s)
		for _, p := range s.Procs {
			seen[p.PID] = append(seen[p.PID], s.GPU)
		}
	}
	for pid, gpus := range seen {
		g.procs[pid] = gpus
	}
}

// AddXid records an Xid error.
func (g *GPUs) AddXid(x events.Xid) { g.xids = append(g.xids, x) }

// ProcessGPUs returns the GPUs a process was last seen using: from NVML's
// process list, else the only GPU sampled.
func (g *GPUs) ProcessGPUs(pid uint32) []int {
	if gpus, ok := g.procs[pid]; ok {
		return gpus
	}
	if len(g.devices) == 1 {
		return []int{g.devices[0].Index}
	}
	return nil
}

// StepGPU is the hardware state of a step's GPUs while it ran: the samples
// taken during the step, or the last one before its end when the step is
// shorter than the sampling interval (NVML's utilisation is itself an
// average over its last sample period). Several GPUs are averaged. NaN
// fields were not read and are left out of the JSON.
type StepGPU struct {
	GPUs         []int   `json:"gpus"`
	Samples      int     `json:"samples"`
	Util         float64 `json:"util_pct"`
	SMActive     float64 `json:"sm_active"`
	SMOccupancy  float64 `json:"sm_occupancy"`
	TensorActive float64 `json:"tensor_active"`
	DRAMActive   float64 `json:"dram_active"`
	PowerW       float64 `json:"power_w"`
	SMClockMHz   float64 `json:"sm_clock_mhz"`
	TempC        float64 `json:"temp_c"`
	Throttle     uint64  `json:"throttle_reasons"` // NVML's bits, ORed (events.ThrottleNames)
	// The process's own share of its GPUs (NVML's per-process accounting).
	ProcSMUtil  float64 `json:"proc_sm_util_pct"`
	ProcMemUsed float64 `json:"proc_mem_used_bytes"`
}

// MarshalJSON leaves out the fields that were not read.
func (s StepGPU) MarshalJSON() ([]byte, error) {
	m := map[string]any{"gpus": s.GPUs, "samples": s.Samples, "throttle_reasons": s.Throttle}
	for k, v := range map[string]float64{"util_pct": s.Util, "sm_active": s.SMActive, "sm_occupancy": s.SMOccupancy,
		"tensor_active": s.TensorActive, "dram_active": s.DRAMActive, "power_w": s.PowerW, "sm_clock_mhz": s.SMClockMHz,
		"temp_c": s.TempC, "proc_sm_util_pct": s.ProcSMUtil, "proc_mem_used_bytes": s.ProcMemUsed} {
		if events.Has(v) {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// join fills s.GPU from the samples of the step's process's GPUs.
func (g *GPUs) join(s *Step) {
	gpus := g.ProcessGPUs(s.PID)
	if len(gpus) == 0 {
		return
	}
	var picked []*events.GPUSample
	for _, gpu := range gpus {
		picked = append(picked, g.during(gpu, s.StartNS, s.EndNS)...)
	}
	if len(picked) == 0 {
		return
	}
	out := &StepGPU{GPUs: gpus, Samples: len(picked)}
	field := func(get func(*events.GPUSample) float64) float64 {
		var sum float64
		n := 0
		for _, p := range picked {
			if v := get(p); events.Has(v) {
				sum += v
				n++
			}
		}
		if n == 0 {
			return math.NaN()
		}
		return sum / float64(n)
	}
	out.Util = field(func(p *events.GPUSample) float64 { return p.GPUUtil })
	out.SMActive = field(func(p *events.GPUSample) float64 { return p.SMActive })
	out.SMOccupancy = field(func(p *events.GPUSample) float64 { return p.SMOccupancy })
	out.TensorActive = field(func(p *events.GPUSample) float64 { return p.TensorActive })
	out.DRAMActive = field(func(p *events.GPUSample) float64 { return p.DRAMActive })
	out.PowerW = field(func(p *events.GPUSample) float64 { return p.PowerW })
	out.SMClockMHz = field(func(p *events.GPUSample) float64 { return p.SMClockMHz })
	out.TempC = field(func(p *events.GPUSample) float64 { return p.TempC })
	own := func(get func(*events.GPUProcess) float64) func(*events.GPUSample) float64 {
		return func(p *events.GPUSample) float64 {
			for i := range p.Procs {
				if p.Procs[i].PID == s.PID {
					return get(&p.Procs[i])
				}
			}
			return math.NaN()
		}
	}
	out.ProcSMUtil = field(own(func(p *events.GPUProcess) float64 { return p.SMUtil }))
	out.ProcMemUsed = field(own(func(p *events.GPUProcess) float64 { return p.MemUsed }))
	for _, p := range picked {
		if p.ThrottleKnown {
			out.Throttle |= p.Throttle &^ 1 // bit 0 is "GPU idle", not a slowdown
		}
	}
	s.GPU = out
}

// during returns gpu's samples taken in (start, end], else the last before
// end if it is at most two sampling rounds old.
func (g *GPUs) during(gpu int, start, end uint64) []*events.GPUSample {
	h := g.recent[gpu] // in time order
	after := func(t uint64) int {
		i, _ := slices.BinarySearchFunc(h, t, func(s events.GPUSample, t uint64) int {
			if s.TimeNS <= t {
				return -1
			}
			return 1
		})
		return i // the first sample taken after t
	}
	from, to := after(start), after(end)
	var out []*events.GPUSample
	for i := from; i < to; i++ {
		out = append(out, &h[i])
	}
	if len(out) == 0 && to > 0 && end-h[to-1].TimeNS <= 2*g.interval {
		out = append(out, &h[to-1])
	}
	return out
}

// GPUSteps summarises the GPU state of the steps joined with samples.
type GPUSteps struct {
	Steps                  int
	GPUs                   []int // the NVML indexes of the last step's GPUs
	Util, SMActive         Dist  // %, 0..1
	TensorActive, PowerW   Dist
	SMClockMHz, ProcSMUtil Dist
	// Throttled counts the steps each slowdown reason was active in.
	Throttled map[string]int
}

type gpuStepsAcc struct {
	gpus                                   []int
	steps                                  int
	util, sm, tensor, power, clock, procSM series
	throttled                              map[string]int
}

func (a *gpuStepsAcc) add(st *Step) {
	g := st.GPU
	if g == nil {
		return
	}
	a.steps++
	a.gpus = g.GPUs
	for _, f := range []struct {
		to *series
		v  float64
	}{{&a.util, g.Util}, {&a.sm, g.SMActive}, {&a.tensor, g.TensorActive}, {&a.power, g.PowerW},
		{&a.clock, g.SMClockMHz}, {&a.procSM, g.ProcSMUtil}} {
		if events.Has(f.v) {
			f.to.add(f.v)
		}
	}
	for _, n := range ThrottleReasons(g.Throttle) {
		if a.throttled == nil {
			a.throttled = map[string]int{}
		}
		a.throttled[n]++
	}
}

func (a *gpuStepsAcc) summary() GPUSteps {
	return GPUSteps{Steps: a.steps, GPUs: slices.Clone(a.gpus), Util: a.util.dist(), SMActive: a.sm.dist(), TensorActive: a.tensor.dist(),
		PowerW: a.power.dist(), SMClockMHz: a.clock.dist(), ProcSMUtil: a.procSM.dist(), Throttled: a.throttled}
}
