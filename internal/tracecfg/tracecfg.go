// Package tracecfg configures a correlator for a recorded trace as gpuprof
// replay does from its header, for the tests that replay the committed
// traces (control, validate, metrics, profiles).
package tracecfg

import (
	"time"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/probes"
)

// Correlate is the correlator configuration for a trace of header h: its
// launch counting, its user probes (attach's own, as whole gets, by their
// specs) and, where it was recorded with NVML, its GPUs.
func Correlate(h events.TraceHeader) (correlate.Config, error) {
	cfg := correlate.Config{NoLaunchCounts: h.NoLaunchCounts, User: map[uint16]correlate.UserProbe{}}
	for i, spec := range h.UserProbes {
		u, err := probes.ParseUserProbe(spec, i)
		if err != nil {
			return cfg, err
		}
		cfg.User[u.ID] = correlate.UserProbe{Role: u.Role, Name: u.Symbol}
	}
	if len(h.GPUs) > 0 {
		cfg.GPUs = correlate.NewGPUs(h.GPUs, time.Duration(h.NVMLIntervalNS))
	}
	return cfg, nil
}
