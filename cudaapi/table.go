package cudaapi

// The table follows what an unmodified PyTorch job goes through (docs/facts.md §3):
// the runtime entry points the application calls, and the driver entry points
// that cuBLAS, cuDNN, NCCL and Triton reach through cuGetProcAddress.
//
// Kernel launches are only in the driver layer: every runtime launch reaches
// cuLaunchKernel underneath (counted equal on the GPU host), so counting at
// the driver counts each launch once with one probe, half the cost of
// probing both layers.
var table = []API{
	// Runtime: events.
	record("cudaEventRecord", LayerRuntime),
	record("cudaEventRecord_ptsz", LayerRuntime),
	record("cudaEventRecordWithFlags", LayerRuntime),
	record("cudaEventRecordWithFlags_ptsz", LayerRuntime),
	elapsed("cudaEventElapsedTime", LayerRuntime),
	elapsed("cudaEventElapsedTime_v2", LayerRuntime),
	// Runtime: synchronisation.
	sync("cudaDeviceSynchronize", LayerRuntime, SyncDevice),
	sync("cudaStreamSynchronize", LayerRuntime, SyncStream),
	sync("cudaStreamSynchronize_ptsz", LayerRuntime, SyncStream),
	sync("cudaEventSynchronize", LayerRuntime, SyncEvent),
	// Runtime: copies (dst, src, count, kind[, stream]).
	runtimeCopy("cudaMemcpy", true),
	runtimeCopy("cudaMemcpy_ptds", true),
	runtimeCopy("cudaMemcpyAsync", false),
	runtimeCopy("cudaMemcpyAsync_ptsz", false),
	// Runtime: memory.
	alloc("cudaMalloc", LayerRuntime, MemDevice, NoArg),
	alloc("cudaMallocAsync", LayerRuntime, MemDevice, 2),
	alloc("cudaMallocAsync_ptsz", LayerRuntime, MemDevice, 2),
	alloc("cudaMallocManaged", LayerRuntime, MemManaged, NoArg),
	alloc("cudaMallocHost", LayerRuntime, MemHostPinned, NoArg),
	alloc("cudaHostAlloc", LayerRuntime, MemHostPinned, NoArg),
	free("cudaFree", LayerRuntime, MemDevice),
	free("cudaFreeAsync", LayerRuntime, MemDevice),
	free("cudaFreeAsync_ptsz", LayerRuntime, MemDevice),
	free("cudaFreeHost", LayerRuntime, MemHostPinned),

	// Driver: launches, counted in the kernel per thread and per kernel handle.
	launch("cuLaunchKernel", 0),
	launch("cuLaunchKernel_ptsz", 0),
	launch("cuLaunchKernelEx", 1),
	launch("cuLaunchKernelEx_ptsz", 1),
	launch("cuLaunchCooperativeKernel", 0),
	launch("cuLaunchCooperativeKernel_ptsz", 0),
	graphLaunch("cuGraphLaunch"),
	graphLaunch("cuGraphLaunch_ptsz"),
	// Driver: CUDA graphs made by stream capture (rare calls, probed all
	// the time): the launches a thread makes between a capture's begin and
	// end are the graph's kernels, which each replay of it runs
	// (correlate/graphs.go). CUDA 12's cuda.h maps cuStreamBeginCapture to
	// _v2 and cuGraphInstantiate to cuGraphInstantiateWithFlags; libcuda
	// exports the older names too (docs/facts.md §3).
	graphCall("cuStreamBeginCapture", GraphCaptureBegin),
	graphCall("cuStreamBeginCapture_ptsz", GraphCaptureBegin),
	graphCall("cuStreamBeginCapture_v2", GraphCaptureBegin),
	graphCall("cuStreamBeginCapture_v2_ptsz", GraphCaptureBegin),
	graphCall("cuStreamEndCapture", GraphCaptureEnd),
	graphCall("cuStreamEndCapture_ptsz", GraphCaptureEnd),
	graphCall("cuGraphInstantiate", GraphInstantiate),
	graphCall("cuGraphInstantiate_v2", GraphInstantiate),
	graphCall("cuGraphInstantiateWithFlags", GraphInstantiate),
	graphCall("cuGraphInstantiateWithParams", GraphInstantiate),
	graphCall("cuGraphInstantiateWithParams_ptsz", GraphInstantiate),
	// Driver: events.
	record("cuEventRecord", LayerDriver),
	record("cuEventRecord_ptsz", LayerDriver),
	record("cuEventRecordWithFlags", LayerDriver),
	record("cuEventRecordWithFlags_ptsz", LayerDriver),
	elapsed("cuEventElapsedTime", LayerDriver),
	elapsed("cuEventElapsedTime_v2", LayerDriver),
	// Driver: synchronisation.
	sync("cuCtxSynchronize", LayerDriver, SyncDevice),
	sync("cuCtxSynchronize_v2", LayerDriver, SyncDevice),
	sync("cuStreamSynchronize", LayerDriver, SyncStream),
	sync("cuStreamSynchronize_ptsz", LayerDriver, SyncStream),
	sync("cuEventSynchronize", LayerDriver, SyncEvent),
	// Driver: copies (dst, src, bytes[, stream]).
	driverCopy("cuMemcpy", DirUnknown, NoArg),
	driverCopy("cuMemcpy_ptds", DirUnknown, NoArg),
	driverCopy("cuMemcpyAsync", DirUnknown, 3),
	driverCopy("cuMemcpyAsync_ptsz", DirUnknown, 3),
	driverCopy("cuMemcpyHtoD_v2", DirHtoD, NoArg),
	driverCopy("cuMemcpyDtoH_v2", DirDtoH, NoArg),
	driverCopy("cuMemcpyDtoD_v2", DirDtoD, NoArg),
	driverCopy("cuMemcpyHtoDAsync_v2", DirHtoD, 3),
	driverCopy("cuMemcpyHtoDAsync_v2_ptsz", DirHtoD, 3),
	driverCopy("cuMemcpyDtoHAsync_v2", DirDtoH, 3),
	driverCopy("cuMemcpyDtoHAsync_v2_ptsz", DirDtoH, 3),
	driverCopy("cuMemcpyDtoDAsync_v2", DirDtoD, 3),
	driverCopy("cuMemcpyDtoDAsync_v2_ptsz", DirDtoD, 3),
	// Driver: memory.
	alloc("cuMemAlloc_v2", LayerDriver, MemDevice, NoArg),
	alloc("cuMemAllocAsync", LayerDriver, MemDevice, 2),
	alloc("cuMemAllocAsync_ptsz", LayerDriver, MemDevice, 2),
	alloc("cuMemAllocManaged", LayerDriver, MemManaged, NoArg),
	alloc("cuMemAllocHost_v2", LayerDriver, MemHostPinned, NoArg),
	alloc("cuMemHostAlloc", LayerDriver, MemHostPinned, NoArg),
	alloc("cuMemCreate", LayerDriver, MemPhysical, NoArg),
	free("cuMemFree_v2", LayerDriver, MemDevice),
	free("cuMemFreeAsync", LayerDriver, MemDevice),
	free("cuMemFreeAsync_ptsz", LayerDriver, MemDevice),
	free("cuMemFreeHost", LayerDriver, MemHostPinned),
	free("cuMemRelease", LayerDriver, MemPhysical),
	// Driver: kernel names, seen when modules are loaded (rare calls).
	kernelName("cuModuleGetFunction"),
	kernelName("cuLibraryGetKernel"),
	{Name: "cuKernelGetFunction", Layer: LayerDriver, Class: ClassKernelName,
		KindArg: NoArg, BytesArg: NoArg, HandleArg: 1, SecondArg: NoArg, StreamArg: NoArg,
		FuncArg: NoArg, NameArg: NoArg, Out: OutU64, OutArg: 0},

	// The dynamic loader calls _dl_debug_state after every change to the set
	// of loaded libraries (the hook debuggers use), so libraries dlopen'ed
	// after attach are found at once rather than at the next poll.
	{Name: "_dl_debug_state", Layer: LayerLoader, Class: ClassLibLoad,
		KindArg: NoArg, BytesArg: NoArg, HandleArg: NoArg, SecondArg: NoArg, StreamArg: NoArg,
		FuncArg: NoArg, NameArg: NoArg, OutArg: NoArg},
}

