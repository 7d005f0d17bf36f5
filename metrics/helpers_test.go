package metrics

import (
	"io"
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/events"
)

// gather returns the exporter's metric families by name.
func gather(t *testing.T, e *Exporter) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// scrape GETs /metrics from the exporter's handler, in the text format.
func scrape(t *testing.T, e *Exporter) string {
	t.Helper()
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: status %d: %s", rec.Code, rec.Body)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// series finds the metric of family name whose labels include want; nil
// where there is none.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := fams[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if have[k] != v {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// value is a counter's or gauge's value, NaN where the series is absent.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	m := series(fams, name, want)
	switch {
	case m == nil:
		return math.NaN()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return math.NaN()
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// gpuprofOnly keeps the gpuprof_* families of a text scrape (HELP, TYPE
// and samples), for linting: the DCGM names fail promtool's lint by
// design (camelCase labels), go_ and process_ are client_golang's.
func gpuprofOnly(text string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		name := line
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name = rest
		} else if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name = rest
		}
		if strings.HasPrefix(name, "gpuprof_") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func rankOf(r int) *int { return &r }

// fullStep is a step with every number measured and counted, for tests
// that need every series present.
func fullStep(pid uint32, rank int) correlate.Step {
	return correlate.Step{PID: pid, Rank: rankOf(rank), WallTime: 0.020, StepTime: 0.018,
		WaitsObserved: true, WaitKindsCounted: true, DispatchWait: 0.002, DataWait: 0.001, LockWait: 0.0005,
		IOWait: 0.0002, FullWait: 0.0001, GILWait: 0.0003,
		DataTime: 0.004, DataMeasured: true, ComputeTime: 0.012, ComputeSource: correlate.ComputeEvents, SyncTime: 0.003,
		Pool: 12, PoolMeasured: true, Samples: 32, SamplesMeasured: true,
		InferCapacity: 900, TrainCapacity: 1800, Thru: 1600,
		LaunchesCounted: true, Launches: 120, GraphLaunches: 2, GraphKernels: 60, GraphKernelsKnown: true, OtherLaunches: 80,
		H2DBytes: 1 << 20, D2HBytes: 4096, D2DBytes: 1 << 16, OtherCopyBytes: 100}
}

// fullRound is a GPU round with every field read, for GPU 0 and 1.
func fullRound() []events.GPUSample {
	var round []events.GPUSample
	for gpu := range 2 {
		s := events.GPUSample{TimeNS: 1e9, GPU: gpu, GPUUtil: 88, MemUtil: 40, MemUsed: 10 << 30, MemTotal: 140 << 30,
			PowerW: 612, PowerLimitW: 700, TempC: 61, SMClockMHz: 1980, MemClockMHz: 3201, Throttle: 0x4, ThrottleKnown: true,
			PCIeTxBps: 1e9, PCIeRxBps: 2e9, NVLinkTxBps: 3e9, NVLinkRxBps: 4e9, ECCCorrected: 0, ECCUncorrected: 0,
			SMActive: 0.68, SMOccupancy: 0.4, TensorActive: 0.3, DRAMActive: 0.5}
		round = append(round, s)
	}
	return round
}

var testGPUs = []events.GPU{
	{Index: 0, UUID: "GPU-4b21d845-d473-eb90-48fb-f5b7aafa2a58", Name: "NVIDIA H200", BusID: "00000000:00:06.0"},
	{Index: 1, UUID: "GPU-ccdf3669-0ab7-63bf-4093-1de0ecef2f4f", Name: "NVIDIA H200", BusID: "00000000:00:07.0"},
}

func testHealth() Health {
	return Health{Events: 12345, RingbufFull: 7, BadRecords: 1, StaleCalls: 3, KernelsFull: 2, Processes: 2, Probes: 41,
		NVML: true, NVMLErrors: 5, Uploads: []Uploads{{Type: "process_cpu", OK: 10, Failed: 2, Dropped: 1}}}
}

// fedExporter is an exporter with DCGM and health on, fed a full step
// and a full GPU round and an Xid: every family it can serve is there.
func fedExporter(t *testing.T) *Exporter {
	t.Helper()
	e, err := New(Config{Version: "test", DCGM: true, GPUs: testGPUs, Hostname: "host-a", Health: testHealth})
	if err != nil {
		t.Fatal(err)
	}
	e.Step(fullStep(100, 0))
	e.GPUs(fullRound())
	e.Xid(events.Xid{GPU: 1, Code: 79})
	return e
}
