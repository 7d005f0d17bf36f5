package nvml

import "time"

// field is one thing the sampler reads from a GPU, asked for by one NVML
// call (GPM's by one call for them all); a GPU that does not support it is
// not asked again.
type field uint8

const (
	fUtil field = iota
	fMemory
	fPower
	fPowerLimit
	fTemp
	fSMClock
	fMemClock
	fThrottle
	fPCIeTx
	fPCIeRx
	fECCCorrected
	fECCUncorrected
	fGPM // the device's GPM support and samples, as a whole
	fSMActive
	fSMOccupancy
	fTensorActive
	fDRAMActive
	fNVLinkRx
	fNVLinkTx
	fProcs
	fProcUtil
	numFields
)

// slowEvery and procUtilEvery are how often the costly calls are made, at
// most, and staticEvery the fields that hardly change; see fields.
const (
	slowEvery     = time.Second
	procUtilEvery = 5 * time.Second
	staticEvery   = 10 * time.Second
)

// fields names each field for the log (what it is, the call that reads it)
// and says how often to read it: every round, or at most every slowEvery
// for the two calls that cost far more than the others. Measured on an H200
// (driver 580), a call in steady state: GetProcessUtilization 2.2ms of CPU;
// GetPcieThroughput 0.8ms of CPU and 21ms of wall time, as it counts bytes
// for 20ms (GPM gives PCIe traffic instead where it can); GPM ~50µs; the
// others under 10µs. Measured again with BenchmarkCallReal (CPU a call):
// GetProcessUtilization 2.77ms, GetPcieThroughput 0.95ms, GpmSampleGet
// 84µs, GpmMetricsGet 88µs, GetComputeRunningProcesses 11µs, the others
// 1-6µs. Those are back to back, answered from the driver's cache; made
// once a round, 100 ms apart (BenchmarkCallSpacedReal), each takes
// 0.4-0.9 ms of wall time and a round of all of them ~0.9% of a core at
// 10 Hz. So a round reads what a step is joined with (utilization, power,
// SM clock, throttle reasons below the top clock), GPM every gpmEvery;
// what moves slowly (memory, temperature, memory clock, the process list)
// once a second; the power limit and ECC counts every ten.
var fields = [numFields]struct {
	what, call string
	every      time.Duration // 0: every round
}{
	fUtil:           {"GPU and memory utilization", "GetUtilizationRates", 0},
	fMemory:         {"memory used", "GetMemoryInfo", slowEvery},
	fPower:          {"power draw", "GetPowerUsage", 0},
	fPowerLimit:     {"power limit", "GetEnforcedPowerLimit", staticEvery},
	fTemp:           {"temperature", "GetTemperature", slowEvery},
	fSMClock:        {"SM clock", "GetClockInfo(CLOCK_SM)", 0},
	fMemClock:       {"memory clock", "GetClockInfo(CLOCK_MEM)", slowEvery},
	fThrottle:       {"throttle reasons", "GetCurrentClocksEventReasons", 0},
	fPCIeTx:         {"PCIe tx", "GetPcieThroughput(TX)", slowEvery},
	fPCIeRx:         {"PCIe rx", "GetPcieThroughput(RX)", slowEvery},
	fECCCorrected:   {"corrected ECC errors", "GetTotalEccErrors(CORRECTED)", staticEvery},
	fECCUncorrected: {"uncorrected ECC errors", "GetTotalEccErrors(UNCORRECTED)", staticEvery},
	fGPM:            {"GPM metrics (SM, tensor, DRAM activity; NVLink and PCIe traffic)", "GpmQueryDeviceSupport", 0},
	fSMActive:       {"SM activity", "GpmMetricsGet(SM_UTIL)", 0},
	fSMOccupancy:    {"SM occupancy", "GpmMetricsGet(SM_OCCUPANCY)", 0},
	fTensorActive:   {"tensor activity", "GpmMetricsGet(ANY_TENSOR_UTIL)", 0},
	fDRAMActive:     {"DRAM activity", "GpmMetricsGet(DRAM_BW_UTIL)", 0},
	fNVLinkRx:       {"NVLink rx", "GpmMetricsGet(NVLINK_TOTAL_RX_PER_SEC)", 0},
	fNVLinkTx:       {"NVLink tx", "GpmMetricsGet(NVLINK_TOTAL_TX_PER_SEC)", 0}, // GPM only
	fProcs:          {"processes and their memory", "GetComputeRunningProcesses", slowEvery},
	fProcUtil:       {"per-process utilization", "GetProcessUtilization", procUtilEvery},
}

// fieldSet is a set of fields.
type fieldSet uint32

func (s fieldSet) has(f field) bool { return s&(1<<f) != 0 }
func (s *fieldSet) add(f field)     { *s |= 1 << f }
