package bpf

import (
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// Features are the parts of gpuprof a session uses beyond the CUDA and
// loader probes, which every session attaches.
type Features uint8

const (
	FeaturePyWaits     Features = 1 << iota // the Python wait probes (libc's waits, the GIL, _Py_write)
	FeaturePyFunctions                      // Python functions timed by name (watchpoints, native anchors)
	FeatureOnCPU                            // on-CPU stack samples
	FeatureOffCPU                           // off-CPU stack samples
)

// AllFeatures is every feature: for tests that attach any program.
const AllFeatures = FeaturePyWaits | FeaturePyFunctions | FeatureOnCPU | FeatureOffCPU

// programFeature is the feature each program serves that is not always
// attached. A program of a feature the session does not use is loaded
// as two instructions that return at once: the kernel verifies each
// program as it loads, and the stack samplers' and the Python function
// timers' programs took ~70 ms of its CPU at every start on the dev VM
// (of ~165 ms for all: py_lock_return alone ~68 ms), CPU an attach
// takes from the machine the job runs on.
var programFeature = map[string]Features{
	gpuprofProgPyLockEntry:   FeaturePyWaits,
	gpuprofProgPyLockReturn:  FeaturePyWaits,
	gpuprofProgGilEntry:      FeaturePyWaits,
	gpuprofProgGilReturn:     FeaturePyWaits,
	gpuprofProgIoWrite:       FeaturePyWaits,
	gpuprofProgPyCallSite:    FeaturePyFunctions,
	gpuprofProgPyAnchorStart: FeaturePyFunctions,
	gpuprofProgPyAnchorEnd:   FeaturePyFunctions,
	gpuprofProgCpuSample:     FeatureOnCPU,
	gpuprofProgOffcpuLeave:   FeatureOffCPU,
	gpuprofProgOffcpuReturn:  FeatureOffCPU,
}

// leaveOut makes the programs of features not in use return at once,
// and the stack samples' ring buffer (8 MiB of the kernel's memory,
// allocated at its creation) a page where no stacks are read.
func leaveOut(spec *ebpf.CollectionSpec, set Settings) {
	for name, f := range programFeature {
		if p := spec.Programs[name]; p != nil && set.Features&f == 0 {
			p.Instructions = asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
		}
	}
	if set.LaunchStackEvery == 0 && !set.StackCalls && set.CPUPeriodNS == 0 && set.OffCPUPeriodNS == 0 {
		spec.Maps[gpuprofMapStacks].MaxEntries = uint32(os.Getpagesize())
	}
}
