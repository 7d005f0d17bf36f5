package correlate

import (
	"maps"
	"math"
	"slices"

	"github.com/gpuprof/gpuprof/events"
)

// Stat is a running summary of one sampled quantity; N is 0 where it was
// never read.
type Stat struct {
	N              int
	Mean, Min, Max float64
}

func (s *Stat) add(v float64) {
	if !events.Has(v) {
		return
	}
	if s.N == 0 {
		s.Min, s.Max = v, v
	}
	s.N++
	s.Mean += (v - s.Mean) / float64(s.N)
	s.Min, s.Max = min(s.Min, v), max(s.Max, v)
}

// GPURun is one GPU over the whole run, from its samples (streaming, so a
// run of days costs no more memory than one of seconds).
type GPURun struct {
	GPU                                    events.GPU
	Samples                                int
	Util, MemUtil                          Stat // %
	SMActive, SMOccupancy                  Stat // 0..1 (GPM)
	TensorActive, DRAMActive               Stat // 0..1 (GPM)
	MemUsed                                Stat // bytes
	MemTotal, PowerLimitW                  float64
	PowerW, TempC, SMClockMHz, MemClockMHz Stat
	PCIeTxBps, PCIeRxBps                   Stat
	NVLinkTxBps, NVLinkRxBps               Stat
	// Throttled counts the samples each slowdown reason was active in.
	Throttled map[string]int
	// ECC errors counted while attached.
	ECCCorrected, ECCUncorrected float64
	PIDs                         []uint32 // processes with a compute context on it
	Xids                         []uint64
}

type gpuRun struct {
	r            GPURun
	eccC0, eccU0 float64
	eccC1, eccU1 float64
}

func newGPURun() *gpuRun {
	return &gpuRun{r: GPURun{Throttled: map[string]int{}}, eccC0: math.NaN(), eccU0: math.NaN(), eccC1: math.NaN(), eccU1: math.NaN()}
}

func (g *gpuRun) add(s *events.GPUSample) {
	r := &g.r
	r.Samples++
	r.Util.add(s.GPUUtil)
	r.MemUtil.add(s.MemUtil)
	r.SMActive.add(s.SMActive)
	r.SMOccupancy.add(s.SMOccupancy)
	r.TensorActive.add(s.TensorActive)
	r.DRAMActive.add(s.DRAMActive)
	r.MemUsed.add(s.MemUsed)
	r.PowerW.add(s.PowerW)
	r.TempC.add(s.TempC)
	r.SMClockMHz.add(s.SMClockMHz)
	r.MemClockMHz.add(s.MemClockMHz)
	r.PCIeTxBps.add(s.PCIeTxBps)
	r.PCIeRxBps.add(s.PCIeRxBps)
	r.NVLinkTxBps.add(s.NVLinkTxBps)
	r.NVLinkRxBps.add(s.NVLinkRxBps)
	if events.Has(s.MemTotal) {
		r.MemTotal = s.MemTotal
	}
	if events.Has(s.PowerLimitW) {
		r.PowerLimitW = s.PowerLimitW
	}
	if s.ThrottleKnown {
		for _, n := range ThrottleReasons(s.Throttle) {
			r.Throttled[n]++
		}
	}
	if events.Has(s.ECCCorrected) {
		if !events.Has(g.eccC0) {
			g.eccC0 = s.ECCCorrected
		}
		g.eccC1 = s.ECCCorrected
	}
	if events.Has(s.ECCUncorrected) {
		if !events.Has(g.eccU0) {
			g.eccU0 = s.ECCUncorrected
		}
		g.eccU1 = s.ECCUncorrected
	}
	for _, p := range s.Procs {
		if !slices.Contains(r.PIDs, p.PID) {
			r.PIDs = append(r.PIDs, p.PID)
		}
	}
}

// ThrottleReasons names the slowdown reasons set in an NVML clocks event
// reasons mask.
func ThrottleReasons(mask uint64) []string {
	var out []string
	for _, t := range events.ThrottleNames {
		if mask&t.Bit != 0 {
			out = append(out, t.Name)
		}
	}
	return out
}

// Runs returns each GPU's whole run, in NVML order, with the ECC errors and
// Xids seen while attached.
func (g *GPUs) Runs() []GPURun {
	var out []GPURun
	for _, d := range g.devices {
		gr := g.run[d.Index]
		if gr == nil {
			out = append(out, GPURun{GPU: d})
			continue
		}
		r := gr.r
		r.GPU = d
		r.ECCCorrected, r.ECCUncorrected = gr.eccC1-gr.eccC0, gr.eccU1-gr.eccU0
		r.Throttled = maps.Clone(gr.r.Throttled)
		r.PIDs = slices.Clone(gr.r.PIDs)
		slices.Sort(r.PIDs)
		for _, x := range g.xids {
			if x.GPU == d.Index {
				r.Xids = append(r.Xids, x.Code)
			}
		}
		out = append(out, r)
	}
	return out
}

// GPUGroup aggregates a named set of GPUs (attach --group NAME=GPUS): the
// mean of their utilisation and SM activity, and the sum of their power
// and memory.
type GPUGroup struct {
	Name            string
	GPUs            []int
	Util, SMActive  float64 // NaN where none of the GPUs had it
	PowerW, MemUsed float64 // sums of the GPUs' means; NaN likewise
	Throttled       int     // GPUs with any slowdown reason seen
}

// Groups aggregates runs by the named sets of NVML indexes.
func Groups(runs []GPURun, groups []NamedGPUs) []GPUGroup {
	var out []GPUGroup
	for _, g := range groups {
		agg := GPUGroup{Name: g.Name, GPUs: g.GPUs}
		var util, sm, power, mem Stat
		for _, r := range runs {
			if !slices.Contains(g.GPUs, r.GPU.Index) {
				continue
			}
			if r.Util.N > 0 {
				util.add(r.Util.Mean)
			}
			if r.SMActive.N > 0 {
				sm.add(r.SMActive.Mean)
			}
			if r.PowerW.N > 0 {
				power.add(r.PowerW.Mean)
			}
			if r.MemUsed.N > 0 {
				mem.add(r.MemUsed.Mean)
			}
			if len(r.Throttled) > 0 {
				agg.Throttled++
			}
		}
		mean := func(s Stat) float64 {
			if s.N == 0 {
				return math.NaN()
			}
			return s.Mean
		}
		sum := func(s Stat) float64 { return mean(s) * float64(s.N) }
		agg.Util, agg.SMActive, agg.PowerW, agg.MemUsed = mean(util), mean(sm), sum(power), sum(mem)
		out = append(out, agg)
	}
	return out
}

// NamedGPUs is a --group: a name for a set of NVML indexes.
type NamedGPUs struct {
	Name string
	GPUs []int
}
