package events

import (
	"encoding/json"
	"fmt"
	"math"
)

// gpuFloats names a GPUSample's float fields in JSON (traces, gpuprof gpus
// --json). A field that was not read (NaN) is left out, and comes back NaN.
var gpuFloats = []struct {
	name string
	at   func(*GPUSample) *float64
}{
	{"util_pct", func(s *GPUSample) *float64 { return &s.GPUUtil }},
	{"mem_util_pct", func(s *GPUSample) *float64 { return &s.MemUtil }},
	{"mem_used_bytes", func(s *GPUSample) *float64 { return &s.MemUsed }},
	{"mem_total_bytes", func(s *GPUSample) *float64 { return &s.MemTotal }},
	{"power_w", func(s *GPUSample) *float64 { return &s.PowerW }},
	{"power_limit_w", func(s *GPUSample) *float64 { return &s.PowerLimitW }},
	{"temp_c", func(s *GPUSample) *float64 { return &s.TempC }},
	{"sm_clock_mhz", func(s *GPUSample) *float64 { return &s.SMClockMHz }},
	{"mem_clock_mhz", func(s *GPUSample) *float64 { return &s.MemClockMHz }},
	{"pcie_tx_bps", func(s *GPUSample) *float64 { return &s.PCIeTxBps }},
	{"pcie_rx_bps", func(s *GPUSample) *float64 { return &s.PCIeRxBps }},
	{"nvlink_tx_bps", func(s *GPUSample) *float64 { return &s.NVLinkTxBps }},
	{"nvlink_rx_bps", func(s *GPUSample) *float64 { return &s.NVLinkRxBps }},
	{"ecc_corrected", func(s *GPUSample) *float64 { return &s.ECCCorrected }},
	{"ecc_uncorrected", func(s *GPUSample) *float64 { return &s.ECCUncorrected }},
	{"sm_active", func(s *GPUSample) *float64 { return &s.SMActive }},
	{"sm_occupancy", func(s *GPUSample) *float64 { return &s.SMOccupancy }},
	{"tensor_active", func(s *GPUSample) *float64 { return &s.TensorActive }},
	{"dram_active", func(s *GPUSample) *float64 { return &s.DRAMActive }},
}

var procFloats = []struct {
	name string
	at   func(*GPUProcess) *float64
}{
	{"mem_used_bytes", func(p *GPUProcess) *float64 { return &p.MemUsed }},
	{"sm_util_pct", func(p *GPUProcess) *float64 { return &p.SMUtil }},
	{"mem_util_pct", func(p *GPUProcess) *float64 { return &p.MemUtil }},
}

// Fields is the sample as JSON fields: those read, by name.
func (s GPUSample) Fields() map[string]any {
	m := map[string]any{"time_ns": s.TimeNS, "gpu": s.GPU}
	for _, f := range gpuFloats {
		if v := *f.at(&s); Has(v) {
			m[f.name] = v
		}
	}
	if s.ThrottleKnown {
		m["throttle_reasons"] = s.Throttle
	}
	procs := make([]map[string]any, 0, len(s.Procs))
	for i := range s.Procs {
		p := map[string]any{"pid": s.Procs[i].PID}
		for _, f := range procFloats {
			if v := *f.at(&s.Procs[i]); Has(v) {
				p[f.name] = v
			}
		}
		procs = append(procs, p)
	}
	m["processes"] = procs
	return m
}

// MarshalJSON writes Fields.
func (s GPUSample) MarshalJSON() ([]byte, error) { return json.Marshal(s.Fields()) }

// UnmarshalJSON reads what MarshalJSON wrote; fields left out are NaN.
func (s *GPUSample) UnmarshalJSON(b []byte) error {
	var raw struct {
		TimeNS   uint64                   `json:"time_ns"`
		GPU      int                      `json:"gpu"`
		Throttle *uint64                  `json:"throttle_reasons"`
		Procs    []map[string]json.Number `json:"processes"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	var floats map[string]any
	if err := json.Unmarshal(b, &floats); err != nil {
		return err
	}
	*s = NewGPUSample(raw.GPU, raw.TimeNS)
	for _, f := range gpuFloats {
		if v, ok := floats[f.name].(float64); ok {
			*f.at(s) = v
		}
	}
	if raw.Throttle != nil {
		s.Throttle, s.ThrottleKnown = *raw.Throttle, true
	}
	for _, p := range raw.Procs {
		pid, err := p["pid"].Int64()
		if err != nil {
			return fmt.Errorf("GPU sample process: pid %q", p["pid"])
		}
		gp := GPUProcess{PID: uint32(pid), MemUsed: math.NaN(), SMUtil: math.NaN(), MemUtil: math.NaN()}
		for _, f := range procFloats {
			if n, ok := p[f.name]; ok {
				if v, err := n.Float64(); err == nil {
					*f.at(&gp) = v
				}
			}
		}
		s.Procs = append(s.Procs, gp)
	}
	return nil
}
