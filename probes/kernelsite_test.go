package probes

import (
	"debug/elf"
	"path/filepath"
	"testing"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// A host stub's symbol names its kernel as the driver's registrations do
// (mangled), the compilers' clone suffixes dropped; a stub with no symbol
// or a driver-API caller says where the launch came from.
func TestKernelNamesFromSites(t *testing.T) {
	for _, c := range []struct {
		symbol, want string
		driver       bool
	}{
		{"__device_stub__Z10add_kernelPfS_i", "_Z10add_kernelPfS_i", false},
		{"__device_stub__ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_", "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_", false},
		{"__device_stub__softmax_kernel", "softmax_kernel", false},
		{"__device_stub__engine_kernel.constprop.0", "engine_kernel", false},
		{"_ZN2at6native18elementwise_kernelILi128ELi2EEEviT1_", "kernel launched in at::native::elementwise_kernel<128, 2>", false},
		{"_Z4gemmPfS_.isra.0", "kernel launched in gemm", false},
		{"", "kernel launched from libtorch_cuda.so+0x1234 (its host stub has no symbol)", false},
		{"_ZN8cublasLt8dispatchEv", "kernel 0x7f00 launched by libcublasLt.so.13 in cublasLt::dispatch (driver API)", true},
		{"", "kernel 0x7f00 launched by libcublasLt.so.13 (driver API)", true},
		// torch's: the stub in the kernel's namespace, its name one identifier of its own.
		{"_ZN2at6native57_GLOBAL__N__e658eeb9_24_ForeachBinaryOpScalar_cu_86b9896c44__device_stub__ZN2at6native13reduce_kernelEvEv",
			"_ZN2at6native13reduce_kernelEv", false},
	} {
		module := "libtorch_cuda.so"
		if c.driver {
			module = "libcublasLt.so.13"
		}
		a := codeAddr{module: module, off: 0x1234, symbol: c.symbol}
		got := stubKernel(a)
		if c.driver {
			got = driverCaller(a, 0x7f00)
		}
		if got != c.want {
			t.Errorf("%q: %q, want %q", c.symbol, got, c.want)
		}
	}
	for _, m := range []string{"libcuda.so.1", "libcuda.so.580.159.04"} {
		if !driverLib(m) || runtimeLib(m) {
			t.Errorf("%s is the driver", m)
		}
	}
	// The runtime header's template, compiled into torch: cudaLaunchKernel<char>.
	const wrapper = "_Z16cudaLaunchKernelIcE9cudaError_tPKT_4dim3S4_PPvmP11CUstream_st"
	if !runtimeLib("libcudart.so.13") || !runtimeFunc("cudaLaunchKernel") || !runtimeFunc("__cudart1234") || !runtimeFunc(wrapper) || runtimeFunc("_Z3fooPf") {
		t.Error("the runtime's library and functions not told apart")
	}
	if !launchEntry("cudaLaunchKernel") || !launchEntry("__cudaLaunchKernel") || !launchEntry("cuLaunchKernelEx") || !launchEntry(wrapper) || launchEntry("cudaGetLastError") {
		t.Error("the launch entry points not told from other calls")
	}
}

// The demo trainer's imports are named by their PLT entries and GOT
// slots: what a call's target says it called.
func TestReadImports(t *testing.T) {
	dir := testenv.Fixtures(t)
	ef, err := elf.Open(filepath.Join(dir, "demo-trainer"))
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	path := filepath.Join(dir, "demo-trainer")
	fs := readFileSymbols(MappedFile{Path: path, HostPath: path})
	if fs.err != nil {
		t.Fatal(fs.err)
	}
	imports := fs.importTable()
	var plt, got bool
	for addr := range imports.slots {
		if name, _ := imports.name(addr); name != "dlsym" {
			continue
		}
		for _, sec := range []string{".plt", ".plt.sec"} {
			if s := ef.Section(sec); s != nil && addr >= s.Addr && addr < s.Addr+s.Size {
				plt = true
			}
		}
		if s := ef.Section(".got"); s != nil && addr >= s.Addr && addr < s.Addr+s.Size {
			got = true
		}
		if s := ef.Section(".got.plt"); s != nil && addr >= s.Addr && addr < s.Addr+s.Size {
			got = true
		}
	}
	if !plt || !got {
		t.Errorf("dlsym: PLT entry named %v, GOT slot named %v (%d imports)", plt, got, imports.len())
	}
}

// The words above the driver's launch entry of torch's kernels on the
// H200 (torch 2.11, CUDA 13; GPUPROF_LOG=debug, 2026-12-02): the
// runtime's frames, stale return addresses (torch's launch check,
// c10_cuda_check_implementation, left from the previous launch), then
// the launch's own caller: a host stub, or a launcher the stub was
// inlined into, whose call went to the runtime's __cudaLaunchKernel.
func TestNameFromTorchWords(t *testing.T) {
	rt := func(symbol, callee string) siteWord {
		return siteWord{codeAddr{module: "libcudart.so.13", symbol: symbol}, callee}
	}
	stale := siteWord{codeAddr{module: "libc10_cuda.so", symbol: "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb"},
		"_ZNK3c104cuda24CUDAKernelLaunchRegistry10has_failedEv"}
	torch := func(symbol, callee string) siteWord {
		return siteWord{codeAddr{module: "libtorch_cuda.so", symbol: symbol}, callee}
	}
	head := []siteWord{rt("", ""), rt("", ""), rt("", ""), rt("cudaLaunchKernel", ""), stale, rt("", "pthread_once"),
		rt("", "__tls_get_addr"), rt("__cudaPopCallConfiguration", "")}
	for _, c := range []struct {
		last siteWord
		want string
	}{
		{torch("_ZL44__device_stub__ZN2at6native13reduce_kernelEvEv", ""), "_ZN2at6native13reduce_kernelEv"},
		{torch("_ZN2at6native15gpu_kernel_implIfEEvRNS_18TensorIteratorBaseE.isra.0", "__cudaLaunchKernel"),
			"kernel launched in at::native::gpu_kernel_impl<float>"},
	} {
		if got := nameFromWords(append(head[:len(head):len(head)], c.last), 0x1); got != c.want {
			t.Errorf("%s: %q, want %q", c.last.c.symbol, got, c.want)
		}
	}
}
