package events

import "math"

// GPU names a device as NVML and the job see it.
type GPU struct {
	Index int    `json:"index"` // NVML's index (nvidia-smi's)
	UUID  string `json:"uuid"`
	Name  string `json:"name"`
	BusID string `json:"bus_id"`
}

// GPUSample is one reading of a GPU's hardware state, taken by the driver
// (NVML) apart from CUDA, so it costs the job nothing. A float field is NaN
// where the GPU does not support it or it could not be read: absent, never
// zero (Has).
type GPUSample struct {
	TimeNS uint64 // CLOCK_MONOTONIC, as the probes' events
	GPU    int    // NVML index

	GPUUtil float64 // % of the last sample period a kernel ran (nvidia-smi's utilization.gpu)
	MemUtil float64 // % of it device memory was read or written

	MemUsed, MemTotal float64 // bytes

	PowerW, PowerLimitW float64
	TempC               float64
	SMClockMHz          float64
	MemClockMHz         float64

	// Throttle is NVML's clocks event reasons bitmask (ThrottleNames), with
	// ThrottleKnown false where it could not be read.
	Throttle      uint64
	ThrottleKnown bool

	PCIeTxBps, PCIeRxBps     float64 // bytes a second
	NVLinkTxBps, NVLinkRxBps float64 // bytes a second, all links

	// Volatile ECC error counts since the driver loaded.
	ECCCorrected, ECCUncorrected float64

	// GPM (Hopper and newer), fractions 0..1 over the sample period.
	SMActive     float64 // SMs with a warp resident (DCGM's SM activity)
	SMOccupancy  float64 // resident warps over the maximum
	TensorActive float64 // any tensor pipe active
	DRAMActive   float64 // DRAM bandwidth used over peak

	// Processes with a compute context on the GPU.
	Procs []GPUProcess
}

// GPUProcess is one process's use of a GPU.
type GPUProcess struct {
	PID     uint32
	MemUsed float64 // bytes; NaN where not reported
	SMUtil  float64 // % of the last sample period; NaN where not reported
	MemUtil float64 // %; NaN where not reported
}

// Xid is an Xid error the driver reported on a GPU (a fault, a fallen-off
// GPU, an ECC page retirement ...).
type Xid struct {
	TimeNS uint64
	GPU    int
	Code   uint64
}

// Event is the Xid as an event (KindXid), for the trace.
func (x Xid) Event() Event {
	return Event{Kind: KindXid, Start: x.TimeNS, End: x.TimeNS, Args: [5]uint64{uint64(x.GPU), x.Code}}
}

// XidOf reads a KindXid event.
func XidOf(e *Event) Xid { return Xid{TimeNS: e.End, GPU: int(e.Args[0]), Code: e.Args[1]} }

// Has says whether a GPUSample float field was read.
func Has(v float64) bool { return !math.IsNaN(v) }

// NewGPUSample returns a sample of GPU at t with every field absent.
func NewGPUSample(gpu int, t uint64) GPUSample {
	n := math.NaN()
	return GPUSample{TimeNS: t, GPU: gpu,
		GPUUtil: n, MemUtil: n, MemUsed: n, MemTotal: n, PowerW: n, PowerLimitW: n, TempC: n,
		SMClockMHz: n, MemClockMHz: n, PCIeTxBps: n, PCIeRxBps: n, NVLinkTxBps: n, NVLinkRxBps: n,
		ECCCorrected: n, ECCUncorrected: n, SMActive: n, SMOccupancy: n, TensorActive: n, DRAMActive: n}
}

// ThrottleNames names the bits of NVML's clocks event reasons that slow a
// GPU down (nvml.h's nvmlClocksEventReason*), leaving out "GPU idle".
var ThrottleNames = []struct {
	Bit  uint64
	Name string
}{
	{0x2, "application clocks setting"},
	{0x4, "software power cap"},
	{0x8, "hardware slowdown"},
	{0x10, "sync boost"},
	{0x20, "software thermal slowdown"},
	{0x40, "hardware thermal slowdown"},
	{0x80, "hardware power brake"},
	{0x100, "display clock setting"},
}
