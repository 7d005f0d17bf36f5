package nvml

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/events"
)

// mib is GPM's traffic unit: nvml.h gives the *_PER_SEC metrics in MiB/s.
const mib = 1 << 20

// gpmMetrics are the GPM metrics read, the field each fills and how.
var gpmMetrics = [...]struct {
	id    nvml.GpmMetricId
	f     field
	scale float64 // to the unit of events.GPUSample
	call  string  // for the log
}{
	{nvml.GPM_METRIC_SM_UTIL, fSMActive, 0.01, "GpmMetricsGet(SM_UTIL)"}, // percent -> fraction
	{nvml.GPM_METRIC_SM_OCCUPANCY, fSMOccupancy, 0.01, "GpmMetricsGet(SM_OCCUPANCY)"},
	{nvml.GPM_METRIC_ANY_TENSOR_UTIL, fTensorActive, 0.01, "GpmMetricsGet(ANY_TENSOR_UTIL)"},
	{nvml.GPM_METRIC_DRAM_BW_UTIL, fDRAMActive, 0.01, "GpmMetricsGet(DRAM_BW_UTIL)"},
	{nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, fNVLinkRx, mib, "GpmMetricsGet(NVLINK_TOTAL_RX_PER_SEC)"},
	{nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, fNVLinkTx, mib, "GpmMetricsGet(NVLINK_TOTAL_TX_PER_SEC)"},
	{nvml.GPM_METRIC_PCIE_TX_PER_SEC, fPCIeTx, mib, "GpmMetricsGet(PCIE_TX_PER_SEC)"},
	{nvml.GPM_METRIC_PCIE_RX_PER_SEC, fPCIeRx, mib, "GpmMetricsGet(PCIE_RX_PER_SEC)"},
}

// gpmState is a GPU's two GPM samples: each round fills one, and the metrics
// are the difference between it and the other, filled the round before.
type gpmState struct {
	samples [2]nvml.GpmSample
	next    int              // the sample to fill this round
	primed  bool             // the other one holds the previous round's
	at      uint64           // when the other one was filled (Config.Now)
	last    events.GPUSample // the GPM fields of the last metrics taken
	get     nvml.GpmMetricsGetType
	which   [len(gpmMetrics)]int // get.Metrics[i] is gpmMetrics[which[i]]
}

// setupGPM finds which GPUs have GPM (Hopper and newer) and allocates their
// two samples, once: the first round then has no GPM values (nothing to
// difference against yet).
func (s *Sampler) setupGPM() {
	if s.cfg.GPMEvery < 0 {
		for _, g := range s.gpus {
			g.unsupported.add(fGPM) // asked not to: no notice
		}
		return
	}
	if s.lib.Extensions().LookupSymbol(symGpmSupport) != nil {
		for _, g := range s.gpus {
			g.unsupported.add(fGPM)
			s.notice(fGPM, g.info.Index, symGpmSupport, nvml.ERROR_FUNCTION_NOT_FOUND)
		}
		return
	}
	for _, g := range s.gpus {
		var sup nvml.GpmSupport
		if !s.ask(g, fGPM, func() (r nvml.Return) { sup, r = g.dev.GpmQueryDeviceSupport(); return }) {
			continue
		}
		if sup.IsSupportedDevice == 0 {
			g.unsupported.add(fGPM)
			s.notice(fGPM, g.info.Index, "GpmQueryDeviceSupport", nvml.ERROR_NOT_SUPPORTED)
			continue
		}
		st := &gpmState{last: events.NewGPUSample(g.info.Index, 0)}
		for i := range st.samples {
			ret, err := s.calls.do("GpmSampleAlloc", g.info.Index, s.cfg.CallTimeout, func() (r nvml.Return) {
				st.samples[i], r = s.lib.GpmSampleAlloc()
				return r
			})
			if err != nil || ret != nvml.SUCCESS {
				s.log.Warn("GPM sample not allocated: GPM metrics left out", "gpu", g.info.Index, "ret", ret, "err", err)
				g.unsupported.add(fGPM)
				st.free(s, g)
				st = nil
				break
			}
		}
		g.gpm = st
	}
}

