package main

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gpuprof/gpuprof/internal/outfile"
	"github.com/gpuprof/gpuprof/probes"
)

// checkInput fails, before anything is attached or started, on flags
// that would fail later: a negative duration, an output path gpuprof will
// not write (outfile.Check), --probe-stats without the capability it
// needs, a profile server it cannot reach.
func (f *profileFlags) checkInput() error {
	if f.duration < 0 {
		return usageErr("--duration %v: give how long to profile, e.g. 10m, or 0 to run until the job exits", f.duration)
	}
	for _, o := range []struct{ flag, path string }{{"--jsonl", f.jsonl}, {"--record", f.record},
		{"--html", f.pictures.html}, {"--trace", f.pictures.trace}} {
		if o.path == "" {
			continue
		}
		if err := outfile.Check(o.path); err != nil {
			return fmt.Errorf("%s: %w", o.flag, err)
		}
	}
	if f.probeStats {
		if err := probes.CheckStatsPrivileges(); err != nil {
			return err
		}
	}
	if f.pyroscope.enabled() {
		return reachable(f.pyroscope.url)
	}
	return nil
}

// reachDeadline bounds the check that the profile server answers at all.
const reachDeadline = 3 * time.Second

// reachable fails where nothing listens at the --pyroscope server's
// address: at the start, that is most likely a typo, better said now than
// as failed pushes in the summary. Once profiling, a server that goes
// away only costs its profiles (the pusher says so and retries): the job
// and the other outputs go on. Through a proxy, the proxy answers: not
// checked.
func reachable(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return nil // config() says what is wrong with it
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || p != nil {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(u.Hostname(), port), reachDeadline)
	if err != nil {
		return fmt.Errorf("--pyroscope %s: cannot reach the server (%v): check the URL and that the server is up, or leave out --pyroscope", raw, err)
	}
	return c.Close()
}
