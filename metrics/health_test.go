package metrics

import (
	"runtime"
	"testing"
)

// TestHealth: gpuprof's own counters, read from the caller's function at
// each scrape; NVML errors only where NVML is read, uploads per type only
// with a pusher; build info.
func TestHealth(t *testing.T) {
	h := testHealth()
	e, err := New(Config{Version: "v1.2.3", Health: func() Health { return h }})
	if err != nil {
		t.Fatal(err)
	}
	fams := gather(t, e)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gpuprof_events_total", nil, 12345},
		{"gpuprof_events_lost_total", map[string]string{"reason": "ringbuf_full"}, 7},
		{"gpuprof_events_lost_total", map[string]string{"reason": "bad_record"}, 1},
		{"gpuprof_stale_calls_total", nil, 3},
		{"gpuprof_kernel_counts_lost_total", nil, 2},
		{"gpuprof_attached_processes", nil, 2},
		{"gpuprof_probes_attached", nil, 41},
		{"gpuprof_nvml_errors_total", nil, 5},
		{"gpuprof_profile_uploads_total", map[string]string{"type": "process_cpu", "outcome": "ok"}, 10},
		{"gpuprof_profile_uploads_total", map[string]string{"type": "process_cpu", "outcome": "failed"}, 2},
		{"gpuprof_profile_uploads_total", map[string]string{"type": "process_cpu", "outcome": "dropped"}, 1},
		{"gpuprof_build_info", map[string]string{"version": "v1.2.3", "goversion": runtime.Version()}, 1},
	} {
		if got := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Read at scrape time: the next scrape sees what changed since.
	h.RingbufFull, h.NVML, h.Uploads = 9, false, nil
	fams = gather(t, e)
	if got := value(fams, "gpuprof_events_lost_total", map[string]string{"reason": "ringbuf_full"}); got != 9 {
		t.Errorf("ring buffer losses after the change: %v, want 9", got)
	}
	for _, name := range []string{"gpuprof_nvml_errors_total", "gpuprof_profile_uploads_total"} {
		if fams[name] != nil {
			t.Errorf("%s served with no NVML and no pusher: %v", name, fams[name])
		}
	}
	// Go and process collectors, as every exporter has.
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
}
