package nvml

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Library is the part of go-nvml's nvml.Interface the sampler calls. Its
// methods keep go-nvml's signatures so that both the real library (Open) and
// go-nvml's mocks (pkg/nvml/mock/dgxh200) satisfy it as they are.
type Library interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
	EventSetCreate() (nvml.EventSet, nvml.Return)
	GpmSampleAlloc() (nvml.GpmSample, nvml.Return)
	GpmMetricsGet(*nvml.GpmMetricsGetType) nvml.Return

	// Extensions().LookupSymbol says whether the loaded libnvidia-ml.so.1
	// has a function: go-nvml binds C symbols lazily, so calling one an
	// older driver lacks would end the process rather than fail.
	Extensions() nvml.ExtendedInterface
}

// Device is the part of go-nvml's nvml.Device the sampler calls.
type Device interface {
	GetIndex() (int, nvml.Return)
	GetUUID() (string, nvml.Return)
	GetName() (string, nvml.Return)
	GetPciInfo() (nvml.PciInfo, nvml.Return)

	GetUtilizationRates() (nvml.Utilization, nvml.Return)
	GetMemoryInfo() (nvml.Memory, nvml.Return)
	GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return)
	GetPowerUsage() (uint32, nvml.Return)
	GetEnforcedPowerLimit() (uint32, nvml.Return)
	GetTemperature(nvml.TemperatureSensors) (uint32, nvml.Return)
	GetClockInfo(nvml.ClockType) (uint32, nvml.Return)
	GetMaxClockInfo(nvml.ClockType) (uint32, nvml.Return)
	GetCurrentClocksEventReasons() (uint64, nvml.Return)
	GetCurrentClocksThrottleReasons() (uint64, nvml.Return) // drivers before R535
	GetPcieThroughput(nvml.PcieUtilCounter) (uint32, nvml.Return)
	GetTotalEccErrors(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return)

	GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return)
	GpmSampleGet(nvml.GpmSample) nvml.Return

	GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return)
	GetProcessUtilization(lastSeenTimestamp uint64) ([]nvml.ProcessUtilizationSample, nvml.Return)

	GetSupportedEventTypes() (uint64, nvml.Return)
	RegisterEvents(eventTypes uint64, set nvml.EventSet) nvml.Return
}

// Symbols that drivers older than the ones we target lack (see Extensions).
const (
	symClocksEventReasons = "nvmlDeviceGetCurrentClocksEventReasons" // R535
	symGpmSupport         = "nvmlGpmQueryDeviceSupport"              // R520, with the other Gpm calls
	symMemoryInfoV2       = "nvmlDeviceGetMemoryInfo_v2"             // R510
)
