package nvml

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuprof/gpuprof/events"
)

// Unit conversions, from what nvml.h says each call returns.
const (
	milli = 1e-3 // mW -> W
	kib   = 1024 // GetPcieThroughput's KB/s: NVML's KB, like its memory sizes, is 1024 bytes
)

// readDevice reads g's device-wide fields into smp: one NVML call each, so
// that one unsupported or hung call costs only its own field.
func (s *Sampler) readDevice(g *gpu, smp *events.GPUSample) {
	d := g.dev
	var u nvml.Utilization
	if s.ask(g, fUtil, func() (r nvml.Return) { u, r = d.GetUtilizationRates(); return }) {
		smp.GPUUtil, smp.MemUtil = float64(u.Gpu), float64(u.Memory)
	}
	if s.memoryV2 {
		var m nvml.Memory_v2
		if s.askAs(g, fMemory, "GetMemoryInfo_v2", func() (r nvml.Return) { m, r = d.GetMemoryInfo_v2(); return }) {
			smp.MemUsed, smp.MemTotal = float64(m.Used), float64(m.Total)
		}
	} else {
		var m nvml.Memory
		if s.ask(g, fMemory, func() (r nvml.Return) { m, r = d.GetMemoryInfo(); return }) {
			smp.MemUsed, smp.MemTotal = float64(m.Used), float64(m.Total)
		}
	}
	smp.PowerW = s.askUint32(g, fPower, d.GetPowerUsage) * milli
	smp.PowerLimitW = s.askUint32(g, fPowerLimit, d.GetEnforcedPowerLimit) * milli
	smp.TempC = s.askUint32(g, fTemp, func() (uint32, nvml.Return) { return d.GetTemperature(nvml.TEMPERATURE_GPU) })
	smp.SMClockMHz = s.askUint32(g, fSMClock, func() (uint32, nvml.Return) { return d.GetClockInfo(nvml.CLOCK_SM) })
	smp.MemClockMHz = s.askUint32(g, fMemClock, func() (uint32, nvml.Return) { return d.GetClockInfo(nvml.CLOCK_MEM) })

	// A GPU at its top SM clock is slowed by nothing: the reasons are asked
	// only below it (a busy GPU mostly runs at it, and each call is one
	// more trip to the driver).
	if g.maxSMClock > 0 && smp.SMClockMHz >= g.maxSMClock && !g.unsupported.has(fThrottle) {
		smp.Throttle, smp.ThrottleKnown = 0, true
	} else {
		reasons, name := d.GetCurrentClocksEventReasons, fields[fThrottle].call
		if !s.eventReasons {
			reasons, name = d.GetCurrentClocksThrottleReasons, "GetCurrentClocksThrottleReasons"
		}
		var bits uint64
		if s.askAs(g, fThrottle, name, func() (r nvml.Return) { bits, r = reasons(); return }) {
			smp.Throttle, smp.ThrottleKnown = bits, true
		}
	}

	if !g.hasGPM() { // else GPM gives PCIe, over the whole period and at no 20ms wait
		smp.PCIeTxBps = kib * s.askUint32(g, fPCIeTx, func() (uint32, nvml.Return) { return d.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES) })
		smp.PCIeRxBps = kib * s.askUint32(g, fPCIeRx, func() (uint32, nvml.Return) { return d.GetPcieThroughput(nvml.PCIE_UTIL_RX_BYTES) })
	}

	smp.ECCCorrected = s.askECC(g, fECCCorrected, nvml.MEMORY_ERROR_TYPE_CORRECTED)
	smp.ECCUncorrected = s.askECC(g, fECCUncorrected, nvml.MEMORY_ERROR_TYPE_UNCORRECTED)
}

// askUint32 asks for a uint32 field: its value, or NaN where absent.
func (s *Sampler) askUint32(g *gpu, f field, call func() (uint32, nvml.Return)) float64 {
	var v uint32
	if s.ask(g, f, func() (r nvml.Return) { v, r = call(); return }) {
		return float64(v)
	}
	return nan
}

// askECC asks for a volatile ECC count (since the driver loaded): the
// aggregate one survives reboots and says nothing of this job.
func (s *Sampler) askECC(g *gpu, f field, kind nvml.MemoryErrorType) float64 {
	var n uint64
	if s.ask(g, f, func() (r nvml.Return) { n, r = g.dev.GetTotalEccErrors(kind, nvml.VOLATILE_ECC); return }) {
		return float64(n)
	}
	return nan
}
