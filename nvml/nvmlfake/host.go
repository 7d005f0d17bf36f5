// Package nvmlfake is go-nvml's DGX H200 mock with every function
// gpuprof's sampler calls set to plausible values: for the nvml package's
// tests, and for a gpuprof built with -tags nvmlfake, which its end-to-end
// tests run where no GPU is.
package nvmlfake

import (
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// Host is go-nvml's DGX H200 mock (8 GPUs) with every function the
// sampler calls set to plausible values, which a test overrides as it needs.
// A mock function left nil panics, so each one used must be set here.
type Host struct {
	Srv  *server.Server
	Devs []*server.Device

	Xids chan nvml.EventData // what the event set's Wait hands out
	Set  *mock.EventSet

	GpmAllocs []*GpmSample
	gpmSeq    []int        // GpmSampleGet calls per GPU
	GpmBad    atomic.Int32 // GpmMetricsGet calls refused: samples not from consecutive rounds of one GPU
}

// GpmSample remembers which GPU filled it, and in which of its rounds.
type GpmSample struct {
	mock.GpmSample
	Dev, Seq int
	Freed    bool
}

// Values the fake GPUs report; i is the GPU index.
const (
	MemUsedGiB   = 10 // + i
	Reserved     = 512 << 20
	PowerMW      = 300_000
	LimitMW      = 700_000
	SMClock      = 1980
	MaxSMClock   = 2100 // above SMClock: the throttle reasons are asked
	MemClock     = 2619
	Reasons      = 0x4  // software power cap
	OldReasons   = 0x8  // what the pre-R535 call says, to tell them apart
	PCIeTxKB     = 1000 // + i
	PCIeRxKB     = 2000 // + i
	ECCCorrected = 3
	SharedPID    = 4242 // on GPUs 0 and 1; GPU i also has 5000+i
	NVLinkRxMiB  = 1000
	NVLinkTxMiB  = 2000
	GPMPCIeTxMiB = 300
	GPMPCIeRxMiB = 500
)

// GiB is n GiB in bytes.
func GiB(n int) uint64 { return uint64(n) << 30 }

// NewHost returns the eight fake GPUs.
func NewHost() *Host {
	srv := dgxh200.New()
	h := &Host{Srv: srv, Xids: make(chan nvml.EventData, 8), gpmSeq: make([]int, len(srv.Devices))}
	for _, d := range srv.Devices {
		h.Devs = append(h.Devs, d.(*server.Device))
	}
	h.Set = &mock.EventSet{
		WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
			select {
			case e := <-h.Xids:
				return e, nvml.SUCCESS
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return h.Set, nvml.SUCCESS }
	srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		s := &GpmSample{Dev: -1}
		s.FreeFunc = func() nvml.Return { s.Freed = true; return nvml.SUCCESS }
		h.GpmAllocs = append(h.GpmAllocs, s)
		return s, nvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = h.GpmMetricsGet
	for i, d := range h.Devs {
		h.setDevice(i, d)
	}
	return h
}

func (h *Host) setDevice(i int, d *server.Device) {
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
		used := GiB(MemUsedGiB+i) + Reserved
		return nvml.Memory{Total: d.MemoryInfo.Total, Used: used, Free: d.MemoryInfo.Total - used}, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		used := GiB(MemUsedGiB + i)
		return nvml.Memory_v2{Total: d.MemoryInfo.Total, Reserved: Reserved, Used: used,
			Free: d.MemoryInfo.Total - used - Reserved}, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return uint32(PowerMW + 1000*i), nvml.SUCCESS }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return LimitMW, nvml.SUCCESS }
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return uint32(40 + i), nvml.SUCCESS
	}
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		switch c {
		case nvml.CLOCK_SM:
			return SMClock, nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return MemClock, nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetMaxClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		if c != nvml.CLOCK_SM {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return MaxSMClock, nvml.SUCCESS
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return Reasons, nvml.SUCCESS }
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return OldReasons, nvml.SUCCESS }
	d.GetPcieThroughputFunc = func(c nvml.PcieUtilCounter) (uint32, nvml.Return) {
		if c == nvml.PCIE_UTIL_TX_BYTES {
			return uint32(PCIeTxKB + i), nvml.SUCCESS
		}
		return uint32(PCIeRxKB + i), nvml.SUCCESS
	}
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		if c != nvml.VOLATILE_ECC {
			return 1 << 40, nvml.SUCCESS // the aggregate count: a wrong answer to ask for
		}
		if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return ECCCorrected, nvml.SUCCESS
		}
		return 0, nvml.SUCCESS
	}
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		return nvml.GpmSupport{Version: nvml.GPM_SUPPORT_VERSION, IsSupportedDevice: 1}, nvml.SUCCESS
	}
	d.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return {
		h.gpmSeq[i]++
		f := s.(*GpmSample)
		f.Dev, f.Seq = i, h.gpmSeq[i]
		return nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		ps := []nvml.ProcessInfo{{Pid: uint32(5000 + i), UsedGpuMemory: GiB(i + 1)}}
		if i < 2 {
			ps = append(ps, nvml.ProcessInfo{Pid: SharedPID, UsedGpuMemory: GiB(20)})
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

// GPMValue is the percentage the fake GPM gives metric id on GPU i.
func GPMValue(id nvml.GpmMetricId, i int) float64 {
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
		return NVLinkRxMiB
	case nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC:
		return NVLinkTxMiB
	case nvml.GPM_METRIC_PCIE_TX_PER_SEC:
		return GPMPCIeTxMiB
	case nvml.GPM_METRIC_PCIE_RX_PER_SEC:
		return GPMPCIeRxMiB
	}
	return -1
}

// GpmMetricsGet answers only for two samples of one GPU from consecutive
// rounds, older first, as NVML computes rates between them.
func (h *Host) GpmMetricsGet(m *nvml.GpmMetricsGetType) nvml.Return {
	s1, ok1 := m.Sample1.(*GpmSample)
	s2, ok2 := m.Sample2.(*GpmSample)
	if !ok1 || !ok2 || s1 == s2 || s1.Dev < 0 || s1.Dev != s2.Dev || s2.Seq != s1.Seq+1 {
		h.GpmBad.Add(1)
		return nvml.ERROR_INVALID_ARGUMENT
	}
	for k := range m.NumMetrics {
		mt := &m.Metrics[k]
		mt.Value = GPMValue(nvml.GpmMetricId(mt.MetricId), s1.Dev)
		mt.NvmlReturn = uint32(nvml.SUCCESS)
	}
	return nvml.SUCCESS
}
