package metrics

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuprof/gpuprof/events"
)

// dcgmLabels are dcgm-exporter's labels on every GPU series, so that a
// dashboard made for it reads gpuprof's as well (camelCase and all).
var dcgmLabels = []string{"gpu", "UUID", "device", "modelName", "Hostname"}

// mib is DCGM's unit of frame buffer memory.
const mib = 1 << 20

// dcgmField is one GPUSample field under the name, type, unit and help
// text dcgm-exporter gives it (its etc/default-counters.csv and
// dcp-metrics-included.csv).
type dcgmField struct {
	name, help string
	counter    bool
	value      func(*events.GPUSample) float64 // NaN: not read in this sample
}

var dcgmFields = []dcgmField{
	{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", false, func(s *events.GPUSample) float64 { return s.GPUUtil }},
	{"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", false, func(s *events.GPUSample) float64 { return s.MemUtil }},
	{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", false, func(s *events.GPUSample) float64 { return s.MemUsed / mib }},
	{"DCGM_FI_DEV_FB_TOTAL", "Framebuffer memory total (in MiB).", false, func(s *events.GPUSample) float64 { return s.MemTotal / mib }},
	{"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", false, func(s *events.GPUSample) float64 { return s.PowerW }},
	{"DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit (in W).", false, func(s *events.GPUSample) float64 { return s.PowerLimitW }},
	{"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", false, func(s *events.GPUSample) float64 { return s.TempC }},
	{"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", false, func(s *events.GPUSample) float64 { return s.SMClockMHz }},
	{"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", false, func(s *events.GPUSample) float64 { return s.MemClockMHz }},
	{"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons (NVML's bitmask).", false, func(s *events.GPUSample) float64 {
		if !s.ThrottleKnown {
			return math.NaN()
		}
		return float64(s.Throttle)
	}},
	{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.", true, func(s *events.GPUSample) float64 { return s.ECCCorrected }},
	{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.", true, func(s *events.GPUSample) float64 { return s.ECCUncorrected }},
	{"DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.", false, func(s *events.GPUSample) float64 { return s.SMActive }},
	{"DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM.", false, func(s *events.GPUSample) float64 { return s.SMOccupancy }},
	{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.", false, func(s *events.GPUSample) float64 { return s.TensorActive }},
	{"DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data.", false, func(s *events.GPUSample) float64 { return s.DRAMActive }},
	{"DCGM_FI_PROF_PCIE_TX_BYTES", "The rate of data transmitted over the PCIe bus, in bytes per second.", false, func(s *events.GPUSample) float64 { return s.PCIeTxBps }},
	{"DCGM_FI_PROF_PCIE_RX_BYTES", "The rate of data received over the PCIe bus, in bytes per second.", false, func(s *events.GPUSample) float64 { return s.PCIeRxBps }},
	{"DCGM_FI_PROF_NVLINK_TX_BYTES", "The rate of data transmitted over NVLink, in bytes per second.", false, func(s *events.GPUSample) float64 { return s.NVLinkTxBps }},
	{"DCGM_FI_PROF_NVLINK_RX_BYTES", "The rate of data received over NVLink, in bytes per second.", false, func(s *events.GPUSample) float64 { return s.NVLinkRxBps }},
}

// dcgmXid is DCGM's Xid gauge: the last Xid a GPU reported, left out for
// a GPU that reported none (gpuprof cannot tell "none" from "not watched"
// where the driver does not deliver Xid events).
var dcgmXid = dcgmField{name: "DCGM_FI_DEV_XID_ERRORS", help: "Value of the last XID error encountered."}

// gpuState is what is known of one GPU: each field's latest reading and
// when it came.
type gpuState struct {
	value  []float64
	at     []time.Time
	xid    float64
	hasXid bool
}

// dcgmCollector serves the GPUs' latest readings at scrape time. The
// sampler reads slow fields (memory, temperature, ECC, the power limit)
// only every 1-10 s and leaves them NaN in the rounds between, so a field
// keeps its latest reading until staleAfter has passed without another:
// a field the GPU stops giving, or a GPU no longer sampled, drops out
// then rather than being served as its last value for ever.
type dcgmCollector struct {
	host       string
	staleAfter time.Duration
	now        func() time.Time

	descs []*prometheus.Desc // by dcgmFields index
	xid   *prometheus.Desc

	mu     sync.Mutex
	names  map[int]events.GPU
	states map[int]*gpuState
}

func newDCGMCollector(gpus []events.GPU, host string, staleAfter time.Duration, now func() time.Time) *dcgmCollector {
	c := &dcgmCollector{host: host, staleAfter: staleAfter, now: now, names: map[int]events.GPU{}, states: map[int]*gpuState{}}
	for _, f := range dcgmFields {
		c.descs = append(c.descs, prometheus.NewDesc(f.name, f.help, dcgmLabels, nil))
	}
	c.xid = prometheus.NewDesc(dcgmXid.name, dcgmXid.help, dcgmLabels, nil)
	for _, g := range gpus {
		c.names[g.Index] = g
	}
	return c
}

func (c *dcgmCollector) state(gpu int) *gpuState {
	st := c.states[gpu]
	if st == nil {
		st = &gpuState{value: make([]float64, len(dcgmFields)), at: make([]time.Time, len(dcgmFields))}
		c.states[gpu] = st
	}
	return st
}

// round takes a round of samples.
func (c *dcgmCollector) round(samples []events.GPUSample) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range samples {
		smp := &samples[i]
		st := c.state(smp.GPU)
		for k, f := range dcgmFields {
			if v := f.value(smp); events.Has(v) {
				st.value[k], st.at[k] = v, now
			}
		}
	}
}

func (c *dcgmCollector) addXid(x events.Xid) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state(x.GPU)
	st.xid, st.hasXid = float64(x.Code), true
}

func (c *dcgmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.xid
}

func (c *dcgmCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for gpu, st := range c.states {
		labels := c.labels(gpu)
		for k, f := range dcgmFields {
			if st.at[k].IsZero() || now.Sub(st.at[k]) > c.staleAfter {
				continue
			}
			typ := prometheus.GaugeValue
			if f.counter {
				typ = prometheus.CounterValue
			}
			ch <- prometheus.MustNewConstMetric(c.descs[k], typ, st.value[k], labels...)
		}
		if st.hasXid {
			ch <- prometheus.MustNewConstMetric(c.xid, prometheus.GaugeValue, st.xid, labels...)
		}
	}
}

// labels are dcgm-exporter's for a GPU. Its device label names the device
// file, nvidia<minor>; NVML's minor number is not among what gpuprof
// reads, so the NVML index stands in (the two often agree, but need not).
func (c *dcgmCollector) labels(gpu int) []string {
	g := c.names[gpu]
	idx := strconv.Itoa(gpu)
	return []string{idx, g.UUID, "nvidia" + idx, g.Name, c.host}
}
