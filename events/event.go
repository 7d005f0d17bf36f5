package events

import (
	"cmp"
	"math"
	"strings"

	"github.com/gpuprof/gpuprof/cudaapi"
)

// Kind is what an Event reports.
type Kind uint8

const (
	KindCall       Kind = 1 // a CUDA call returned
	KindKernelName Kind = 2 // a kernel handle was looked up by name
	KindLibLoad    Kind = 3 // the loader changed the set of libraries
	// KindLaunchProbes marks launch counting switching on (Out 1) or off
	// (Out 0) at End: launch counts are complete only while it is on.
	KindLaunchProbes Kind = 4
	// KindPyWait is a Python thread blocked on a lock (queue.Queue.get,
	// Event.wait, ...) from Start to End; Frames say who waited.
	KindPyWait Kind = 5
	// KindPyAttached says Python lock waits are probed in process PID from
	// End on: a step with no wait then waited zero, not an unknown time.
	KindPyAttached Kind = 6
	// KindPyGIL is a thread, right after a Python wait, waiting from Start
	// to End to take the GIL back: the tail of that wait.
	KindPyGIL Kind = 7
	// KindPool is the length of a sample pool (a Python queue the job's
	// threads wait on) in process PID at End, read from the process's
	// memory: Args[0] items, Args[1] the queue object's address, Name its
	// kind ("queue.Queue", "multiprocessing.Queue").
	KindPool Kind = 8
	// KindWrite is a write(2) call by a thread of a Python process, at its
	// entry (Start = End); Args[0] is the descriptor.
	KindWrite Kind = 9
	// KindGPUSamples is a round of the GPUs' hardware state (NVML), taken
	// at End: GPUs, one sample per GPU. Not the target's doing: PID and TID
	// are 0.
	KindGPUSamples Kind = 10
	// KindProcess says who process PID is in a distributed job, from its
	// environment: Args[0] its rank + 1, Args[1] its local rank + 1 (0:
	// not given), Args[2] the world size (0: not given).
	KindProcess Kind = 11
	// KindXid is an Xid error the driver reported (NVML), at End: Args[0]
	// the GPU's NVML index, Args[1] the Xid. PID and TID are 0.
	KindXid Kind = 12
	// KindCPUSample is thread TID of process PID seen running on a CPU
	// at End by a cpu-clock perf event, one sample every Args[0] ns of
	// its CPU time: Native and Frames are its stacks then.
	KindCPUSample Kind = 13
	// KindLaunchStack is a kernel launch (API the launch entry point) by
	// thread TID at End, read while launches are counted, one launch in
	// Args[1] (the sample stands for that many): Args[0] is the kernel's
	// handle, as launches count it (correlate names it from
	// KindKernelName events); Native and Frames are the launching stacks.
	KindLaunchStack Kind = 14
	// KindCallStack is a CUDA call (API) that held its thread from Start
	// to End (a sync, a copy): Native and Frames are its stacks, for the
	// wait profile. The call's own KindCall event is apart from it.
	KindCallStack Kind = 15
	// KindOffCPU is thread TID off CPU from Start to End, sampled by
	// time off CPU: one stretch every Args[0] ns of it, a shorter one by
	// chance (it stands for Args[0] ns then). Args[1] holds OffCPU*
	// bits. Native and Frames are the stacks it left with.
	KindOffCPU Kind = 16
	// KindKernelCount is how many times process PID launched the kernel of
	// handle Args[0] (as launches count it) while attached: Args[1]. A
	// recorded run ends with them (the counts are kept in a BPF map, not
	// sent as events), so a replay lists the most launched kernels too.
	KindKernelCount Kind = 17
	// KindKernelSite is a kernel's first launch seen (handle Out, by
	// thread TID at End, entry point API): Native holds the raw stack
	// words above the driver's launch entry (Offset only, unnamed). It
	// stays inside probes, which names the kernel from them
	// (KindKernelName, KernelNameArg): the sink never sees one.
	KindKernelSite Kind = 18
	// KindExec is process PID starting a new program (execve) at End, as
	// probes saw it (within a rescan of it): what its probes and steps
	// knew of the program before is let go of, and its steps are found
	// again from here.
	KindExec Kind = 19
)

// A KindKernelName event's Args[KernelNameArg] is KernelNameFromSite
// where the name was read from the launch's call site (the host stub, or
// the library that called the driver) rather than from the kernel's
// registration: a registration's name is the kernel's own and wins.
const (
	KernelNameArg      = 2
	KernelNameFromSite = 1
)

// A KindOffCPU sample's Args[1] bits.
const (
	OffCPURunnable = 1 // the thread was still runnable (preempted), not blocked
	OffCPUGIL      = 2 // it waited in pthread_cond_timedwait: in a Python thread, to take the GIL
)

// A CPU or off-CPU sample's Args[2] is 1 where the thread was inside a
// probed call then (a CUDA call, a Python wait): time a probed wait may
// report apart.
const StackInCallArg = 2

// IsStack says whether the event is a stack sample (KindCPUSample,
// KindLaunchStack, KindCallStack, KindOffCPU): for the profiles, not the
// steps.
func (k Kind) IsStack() bool {
	return k == KindCPUSample || k == KindLaunchStack || k == KindCallStack || k == KindOffCPU
}

