package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
)

// selfProfileEnv names a directory where gpuprof writes profiles of
// itself: cpu-PID.pprof over the whole command, heap-PID.pprof (live and
// allocated) at its end, PID gpuprof's own, so that runs do not overwrite
// each other's. For measuring gpuprof's own cost where it runs
// beside a job (docs/benchmark.md), with `go tool pprof`.
const selfProfileEnv = "GPUPROF_SELF_PROFILE"

// startSelfProfile starts the CPU profile where selfProfileEnv asks for
// one; the function it returns ends it and writes the heap profile.
func startSelfProfile() (func(), error) {
	dir := os.Getenv(selfProfileEnv)
	if dir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", selfProfileEnv, err)
	}
	cpu, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pprof", os.Getpid())))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", selfProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		return nil, fmt.Errorf("%s: %w", selfProfileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		cpu.Close()
		runtime.GC() // the live heap as of the end
		heap, err := os.Create(filepath.Join(dir, fmt.Sprintf("heap-%d.pprof", os.Getpid())))
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(heap, 0)
			heap.Close()
		}
		if err != nil {
			slog.Warn("heap profile not written", "env", selfProfileEnv, "err", err)
		}
	}, nil
}
