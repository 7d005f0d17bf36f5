package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// Health is gpuprof's own state, read at each scrape from the function
// given in Config.Health: cmd fills it from the probe session's counters
// (probes.Session.Stats), the NVML sampler's and a profile pusher's.
// Counters are totals since gpuprof started.
type Health struct {
	Events      uint64 // events delivered from the ring buffer
	RingbufFull uint64 // events dropped because the ring buffer was full
	BadRecords  uint64 // records the reader could not decode
	StaleCalls  uint64 // calls whose return was never seen
	// KernelsFull: launches not counted per kernel, the kernel map being full.
	KernelsFull uint64

	Processes int // processes attached now
	Probes    int // uprobes attached now, over every process

	// NVML says the GPUs' state is read; NVMLErrors (sampling calls that
	// timed out or failed) is served only then.
	NVML       bool
	NVMLErrors uint64

	// Uploads are the profile pusher's counts, one entry a profile type;
	// none without a pusher, and then no gpuprof_profile_uploads_total.
	Uploads []Uploads
}

// Uploads counts one profile type's uploads by outcome.
type Uploads struct {
	Type    string // the profile type, e.g. process_cpu, wait, gpu_time
	OK      uint64 // accepted by the server
	Failed  uint64 // sent and refused, or not answered in time
	Dropped uint64 // never sent: the queue was full, or gpuprof was stopping
}

// healthCollector serves Health at scrape time.
type healthCollector struct {
	read                                         func() Health
	events, lost, stale, kernelsFull, nvmlErrors *prometheus.Desc
	processes, probes, uploads                   *prometheus.Desc
}

func newHealthCollector(read func() Health) *healthCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &healthCollector{read: read,
		events:      d("gpuprof_events_total", "Events gpuprof's probes delivered from the ring buffer."),
		lost:        d("gpuprof_events_lost_total", "Events lost, by reason: ringbuf_full (the job ran ahead of gpuprof's reader), bad_record (not decoded).", "reason"),
		stale:       d("gpuprof_stale_calls_total", "Probed calls whose return was never seen."),
		kernelsFull: d("gpuprof_kernel_counts_lost_total", "Launches not counted per kernel because the kernel map was full."),
		nvmlErrors:  d("gpuprof_nvml_errors_total", "NVML sampling calls that timed out or failed (not those a GPU does not support)."),
		processes:   d("gpuprof_attached_processes", "Processes gpuprof is attached to."),
		probes:      d("gpuprof_probes_attached", "Uprobes attached, over every process."),
		uploads:     d("gpuprof_profile_uploads_total", "Profile uploads by profile type and outcome: ok, failed (refused or timed out), dropped (never sent).", "type", "outcome"),
	}
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.events, c.lost, c.stale, c.kernelsFull, c.nvmlErrors, c.processes, c.probes, c.uploads} {
		ch <- d
	}
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.read()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(c.events, h.Events)
	counter(c.lost, h.RingbufFull, "ringbuf_full")
	counter(c.lost, h.BadRecords, "bad_record")
	counter(c.stale, h.StaleCalls)
	counter(c.kernelsFull, h.KernelsFull)
	if h.NVML {
		counter(c.nvmlErrors, h.NVMLErrors)
	}
	ch <- prometheus.MustNewConstMetric(c.processes, prometheus.GaugeValue, float64(h.Processes))
	ch <- prometheus.MustNewConstMetric(c.probes, prometheus.GaugeValue, float64(h.Probes))
	for _, u := range h.Uploads {
		counter(c.uploads, u.OK, u.Type, "ok")
		counter(c.uploads, u.Failed, u.Type, "failed")
		counter(c.uploads, u.Dropped, u.Type, "dropped")
	}
}

// buildInfo is gpuprof_build_info: 1, its labels saying which gpuprof
// serves the metrics (a fleet mid-upgrade runs two).
func buildInfo(version string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gpuprof_build_info", Help: "Which gpuprof serves these metrics: 1, with its version and Go's.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()}})
	g.Set(1)
	return g
}
