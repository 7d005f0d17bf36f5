package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// runBehindTheJob puts every thread of gpuprof under SCHED_BATCH. The
// kernel then never preempts a running thread to run one of gpuprof's as
// it wakes (each poll of the ring buffer, each batch of events), which on
// a core the job runs on costs the job's thread its turn. On the dev VM a
// GIL-bound two-thread loop (testdata/python/handoff_loop.py) had 33-58%
// more context switches a step with gpuprof attached at the normal
// policy, 1.2-1.7% under SCHED_BATCH, and none with gpuprof pinned to
// another core. gpuprof still gets its share of an idle or busy machine:
// SCHED_BATCH only gives up preempting. The Go runtime's threads started
// later take the policy of the thread that starts them; one that starts
// while this runs is caught by the second pass.
func runBehindTheJob() error {
	attr := unix.SchedAttr{Size: uint32(unsafe.Sizeof(unix.SchedAttr{})), Policy: unix.SCHED_BATCH}
	for range 2 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("list gpuprof's threads: %w", err)
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && err != unix.ESRCH {
				return fmt.Errorf("SCHED_BATCH for thread %d: %w", tid, err)
			}
		}
	}
	return nil
}

// maxProcs bounds the Go runtime's processors (GOMAXPROCS): gpuprof's
// work is one event loop, a symbolizer and samplers, well within two
// cores, where the default (every CPU: 16 on the GPU host) lets the
// collector's workers and page faults run on many CPUs at once. On that
// host's VM, what gpuprof ran in its first second cost the data pipeline
// ~15% of that second's steps, about its own CPU time (issue 29,
// docs/benchmark.md), and each page gpuprof first wrote interrupted the
// CPUs it had run on (ptep_clear_flush's TLB shootdown, 15% of gpuprof's
// own samples in `perf record` on the dev VM).
const maxProcs = 2

// boundProcs caps GOMAXPROCS at maxProcs, unless the environment sets it.
func boundProcs() {
	if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) > maxProcs {
		runtime.GOMAXPROCS(maxProcs)
	}
}