// readGPM fills smp's GPM fields from the previous round's sample to this
// one's. A metric NVML could not compute over so short a period (DRAM
// activity, under ~50ms apart on an H200) comes back NaN: absent.
func (s *Sampler) readGPM(g *gpu, smp *events.GPUSample) {
	st := g.gpm
	if !g.hasGPM() {
		return
	}
	now := s.cfg.Now()
	if st.primed && now-st.at < uint64(s.cfg.GPMEvery) {
		// Within a GPM period of the last sample: the metrics of the last
		// period stand (they are rates over it, as utilization is).
		copyGPM(smp, &st.last)
		return
	}
	cur := st.samples[st.next]
	if !s.askAs(g, fGPM, "GpmSampleGet", func() nvml.Return { return g.dev.GpmSampleGet(cur) }) {
		return // the previous sample stays: next round spans two periods
	}
	if st.primed && st.prepare(g.unsupported) {
		if s.askAs(g, fGPM, "GpmMetricsGet", func() nvml.Return { return s.lib.GpmMetricsGet(&st.get) }) {
			s.takeGPM(g, st, smp)
			copyGPM(&st.last, smp)
		}
	}
	st.next, st.primed, st.at = 1-st.next, true, now
}

// gpmEvery is how often GPM samples are taken at most, by default. Each
// sample and read is a trip through the GPU's firmware: on an H200 (driver
// 580, BenchmarkSampleRoundReal, 100 rounds 100 ms apart) a round cost
// 0.54% of a core with GPM every 200 ms, 0.42% every 500 ms, 0.38% every
// second, over a floor of 0.21% for NVML loaded and not asked. GPM
// metrics are averages over the time between two samples, so a step
// shorter than this gets the activity of the period around it either way.
const gpmEvery = 500 * time.Millisecond

// copyGPM copies the GPM fields of from into to.
func copyGPM(to, from *events.GPUSample) {
	for _, m := range gpmMetrics {
		*gpmField(to, m.f) = *gpmField(from, m.f)
	}
}

// prepare fills get for the metrics not known unsupported; false: none left.
func (st *gpmState) prepare(unsup fieldSet) bool {
	n := 0
	for i, m := range gpmMetrics {
		if unsup.has(m.f) {
			continue
		}
		st.get.Metrics[n] = nvml.GpmMetric{MetricId: uint32(m.id)}
		st.which[n] = i
		n++
	}
	st.get.NumMetrics = uint32(n)
	st.get.Sample1, st.get.Sample2 = st.samples[1-st.next], st.samples[st.next]
	return n > 0
}

// takeGPM copies the metrics GpmMetricsGet returned into smp, booking each
// one the GPU does not support (NVLink on a PCIe card) as its own field.
func (s *Sampler) takeGPM(g *gpu, st *gpmState, smp *events.GPUSample) {
	for i := range int(st.get.NumMetrics) {
		got, m := st.get.Metrics[i], gpmMetrics[st.which[i]]
		ret := nvml.Return(got.NvmlReturn)
		switch {
		case ret == nvml.SUCCESS:
			*gpmField(smp, m.f) = got.Value * m.scale
		case unsupported(ret):
			g.unsupported.add(m.f)
			s.notice(m.f, g.info.Index, m.call, ret)
		}
	}
}

func gpmField(smp *events.GPUSample, f field) *float64 {
	switch f {
	case fSMActive:
		return &smp.SMActive
	case fSMOccupancy:
		return &smp.SMOccupancy
	case fTensorActive:
		return &smp.TensorActive
	case fDRAMActive:
		return &smp.DRAMActive
	case fNVLinkRx:
		return &smp.NVLinkRxBps
	case fNVLinkTx:
		return &smp.NVLinkTxBps
	case fPCIeTx:
		return &smp.PCIeTxBps
	}
	return &smp.PCIeRxBps
}

// free releases the samples allocated; Close calls it for every GPU.
func (st *gpmState) free(s *Sampler, g *gpu) {
	for _, smp := range st.samples {
		if smp != nil {
			s.calls.do("GpmSampleFree", g.info.Index, s.cfg.CallTimeout, smp.Free)
		}
	}
}

func (s *Sampler) freeGPM() {
	for _, g := range s.gpus {
		if g.gpm != nil {
			g.gpm.free(s, g)
			g.gpm = nil
		}
	}
}
