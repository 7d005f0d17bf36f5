package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuprof/gpuprof/metrics"
	"github.com/gpuprof/gpuprof/probes"
	"github.com/gpuprof/gpuprof/report"
)

// metricsFlags are --metrics-addr and --metrics-dcgm, and the server they
// start: the port is bound as the session opens (listen), before a job is
// started or attached to, so that a port in use is an error at once
// rather than after the job has run; the exporter serves on it once the
// profile begins (serve).
type metricsFlags struct {
	addr metricsAddr
	dcgm bool

	ln  net.Listener      // bound by listen
	exp *metrics.Exporter // serving, from serve until close
}

func (m *metricsFlags) register(fs *pflag.FlagSet) {
	fs.Var(&m.addr, "metrics-addr", "serve Prometheus metrics at http://ADDR/metrics: a port (9464) listens on 127.0.0.1, HOST:PORT as given (0.0.0.0:9464 for every interface); off by default")
	fs.BoolVar(&m.dcgm, "metrics-dcgm", true, "serve the GPUs' state under dcgm-exporter's names (DCGM_FI_*) with --metrics-addr; false where a dcgm-exporter is scraped too")
}

// metricsAddr is --metrics-addr, checked as it is parsed: a bad one is a
// usage error before anything starts.
type metricsAddr string

func (a *metricsAddr) String() string { return string(*a) }
func (a *metricsAddr) Type() string   { return "ADDR" }

func (a *metricsAddr) Set(s string) error {
	addr, err := metrics.ParseAddr(s)
	if err != nil {
		return err
	}
	*a = metricsAddr(addr)
	return nil
}

// listen binds --metrics-addr, if given.
func (m *metricsFlags) listen() error {
	if m.addr == "" || m.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", string(m.addr))
	if err != nil {
		return fmt.Errorf("--metrics-addr %s: %w", m.addr, err)
	}
	m.ln = ln
	return nil
}

// serve starts the exporter on the port listen bound, and says so on
// the live line; nil without --metrics-addr. Its health is read from
// health at each scrape.
func (m *metricsFlags) serve(gw *gpuWatch, nvmlEvery time.Duration, health func() metrics.Health, live *report.Live) (*metrics.Exporter, error) {
	if m.ln == nil {
		return nil, nil
	}
	// A GPU field is served until three of the sampler's rounds, or 30 s
	// (its slowest fields' cadence thrice), pass without a reading.
	cfg := metrics.Config{Version: version, DCGM: m.dcgm, Health: health, GPUStaleAfter: max(30*time.Second, 3*nvmlEvery)}
	if gw.sampler != nil {
		cfg.GPUs = gw.sampler.GPUs()
	}
	exp, err := metrics.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := exp.Serve(m.ln); err != nil {
		return nil, err
	}
	m.exp = exp
	live.Note(fmt.Sprintf("serving metrics at http://%s/metrics", exp.Addr()))
	return exp, nil
}

// close stops the server, or releases the port if it never served; a
// failure to is only worth a warning, the profile being done.
func (m *metricsFlags) close() {
	var err error
	switch {
	case m.exp != nil:
		err = m.exp.Close() // the listener with it
	case m.ln != nil:
		err = m.ln.Close()
	}
	m.exp, m.ln = nil, nil
	if err != nil {
		slog.Warn("metrics server", "err", err)
	}
}

// writeSummary says where the metrics were served, after the summaries.
func (m *metricsFlags) writeSummary(w io.Writer) {
	if m.exp != nil {
		fmt.Fprintf(w, "\nmetrics: served at http://%s/metrics\n", m.exp.Addr())
	}
}

// sessionHealth reads gpuprof's own health for the exporter from the
// probe session and the NVML sampler (nil: no NVML), at each scrape.
func sessionHealth(sess *probes.Session, gw *gpuWatch) func() metrics.Health {
	return func() metrics.Health {
		st := sess.Stats()
		h := metrics.Health{Events: st.Events, RingbufFull: st.RingbufFull, BadRecords: st.BadRecords,
			StaleCalls: st.StaleCalls, KernelsFull: st.KernelMapFull}
		pids := sess.PIDs()
		h.Processes = len(pids)
		for _, pid := range pids {
			for _, lp := range sess.Libraries(pid) {
				h.Probes += len(lp.Probes)
			}
		}
		if gw.sampler != nil {
			h.NVML, h.NVMLErrors = true, gw.sampler.Errors()
		}
		return h
	}
}