func base(name string, layer Layer, class Class) API {
	return API{Name: name, Layer: layer, Class: class,
		KindArg: NoArg, BytesArg: NoArg, HandleArg: NoArg, SecondArg: NoArg,
		StreamArg: NoArg, FuncArg: NoArg, NameArg: NoArg, OutArg: NoArg}
}

// record: (event, stream[, flags]).
func record(name string, layer Layer) API {
	a := base(name, layer, ClassRecord)
	a.HandleArg, a.StreamArg = 0, 1
	return a
}

// elapsed: (float *ms, start, end); the float is read at return.
func elapsed(name string, layer Layer) API {
	a := base(name, layer, ClassElapsed)
	a.Out, a.OutArg, a.HandleArg, a.SecondArg = OutU32, 0, 1, 2
	return a
}

// sync: () for a device, (stream) or (event) otherwise.
func sync(name string, layer Layer, kind SyncKind) API {
	a := base(name, layer, ClassSync)
	a.Sync, a.Blocking = kind, true
	switch kind {
	case SyncStream:
		a.HandleArg, a.StreamArg = 0, 0
	case SyncEvent:
		a.HandleArg = 0
	}
	return a
}

// runtimeCopy: (dst, src, count, kind[, stream]).
func runtimeCopy(name string, blocking bool) API {
	a := base(name, LayerRuntime, ClassCopy)
	a.HandleArg, a.BytesArg, a.KindArg, a.Blocking = 0, 2, 3, blocking
	if !blocking {
		a.StreamArg = 4
	}
	return a
}

