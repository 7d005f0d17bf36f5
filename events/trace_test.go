package events

import (
	"math"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpuprof/gpuprof/cudaapi"
)

func TestTraceRoundTrip(t *testing.T) {
	sync, _ := cudaapi.ByName("cudaStreamSynchronize")
	name, _ := cudaapi.ByName("cuModuleGetFunction")
	in := []Event{
		{Kind: KindCall, API: sync.ID, PID: 1, TID: 2, Start: 10, End: 20, Launches: 3, LaunchFirst: 5, LaunchLast: 8, Args: [5]uint64{0x55}},
		{Kind: KindKernelName, API: name.ID, PID: 1, TID: 2, Start: 30, End: 30, Out: 0xabc, Name: "gemm"},
		{Kind: KindLibLoad, PID: 1, TID: 2, Start: 40, End: 40},
		{Kind: KindLaunchProbes, Start: 50, End: 50, Out: 1},
		Xid{TimeNS: 60, GPU: 3, Code: 79}.Event(),
	}
	for _, name := range []string{"t.jsonl", "t.jsonl.gz"} {
		path := filepath.Join(t.TempDir(), name)
		w, err := CreateTrace(path, TraceHeader{Version: "test", PIDs: []uint32{1}, NoLaunchCounts: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := range in {
			if err := w.Write(&in[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		h, out, unknown, err := ReadTrace(path)
		if err != nil || unknown != 0 || !h.NoLaunchCounts || h.Version != "test" {
			t.Fatalf("%s: header %+v, %d unknown, %v", name, h, unknown, err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", name, out, in)
		}
	}
}

func TestReadTraceRejectsOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.jsonl")
	w, _ := CreateTrace(path, TraceHeader{})
	w.Close()
	if _, _, _, err := ReadTrace("/nonexistent"); err == nil {
		t.Error("missing file read")
	}
	if _, _, _, err := ReadTrace("trace_test.go"); err == nil {
		t.Error("a Go file read as a trace")
	}
	if _, evs, _, err := ReadTrace(path); err != nil || len(evs) != 0 {
		t.Errorf("empty trace: %v %d", err, len(evs))
	}
}

// TestGPUSamplesRoundTrip: a round of GPU samples survives a trace, fields
// not read (NaN) included, so that a replay joins steps as the live run did.
func TestGPUSamplesRoundTrip(t *testing.T) {
	a, b := NewGPUSample(0, 1000), NewGPUSample(3, 1000)
	a.GPUUtil, a.SMActive, a.PowerW, a.Throttle, a.ThrottleKnown = 88, 0.68, 612.5, 0x4, true
	a.Procs = []GPUProcess{{PID: 505, MemUsed: 4 << 30, SMUtil: math.NaN(), MemUtil: math.NaN()}}
	b.GPUUtil = 0
	path := filepath.Join(t.TempDir(), "t.jsonl.gz")
	w, err := CreateTrace(path, TraceHeader{GPUs: []GPU{{Index: 0, UUID: "GPU-a"}, {Index: 3, UUID: "GPU-d"}}, NVMLIntervalNS: 1e8})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(&Event{Kind: KindGPUSamples, End: 1000, GPUs: []GPUSample{a, b}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h, evs, unknown, err := ReadTrace(path)
	if err != nil || unknown != 0 || len(evs) != 1 || len(h.GPUs) != 2 || h.NVMLIntervalNS != 1e8 {
		t.Fatalf("read back: %+v %d events, %d unknown, %v", h, len(evs), unknown, err)
	}
	got := evs[0]
	if got.Kind != KindGPUSamples || len(got.GPUs) != 2 {
		t.Fatalf("event %+v", got)
	}
	ga, gb := got.GPUs[0], got.GPUs[1]
	if ga.GPUUtil != 88 || ga.SMActive != 0.68 || ga.PowerW != 612.5 || !ga.ThrottleKnown || ga.Throttle != 0x4 ||
		Has(ga.TempC) || len(ga.Procs) != 1 || ga.Procs[0].PID != 505 || ga.Procs[0].MemUsed != 4<<30 || Has(ga.Procs[0].SMUtil) {
		t.Errorf("GPU 0 read back as %+v", ga)
	}
	if gb.GPU != 3 || gb.GPUUtil != 0 || !Has(gb.GPUUtil) || gb.ThrottleKnown || Has(gb.PowerW) {
		t.Errorf("GPU 3 read back as %+v: a read zero must stay zero, the rest absent", gb)
	}
}
