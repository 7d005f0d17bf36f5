package main

import (
	"runtime/debug"

	"github.com/spf13/pflag"
)

// memoryFlags is --max-memory: the Go runtime's memory limit for gpuprof.
// It is soft (runtime/debug.SetMemoryLimit: the collector works harder as
// the heap nears it, and gives memory back to the system; nothing fails
// at it). What bounds gpuprof's memory is that everything it keeps on a
// target's behalf is bounded (docs/safety.md): the drainer's held events,
// each correlator's learning buffer and review window, the event and
// allocation handles, the per-step distributions, the HTML report's bins,
// --trace's --trace-max-mb. The limit keeps the garbage between
// collections from doubling that.
type memoryFlags struct {
	maxMiB int
}

// defaultMaxMemoryMiB: ~5 times what a soak at 40,000 events a second
// holds (docs/soak.md).
const defaultMaxMemoryMiB = 1024

func (m *memoryFlags) register(fs *pflag.FlagSet) {
	fs.IntVar(&m.maxMiB, "max-memory", defaultMaxMemoryMiB, "the memory, in MiB, gpuprof's garbage collector keeps it within (a soft limit: what gpuprof keeps is bounded anyway; 0: no limit)")
}

// apply sets the limit; a negative size is a usage error.
func (m *memoryFlags) apply() error {
	if m.maxMiB < 0 {
		return usageErr("--max-memory %d: give a size in MiB, or 0 for no limit", m.maxMiB)
	}
	if m.maxMiB > 0 {
		debug.SetMemoryLimit(int64(m.maxMiB) << 20)
	}
	return nil
}
