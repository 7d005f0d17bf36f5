package profiles

import (
	"testing"

	"github.com/gpuprof/gpuprof/correlate"
	"github.com/gpuprof/gpuprof/cudaapi"
	"github.com/gpuprof/gpuprof/events"
)

// Process 100's step thread 101 runs two steps: step 0 from 1 s waits
// for its batch (dispatch), loads it (data), computes and ends in a sync;
// step 1 loads and computes. Thread 102 is another of its threads.
var (
	step0 = step(0,
		span(correlate.PhaseDispatchWait, 1*s, 1*s+20*ms),
		span(correlate.PhaseData, 1*s+20*ms, 1*s+50*ms),
		span(correlate.PhaseCompute, 1*s+50*ms, 1*s+90*ms),
		span(correlate.PhaseSync, 1*s+90*ms, 1*s+100*ms))
	step1 = step(1,
		span(correlate.PhaseData, 1*s+100*ms, 1*s+130*ms),
		span(correlate.PhaseCompute, 1*s+130*ms, 1*s+200*ms))
)

var (
	trainPy = []events.PyFrame{{Func: "Model.forward", File: "/job/model.py"}, {Func: "train", File: "/job/train.py"}}
	getPy   = []events.PyFrame{{Func: "Condition.wait", File: "/usr/lib/python3.12/threading.py"},
		{Func: "Queue.get", File: "/usr/lib/python3.12/queue.py"}, {Func: "train", File: "/job/train.py"}}
	gemm   = []events.NativeFrame{{Func: "at::native::addmm_out", Module: "libtorch_cpu.so"}, {Func: "_PyEval_EvalFrameDefault", Module: "libpython3.12.so.1.0", Interp: true}}
	period = uint64(1e9) / 97
)

func cpuSample(tid uint32, at uint64) *events.Event {
	return &events.Event{Kind: events.KindCPUSample, PID: 100, TID: tid, End: at, Args: [5]uint64{period}, Frames: trainPy, Native: gemm}
}

func pyWait(tid uint32, from, to uint64, frames []events.PyFrame) *events.Event {
	return &events.Event{Kind: events.KindPyWait, PID: 100, TID: tid, Start: from, End: to, Name: "futex", Frames: frames}
}

func gil(tid uint32, from, to uint64) *events.Event {
	return &events.Event{Kind: events.KindPyGIL, PID: 100, TID: tid, Start: from, End: to}
}

func callStack(t *testing.T, tid uint32, name string, from, to uint64, args ...uint64) *events.Event {
	t.Helper()
	a, ok := cudaapi.ByName(name)
	if !ok {
		t.Fatalf("no API %s", name)
	}
	e := &events.Event{Kind: events.KindCallStack, API: a.ID, PID: 100, TID: tid, Start: from, End: to, Frames: trainPy,
		Native: []events.NativeFrame{{Func: name, Module: "libcudart.so.12"}, gemm[1]}}
	copy(e.Args[:], args)
	return e
}

func launch(tid uint32, at, handle, weight uint64) *events.Event {
	return &events.Event{Kind: events.KindLaunchStack, PID: 100, TID: tid, End: at, Args: [5]uint64{handle, weight},
		Frames: trainPy, Native: []events.NativeFrame{{Func: "cudaLaunchKernel", Module: "libcudart.so.12"}, gemm[1]}}
}
