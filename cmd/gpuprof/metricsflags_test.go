package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/control"
	"github.com/gpuprof/gpuprof/events"
	"github.com/gpuprof/gpuprof/metrics"
	"github.com/gpuprof/gpuprof/report"
)

// TestMetricsFlags: --metrics-addr is off by default, a bare port means
// 127.0.0.1, and a bad one is a one-line usage error before anything is
// attached or started.
func TestMetricsFlags(t *testing.T) {
	for args, want := range map[string]metricsFlags{
		"":                                      {dcgm: true},
		"--metrics-addr 9464":                   {addr: "127.0.0.1:9464", dcgm: true},
		"--metrics-addr :9464":                  {addr: "127.0.0.1:9464", dcgm: true},
		"--metrics-addr=0.0.0.0:9464":           {addr: "0.0.0.0:9464", dcgm: true},
		"--metrics-addr 0 --metrics-dcgm=false": {addr: "127.0.0.1:0"},
	} {
		var f profileFlags
		fs := newFlags("attach", io.Discard)
		f.register(fs)
		if err := parseFlags(fs, strings.Fields(args)); err != nil {
			t.Errorf("%q: %v", args, err)
			continue
		}
		if f.metrics.addr != want.addr || f.metrics.dcgm != want.dcgm {
			t.Errorf("%q: addr %q dcgm %v, want %q %v", args, f.metrics.addr, f.metrics.dcgm, want.addr, want.dcgm)
		}
	}
	oneLine(t, gpuprof(t, "attach", "--pid", "1", "--metrics-addr", "bogus"), 2, `invalid argument "bogus" for "--metrics-addr" flag: give a port (9464`)
	oneLine(t, gpuprof(t, "run", "--metrics-addr", ":99999", "--", "true"), 2, "--metrics-addr")
}

// TestMetricsPortInUse: a port already taken fails as the session opens,
// naming the flag.
func TestMetricsPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	m := metricsFlags{addr: metricsAddr(ln.Addr().String())}
	if err := m.listen(); err == nil || !strings.Contains(err.Error(), "--metrics-addr "+ln.Addr().String()) ||
		!strings.Contains(err.Error(), "address already in use") {
		t.Errorf("listen on a busy port: %v", err)
	}
}

// TestMetricsWiring replays a recorded two-rank trace through what
// profile wires (the sink, the step outputs, the exporter on the port
// listen bound) and reads the metrics over HTTP: each process's steps as
// the loop counted them, under its rank, the GPU rounds under DCGM's
// names, the summary's line, and the port released at the end.
func TestMetricsWiring(t *testing.T) {
	h, evs, _, err := events.ReadTrace("../../testdata/traces/h200x2-ranks/engine-ddp-two-ranks-slow-rank1.trace.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	f := metricsFlags{addr: "127.0.0.1:0", dcgm: true}
	if err := f.listen(); err != nil {
		t.Fatal(err)
	}
	defer f.close()
	var live bytes.Buffer
	exp, err := f.serve(&gpuWatch{}, time.Duration(h.NVMLIntervalNS), func() metrics.Health { return metrics.Health{Events: uint64(len(evs))} },
		report.NewLive(&live, false))
	if err != nil {
		t.Fatal(err)
	}
	addr := exp.Addr()
	if !strings.Contains(live.String(), "serving metrics at http://"+addr+"/metrics") {
		t.Errorf("live line: %q", live.String())
	}
	outs := &stepOutputs{live: report.NewLive(io.Discard, false), more: []control.Output{exp}}
	loop, err := control.New(control.DefaultConfig(), nil, outs)
	if err != nil {
		t.Fatal(err)
	}
	// The trace's processes are another host's: their rank comes from
	// the trace, not from this host's /proc.
	out := &sink{loop: loop, metrics: exp, seen: map[uint32]bool{}}
	for _, e := range evs {
		out.seen[e.PID] = true
	}
	out.add(evs...)
	loop.Finish()

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	served := parseText(string(text))
	ranks := map[string]bool{}
	for _, pid := range loop.PIDs() {
		run := loop.Summary(pid)
		var n float64
		for labels, v := range served["gpuprof_step_seconds_count"] {
			if strings.Contains(labels, `pid="`+strconv.Itoa(int(pid))+`"`) {
				n += v
				if i := strings.Index(labels, `rank="`); i >= 0 {
					ranks[labels[i:]] = true
				}
			}
		}
		if n != float64(run.Steps) {
			t.Errorf("PID %d: %v steps served, the loop cut %d", pid, n, run.Steps)
		}
	}
	if !ranks[`rank="0"}`] || !ranks[`rank="1"}`] {
		t.Errorf("ranks served: %v, want 0 and 1", ranks)
	}
	for _, gpu := range []string{`gpu="0"`, `gpu="1"`} {
		found := false
		for labels := range served["DCGM_FI_DEV_POWER_USAGE"] {
			found = found || strings.Contains(labels, gpu)
		}
		if !found {
			t.Errorf("no DCGM_FI_DEV_POWER_USAGE for %s from the trace's GPU rounds", gpu)
		}
	}
	if served["gpuprof_events_total"][""] != float64(len(evs)) {
		t.Errorf("gpuprof_events_total %v, want %d", served["gpuprof_events_total"], len(evs))
	}

	var summary bytes.Buffer
	f.writeSummary(&summary)
	if !strings.Contains(summary.String(), "metrics: served at http://"+addr+"/metrics") {
		t.Errorf("summary: %q", summary.String())
	}
	f.close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port not released after close: %v", err)
	}
	ln.Close()
}

// parseText reads the text exposition format's samples: name -> labels
// ("{...}" as written, "" for none) -> value.
func parseText(text string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		name, labels := line[:sp], ""
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name, labels = name[:i], name[i:]
		}
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][labels] = v
	}
	return out
}
