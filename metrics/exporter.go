package metrics

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// Config says what an Exporter serves.
type Config struct {
	Version string // gpuprof_build_info's version label
	// DCGM serves the GPUs' state under dcgm-exporter's names; off where a
	// dcgm-exporter is scraped too, whose series these would duplicate.
	DCGM bool
	GPUs []events.GPU // the GPUs sampled, for the DCGM labels
	// Hostname is the DCGM series' Hostname label; default os.Hostname.
	Hostname string
	// GPUStaleAfter is how long a GPU field is served after its latest
	// reading (dcgm.go); default 30 s, three times the slowest field's
	// cadence (the power limit and ECC counts, every 10 s).
	GPUStaleAfter time.Duration
	// Health is read at each scrape; nil: no health metrics.
	Health func() Health
	Log    *slog.Logger // default slog.Default()
}

// defaultGPUStaleAfter: see Config.GPUStaleAfter.
const defaultGPUStaleAfter = 30 * time.Second

// Exporter holds gpuprof's metrics in a registry of its own and serves
// them over HTTP. Its methods may be called from any goroutine: steps
// come from the control loop's, GPU rounds from the sink's, scrapes from
// the server's.
type Exporter struct {
	cfg   Config
	reg   *prometheus.Registry
	steps *stepMetrics
	dcgm  *dcgmCollector // nil: --metrics-dcgm=false

	mu   sync.Mutex // the server's state
	srv  *http.Server
	addr string
	done chan error // the server's Serve result
}

// New makes an Exporter; Start serves it.
func New(cfg Config) (*Exporter, error) {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
	}
	if cfg.GPUStaleAfter <= 0 {
		cfg.GPUStaleAfter = defaultGPUStaleAfter
	}
	e := &Exporter{cfg: cfg, reg: prometheus.NewRegistry(), steps: newStepMetrics()}
	cs := append(e.steps.collectors(), buildInfo(cfg.Version),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if cfg.Health != nil {
		cs = append(cs, newHealthCollector(cfg.Health))
	}
	if cfg.DCGM {
		e.dcgm = newDCGMCollector(cfg.GPUs, cfg.Hostname, cfg.GPUStaleAfter, time.Now)
		cs = append(cs, e.dcgm)
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, e.reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return e, nil
}

// Step takes a step as the control loop cuts it (control.Output).
func (e *Exporter) Step(s correlate.Step) { e.steps.observe(s) }

// Note is a line for a person to read (control.Output): no metric.
func (e *Exporter) Note(string) {}

// Processes is how many processes have sent events (control.Output):
// gpuprof_attached_processes comes from Health at scrape time instead,
// which also sees the processes that sent none yet.
func (e *Exporter) Processes(int) {}

// GPUs takes a round of GPU samples (an events.KindGPUSamples event's).
func (e *Exporter) GPUs(samples []events.GPUSample) {
	if e.dcgm != nil {
		e.dcgm.round(samples)
	}
}

// Xid takes an Xid error a GPU reported.
func (e *Exporter) Xid(x events.Xid) {
	if e.dcgm != nil {
		e.dcgm.addXid(x)
	}
}

// Handler serves the metrics in Prometheus' text format (or OpenMetrics
// or protobuf, as the scraper asks).
func (e *Exporter) Handler() http.Handler {
	return promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{
		ErrorLog: slogPrinter{e.cfg.Log},
		// A collector's error leaves its metrics out of one scrape;
		// the others are still served.
		ErrorHandling: promhttp.ContinueOnError,
		// Scrapers are few; more at once is a misconfigured one.
		MaxRequestsInFlight: 4,
	})
}

// slogPrinter is promhttp's error log on slog.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics: " + fmt.Sprint(v...)) }