// NativeFrame is one native frame of a stack, named from the ELF symbol
// tables of the file mapped at its address.
type NativeFrame struct {
	Func   string `json:"func,omitempty"` // the demangled function, "" where no symbol holds the address
	Module string `json:"module"`         // the mapped file's base name ("" where none is mapped there)
	Offset uint64 `json:"off,omitempty"`  // the address's offset in the file, where Func is ""
	// Interp says the frame is the Python interpreter's own code
	// (libpython, or the python executable): where the Python frames'
	// native stack begins.
	Interp bool `json:"interp,omitempty"`
}

// GILFollowNS is how soon after a Python wait (or a write) a GIL wait
// must begin to be its tail: the BPF programs report such GIL waits
// (bpf.Load sets their bound from this), and the correlator joins each
// to the wait it follows.
const GILFollowNS = 100_000

// PyFrame is one Python frame: the function's qualified name and file,
// and the address of its first local (a method's self: the queue object a
// get or put waits on, which the pool sampler reads).
type PyFrame struct {
	Func string `json:"func"`
	File string `json:"file"`
	Self uint64 `json:"self,omitempty"`
	// Code is the frame's code object in the process, as the kernel
	// recorded it; Func and File are read from it in user space.
	Code uint64 `json:"-"`
}

// PinMemoryLoop says whether the frame is a torch DataLoader's pin-memory
// thread's loop (torch/utils/data/_utils/pin_memory.py): it only moves
// batches from the workers' result queue into the loader's own, so its
// gets say nothing of which queue the training loop takes from.
func (f PyFrame) PinMemoryLoop() bool {
	return strings.HasSuffix(f.Func, "_pin_memory_loop") && strings.Contains(f.File, "torch/utils/data/")
}

// Event is one observation from the target. Times are CLOCK_MONOTONIC
// nanoseconds (bpf_ktime_get_ns), the clock of Python's time.monotonic_ns.
type Event struct {
	Kind  Kind
	API   uint16 // cudaapi ID
	PID   uint32 // thread group (process) ID
	TID   uint32 // thread ID
	Start uint64 // entry time
	End   uint64 // return time

	// Kernel launches this thread made since its previous event, counted in
	// the kernel at the driver layer, with the first and last launch times.
	Launches      uint32
	GraphLaunches uint32
	LaunchFirst   uint64
	LaunchLast    uint64

	Args [5]uint64 // the first five integer arguments at entry
	Ret  uint64    // the return value (a CUresult / cudaError_t)
	// Out is a value read through an output pointer at return; for a call
	// seen at entry only (an event record), its caller's return address,
	// 0 where the probe sat on the call instruction (Caller).
	Out uint64
	// Pool is, for a call of the step thread once its sample pool is known,
	// the pool's length + 1 as the call returned; 0: not read. PoolState is
	// its append+pop counter + 1 (a queue.Queue's deque), 0: not read.
	// PoolGets is the items taken from it so far + 1 (a multiprocessing
	// queue's 4-byte pipe reads), 0: not counted.
	Pool, PoolState, PoolGets uint32

	Name string // kernel name, for KindKernelName

	Frames []PyFrame // for KindPyWait and the stack kinds, innermost first

	Native []NativeFrame // for the stack kinds, innermost first

	GPUs []GPUSample // for KindGPUSamples
}

// CompareEnd orders events by return time (for slices.SortStableFunc):
// the order in which the correlator wants them.
func CompareEnd(a, b Event) int { return cmp.Compare(a.End, b.End) }

// Desc returns the description of the event's entry point.
func (e *Event) Desc() cudaapi.API {
	a, _ := cudaapi.ByID(e.API)
	return a
}

// Duration is the time spent inside the call, in nanoseconds.
func (e *Event) Duration() uint64 {
	if e.End < e.Start {
		return 0
	}
	return e.End - e.Start
}

// OK reports whether the call returned success (cudaSuccess / CUDA_SUCCESS).
func (e *Event) OK() bool { return uint32(e.Ret) == 0 }

// ElapsedMS is the float an elapsed-time call wrote for the application.
func (e *Event) ElapsedMS() float64 {
	return float64(math.Float32frombits(uint32(e.Out)))
}

// Bytes is the byte count of a copy or allocation.
func (e *Event) Bytes() uint64 {
	return cudaapi.Arg(e.Args, e.Desc().BytesArg)
}

// Dir is the direction of a copy.
func (e *Event) Dir() cudaapi.Dir {
	return e.Desc().CopyDir(e.Args)
}

// Handle is the event, stream or pointer the call is about.
func (e *Event) Handle() uint64 {
	return cudaapi.Arg(e.Args, e.Desc().HandleArg)
}

// Second is the end event of an elapsed-time reading.
func (e *Event) Second() uint64 {
	return cudaapi.Arg(e.Args, e.Desc().SecondArg)
}

// Caller is where an entry-only call (an event record) returns to in its
// caller, 0 when not known (a probe on the call instruction itself).
func (e *Event) Caller() uint64 { return e.Out }

// Stream is the stream argument, 0 for the legacy default stream.
func (e *Event) Stream() uint64 {
	return cudaapi.Arg(e.Args, e.Desc().StreamArg)
}