// driverCopy: (dst, src, bytes[, stream]).
func driverCopy(name string, dir Dir, stream int8) API {
	a := base(name, LayerDriver, ClassCopy)
	a.HandleArg, a.BytesArg, a.Dir, a.StreamArg, a.Blocking = 0, 2, dir, stream, stream == NoArg
	return a
}

// alloc: (ptr *out, size[, ...]); the pointer is read at return.
func alloc(name string, layer Layer, mem Memory, stream int8) API {
	a := base(name, layer, ClassAlloc)
	a.Memory, a.BytesArg, a.Out, a.OutArg, a.StreamArg = mem, 1, OutU64, 0, stream
	return a
}

// free: (ptr[, stream]).
func free(name string, layer Layer, mem Memory) API {
	a := base(name, layer, ClassFree)
	a.Memory, a.HandleArg = mem, 0
	return a
}

// launch: counted in the kernel; arg f is the kernel handle.
func launch(name string, f int8) API {
	a := base(name, LayerDriver, ClassLaunch)
	a.FuncArg = f
	return a
}

func graphLaunch(name string) API {
	a := base(name, LayerDriver, ClassGraphLaunch)
	a.HandleArg, a.StreamArg = 0, 1
	return a
}

// graphCall: capture begin (stream[, mode]), capture end (stream, CUgraph
// *out), instantiate (CUgraphExec *out, graph, ...); the handle made is
// read at return.
func graphCall(name string, step GraphStep) API {
	a := base(name, LayerDriver, ClassGraph)
	a.Graph = step
	switch step {
	case GraphCaptureBegin:
		a.StreamArg = 0
	case GraphCaptureEnd:
		a.StreamArg, a.Out, a.OutArg = 0, OutU64, 1
	case GraphInstantiate:
		a.HandleArg, a.Out, a.OutArg = 1, OutU64, 0
	}
	return a
}

// kernelName: (handle *out, module, const char *name).
func kernelName(name string) API {
	a := base(name, LayerDriver, ClassKernelName)
	a.Out, a.OutArg, a.NameArg = OutU64, 0, 2
	return a
}
