package cudaapi

import "testing"

func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range All() {
		if seen[a.Name] {
			t.Errorf("%s listed twice", a.Name)
		}
		seen[a.Name] = true
		if got, ok := ByID(a.ID); !ok || got.Name != a.Name {
			t.Errorf("ByID(%d) = %s", a.ID, got.Name)
		}
		for role, i := range map[string]int8{"kind": a.KindArg, "bytes": a.BytesArg, "handle": a.HandleArg,
			"second": a.SecondArg, "stream": a.StreamArg, "func": a.FuncArg, "name": a.NameArg, "out": a.OutArg} {
			if i != NoArg && (i < 0 || i > 4) {
				t.Errorf("%s: %s argument %d is not among the five captured", a.Name, role, i)
			}
		}
		if a.Out != OutNone && a.OutArg == NoArg {
			t.Errorf("%s reads an output but names no argument", a.Name)
		}
		if (a.Class == ClassLaunch) != (a.FuncArg != NoArg) {
			t.Errorf("%s: launches and only launches name a kernel argument", a.Name)
		}
		if a.Class == ClassLaunch && a.Layer != LayerDriver {
			t.Errorf("%s: launches are counted at the driver only", a.Name)
		}
		if a.Class == ClassSync && !a.Blocking {
			t.Errorf("%s: a sync blocks", a.Name)
		}
	}
	// Every runtime entry point that calls down has a driver one, so calls
	// made without the runtime (cuBLAS, NCCL, Triton) are seen too.
	for _, pair := range [][2]string{{"cudaEventRecord", "cuEventRecord"}, {"cudaStreamSynchronize", "cuStreamSynchronize"},
		{"cudaEventElapsedTime", "cuEventElapsedTime_v2"}, {"cudaMalloc", "cuMemAlloc_v2"}, {"cudaDeviceSynchronize", "cuCtxSynchronize"}} {
		if !seen[pair[0]] || !seen[pair[1]] {
			t.Errorf("missing %v", pair)
		}
	}
}

func TestNames(t *testing.T) {
	if a, ok := ByName("cudaEventRecord@@libcudart.so.13"); !ok || a.Layer != LayerRuntime {
		t.Errorf("versioned name: %+v %v", a, ok)
	}
	if _, ok := ByName("cudaNothing"); ok {
		t.Error("unknown name found")
	}
	for base, want := range map[string]Layer{"libcudart.so.13": LayerRuntime, "libcudart.so.12.4.127": LayerRuntime,
		"libcuda.so.1": LayerDriver, "libcuda.so.580.159.04": LayerDriver, "ld-linux-x86-64.so.2": LayerLoader,
		"libcudnn.so.9": LayerNone, "libcublas.so.13": LayerNone, "python3.12": LayerNone} {
		if got := LayerOf(base); got != want {
			t.Errorf("LayerOf(%s) = %s, want %s", base, got, want)
		}
	}
}

func TestCopyDir(t *testing.T) {
	rt, _ := ByName("cudaMemcpyAsync")
	for kind, want := range map[uint64]Dir{0: DirHtoH, 1: DirHtoD, 2: DirDtoH, 3: DirDtoD, 4: DirUnknown} {
		if got := rt.CopyDir([5]uint64{0, 0, 64, kind}); got != want {
			t.Errorf("kind %d: %s, want %s", kind, got, want)
		}
	}
	drv, _ := ByName("cuMemcpyDtoHAsync_v2")
	if drv.CopyDir([5]uint64{}) != DirDtoH {
		t.Error("driver copy direction")
	}
}

// TestGraphCalls: the capture and instantiate entry points say what they
// do to a graph, and read the handle each makes through the pointer
// argument cuda.h gives it.
func TestGraphCalls(t *testing.T) {
	for name, want := range map[string]struct {
		step   GraphStep
		outArg int8
	}{
		"cuStreamBeginCapture_v2":           {GraphCaptureBegin, NoArg},
		"cuStreamBeginCapture_ptsz":         {GraphCaptureBegin, NoArg},
		"cuStreamEndCapture":                {GraphCaptureEnd, 1},
		"cuStreamEndCapture_ptsz":           {GraphCaptureEnd, 1},
		"cuGraphInstantiate":                {GraphInstantiate, 0},
		"cuGraphInstantiateWithFlags":       {GraphInstantiate, 0},
		"cuGraphInstantiateWithParams_ptsz": {GraphInstantiate, 0},
	} {
		a, ok := ByName(name)
		if !ok || a.Class != ClassGraph || a.Layer != LayerDriver || a.Graph != want.step || a.OutArg != want.outArg {
			t.Errorf("%s: %+v", name, a)
		}
		if want.step == GraphInstantiate && a.HandleArg != 1 {
			t.Errorf("%s: the graph instantiated is argument %d, want 1", name, a.HandleArg)
		}
	}
	if ClassGraph.String() != "graph" {
		t.Errorf("ClassGraph is %q", ClassGraph)
	}
}
