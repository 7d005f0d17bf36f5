package events

import (
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
