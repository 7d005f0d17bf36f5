package probes

import (
	"os"
	"testing"
)

// BenchmarkReadFileSymbols reads a large C++ library's function symbols
// the way the symbolizer does the first time a stack or a kernel's launch
// site lands in it: libtorch_cuda.so's are read at an attach's first
// launches, beside the job. GPUPROF_BENCH_ELF names the file (default
// LLVM's, the largest C++ library on a Debian machine).
func BenchmarkReadFileSymbols(b *testing.B) {
	path := os.Getenv("GPUPROF_BENCH_ELF")
	if path == "" {
		path = "/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1"
	}
	if _, err := os.Stat(path); err != nil {
		b.Skipf("no large ELF file to read (%v): set GPUPROF_BENCH_ELF", err)
	}
	f := MappedFile{Path: path, HostPath: path}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		fs := readFileSymbols(f)
		if fs.err != nil {
			b.Fatal(fs.err)
		}
		n = len(fs.table().syms)
		fs.importTable()
		fs.file.Close()
	}
	b.ReportMetric(float64(n), "symbols")
}
