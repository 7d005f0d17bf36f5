package nvml

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fakeHost is go-nvml's DGX H200 mock (8 GPUs) with every function the
// sampler calls set to plausible values, which a test overrides as it needs.
// A mock function left nil panics, so each one used must be set here.
type fakeHost struct {
	srv  *server.Server
	devs []*server.Device

	xids chan nvml.EventData // what the event set's Wait hands out
	set  *mock.EventSet

	gpmAllocs []*fakeGpmSample
	gpmSeq    []int // GpmSampleGet calls per GPU
	gpmBad    atomic.Int32
}

// fakeGpmSample remembers which GPU filled it, and in which of its rounds.
type fakeGpmSample struct {
	mock.GpmSample
	dev, seq int
	freed    bool
}

// Values the fake GPUs report; i is the GPU index.
const (
	fakeMemUsedGiB   = 10 // + i
	fakeReserved     = 512 << 20
	fakePowerMW      = 300_000
	fakeLimitMW      = 700_000
	fakeSMClock      = 1980
	fakeMemClock     = 2619
	fakeReasons      = 0x4  // software power cap
	fakeOldReasons   = 0x8  // what the pre-R535 call says, to tell them apart
	fakePCIeTxKB     = 1000 // + i
	fakePCIeRxKB     = 2000 // + i
	fakeECCCorrected = 3
	fakeSharedPID    = 4242 // on GPUs 0 and 1; GPU i also has 5000+i
	fakeNVLinkRxMiB  = 1000
	fakeNVLinkTxMiB  = 2000
	fakeGPMPCIeTxMiB = 300
	fakeGPMPCIeRxMiB = 500
)

func gib(n int) uint64 { return uint64(n) << 30 }

func newFakeHost(tb testing.TB) *fakeHost {
	tb.Helper()
	srv := dgxh200.New()
	h := &fakeHost{srv: srv, xids: make(chan nvml.EventData, 8), gpmSeq: make([]int, len(srv.Devices))}
	for _, d := range srv.Devices {
		h.devs = append(h.devs, d.(*server.Device))
	}
	h.set = &mock.EventSet{
		WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
			select {
			case e := <-h.xids:
				return e, nvml.SUCCESS
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return h.set, nvml.SUCCESS }
	srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		s := &fakeGpmSample{dev: -1}
		s.FreeFunc = func() nvml.Return { s.freed = true; return nvml.SUCCESS }
		h.gpmAllocs = append(h.gpmAllocs, s)
		return s, nvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = h.gpmMetricsGet
	for i, d := range h.devs {
		h.setDevice(i, d)
	}
	return h
}

func (h *fakeHost) setDevice(i int, d *server.Device) {
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for k, c := range d.PciBusID {
			p.BusId[k] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: uint32(50 + i), Memory: uint32(20 + i)}, nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		// v1's "used" counts the driver's reservation too
		used := gib(fakeMemUsedGiB+i) + fakeReserved
		return nvml.Memory{Total: d.MemoryInfo.Total, Used: used, Free: d.MemoryInfo.Total - used}, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		used := gib(fakeMemUsedGiB + i)
		return nvml.Memory_v2{Total: d.MemoryInfo.Total, Reserved: fakeReserved, Used: used,
			Free: d.MemoryInfo.Total - used - fakeReserved}, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(fakePowerMW + 1000*i), nvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return fakeLimitMW, nvml.SUCCESS }
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return uint32(40 + i), nvml.SUCCESS
	}
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		switch c {
		case nvml.CLOCK_SM:
			return fakeSMClock, nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return fakeMemClock, nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return fakeReasons, nvml.SUCCESS }
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return fakeOldReasons, nvml.SUCCESS }
	d.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
		if c == nvml.PCIE_UTIL_TX_BYTES {
			return uint32(fakePCIeTxKB + i), nvml.SUCCESS
		}
		return uint32(fakePCIeRxKB + i), nvml.SUCCESS
	}
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if c != nvml.VOLATILE_ECC {
			return 1 << 40, nvml.SUCCESS // the aggregate count: a wrong answer to ask for
		}
		if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return fakeECCCorrected, nvml.SUCCESS
		}
		return 0, nvml.SUCCESS
	}
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{Version: nvml.GPM_SUPPORT_VERSION, IsSupportedDevice: 1}, nvml.SUCCESS
	}
	d.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return {
		h.gpmSeq[i]++
		f := s.(*fakeGpmSample)
		f.dev, f.seq = i, h.gpmSeq[i]
		return nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		ps := []nvml.ProcessInfo{{Pid: uint32(5000 + i), UsedGpuMemory: gib(i + 1)}}
		if i < 2 {
			ps = append(ps, nvml.ProcessInfo{Pid: fakeSharedPID, UsedGpuMemory: gib(20)})
		}
		return ps, nvml.SUCCESS
	}
	d.GetProcessUtilizationFunc = func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		return []nvml.ProcessUtilizationSample{
			{Pid: uint32(5000 + i), TimeStamp: last + 50, SmUtil: 10, MemUtil: 1},
			{Pid: uint32(5000 + i), TimeStamp: last + 100, SmUtil: 70, MemUtil: 30}, // mean 40, 15.5
			{Pid: 9999, TimeStamp: last + 80, SmUtil: 5, MemUtil: 5},                // a graphics process
		}, nvml.SUCCESS
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
}

// fakeGPMValue is the percentage the fake GPM gives metric id on GPU i.
func fakeGPMValue(id nvml.GpmMetricId, i int) float64 {
	switch id {
	case nvml.GPM_METRIC_SM_UTIL:
		return float64(40 + i)
	case nvml.GPM_METRIC_SM_OCCUPANCY:
		return 25
	case nvml.GPM_METRIC_ANY_TENSOR_UTIL:
		return 60
	case nvml.GPM_METRIC_DRAM_BW_UTIL:
		return 30
	case nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC:
		return fakeNVLinkRxMiB
	case nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC:
		return fakeNVLinkTxMiB
	case nvml.GPM_METRIC_PCIE_TX_PER_SEC:
		return fakeGPMPCIeTxMiB
	case nvml.GPM_METRIC_PCIE_RX_PER_SEC:
		return fakeGPMPCIeRxMiB
	}
	return -1
}

// gpmMetricsGet answers only for two samples of one GPU from consecutive
// rounds, older first, as NVML computes rates between them.
func (h *fakeHost) gpmMetricsGet(m *nvml.GpmMetricsGetType) nvml.Return {
	s1, ok1 := m.Sample1.(*fakeGpmSample)
	s2, ok2 := m.Sample2.(*fakeGpmSample)
	if !ok1 || !ok2 || s1 == s2 || s1.dev < 0 || s1.dev != s2.dev || s2.seq != s1.seq+1 {
		h.gpmBad.Add(1)
		return nvml.ERROR_INVALID_ARGUMENT
	}
	for k := range m.NumMetrics {
		mt := &m.Metrics[k]
		mt.Value = fakeGPMValue(nvml.GpmMetricId(mt.MetricId), s1.dev)
		mt.NvmlReturn = uint32(nvml.SUCCESS)
	}
	return nvml.SUCCESS
}
