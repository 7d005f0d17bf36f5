package nvml

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// BenchmarkCallReal times each NVML call the sampler makes, on GPU 0 of this
// host through the real library: where a round's cost comes from (see
// fields' every). ns/op is wall time, cpu-ns/op CPU time, both per call.
// Calls back to back: the driver answers most of them from a cache then.
func BenchmarkCallReal(b *testing.B) {
	lib, d, get := realGPU0(b)
	for _, c := range realCalls(lib, d, get) {
		b.Run(c.name, func(b *testing.B) {
			if r := c.call(); r != nvml.SUCCESS && r != nvml.ERROR_NOT_FOUND {
				b.Skipf("%s: %v", c.name, r)
			}
			before := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				c.call()
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkCallSpacedReal is BenchmarkCallReal with each call made once a
// sampling round (100 ms apart), as the sampler makes it: the driver
// answers back-to-back calls from a cache, spaced ones it may not (on an
// H200, 0.4-0.9 ms each: a trip to the GPU's firmware). wall-ns/call is the
// call's own time; ns/op holds the 100 ms pause.
func BenchmarkCallSpacedReal(b *testing.B) {
	lib, d, get := realGPU0(b)
	for _, c := range realCalls(lib, d, get) {
		b.Run(c.name, func(b *testing.B) {
			var wall time.Duration
			for range b.N {
				time.Sleep(100 * time.Millisecond)
				t0 := time.Now()
				c.call()
				wall += time.Since(t0)
			}
			b.ReportMetric(float64(wall)/float64(b.N), "wall-ns/call")
		})
	}
}

// realGPU0 opens the real library and GPU 0, with a GPM metrics request
// over two samples, or skips where there is none.
func realGPU0(b *testing.B) (Library, Device, *nvml.GpmMetricsGetType) {
	lib := Open()
	if r := lib.Init(); r != nvml.SUCCESS {
		b.Skipf("no NVML on this host, nothing to measure: Init: %v", r)
	}
	b.Cleanup(func() { lib.Shutdown() })
	h, r := lib.DeviceGetHandleByIndex(0)
	if r != nvml.SUCCESS {
		b.Skipf("GPU 0: %v", r)
	}
	s1, _ := lib.GpmSampleAlloc()
	s2, _ := lib.GpmSampleAlloc()
	get := &nvml.GpmMetricsGetType{NumMetrics: uint32(len(gpmMetrics)), Sample1: s1, Sample2: s2}
	for i, m := range gpmMetrics {
		get.Metrics[i].MetricId = uint32(m.id)
	}
	return lib, h, get
}

type realCall struct {
	name string
	call func() nvml.Return
}

// realCalls are the calls a round makes on d, by name.
func realCalls(lib Library, d Device, get *nvml.GpmMetricsGetType) []realCall {
	s1, s2 := get.Sample1, get.Sample2
	ret := func(_ any, r nvml.Return) nvml.Return { return r }
	return []realCall{
		{"GetUtilizationRates", func() nvml.Return { return ret(d.GetUtilizationRates()) }},
		{"GetMemoryInfo", func() nvml.Return { return ret(d.GetMemoryInfo()) }},
		{"GetMemoryInfo_v2", func() nvml.Return { return ret(d.GetMemoryInfo_v2()) }},
		{"GetPowerUsage", func() nvml.Return { return ret(d.GetPowerUsage()) }},
		{"GetEnforcedPowerLimit", func() nvml.Return { return ret(d.GetEnforcedPowerLimit()) }},
		{"GetTemperature", func() nvml.Return { return ret(d.GetTemperature(nvml.TEMPERATURE_GPU)) }},
		{"GetClockInfo", func() nvml.Return { return ret(d.GetClockInfo(nvml.CLOCK_SM)) }},
		{"GetCurrentClocksEventReasons", func() nvml.Return { return ret(d.GetCurrentClocksEventReasons()) }},
		{"GetPcieThroughput", func() nvml.Return { return ret(d.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES)) }},
		{"GetTotalEccErrors", func() nvml.Return {
			return ret(d.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC))
		}},
		{"GetComputeRunningProcesses", func() nvml.Return { return ret(d.GetComputeRunningProcesses()) }},
		{"GetProcessUtilization", func() nvml.Return { return ret(d.GetProcessUtilization(0)) }},
		{"GpmSampleGet", func() nvml.Return { return d.GpmSampleGet(s1) }},
		{"GpmMetricsGet", func() nvml.Return { d.GpmSampleGet(s2); return lib.GpmMetricsGet(get) }},
	}
}
