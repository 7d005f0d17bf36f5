package cudaapi

import "strings"

// Layer is the library an entry point lives in.
type Layer uint8

const (
	LayerNone    Layer = iota
	LayerRuntime       // libcudart.so.*: what the application (PyTorch) calls
	LayerDriver        // libcuda.so.1: where the runtime, cuBLAS, NCCL and Triton end up
	LayerLoader        // ld.so: tells gpuprof that libraries were loaded
	LayerUser          // a function the user named (--probe): IDs from UserBase on
)

// UserBase is the first ID of user-named probes; the table's IDs stay below.
const UserBase = 0x8000

func (l Layer) String() string {
	switch l {
	case LayerRuntime:
		return "runtime"
	case LayerDriver:
		return "driver"
	case LayerLoader:
		return "loader"
	case LayerUser:
		return "user"
	}
	return "none"
}

// Class is what an entry point does, as far as step analysis cares.
type Class uint8

const (
	ClassNone        Class = iota
	ClassLaunch            // a kernel launch: counted in the kernel, no event per call
	ClassGraphLaunch       // a CUDA graph launch: counted like a launch
	ClassRecord            // an event record on a stream
	ClassElapsed           // the application reading the time between two events
	ClassSync              // the host waits for the GPU
	ClassCopy              // a memory copy
	ClassAlloc             // a memory allocation
	ClassFree              // a memory free
	ClassKernelName        // a kernel handle looked up by name (module loading)
	ClassLibLoad           // the dynamic loader changed the set of libraries
	ClassGraph             // a CUDA graph captured or instantiated (API.Graph says which)
)

var classNames = [...]string{"none", "launch", "graph_launch", "record", "elapsed", "sync", "copy", "alloc", "free", "kernel_name", "lib_load", "graph"}

func (c Class) String() string {
	if int(c) < len(classNames) {
		return classNames[c]
	}
	return "unknown"
}

// SyncKind says what a synchronisation waits for.
type SyncKind uint8

const (
	SyncNone SyncKind = iota
	SyncDevice
	SyncStream
	SyncEvent
)

func (s SyncKind) String() string {
	return [...]string{"none", "device", "stream", "event"}[s]
}

// GraphStep is what a ClassGraph call does to a CUDA graph: the steps by
// which a stream's captured work becomes a graph that cuGraphLaunch replays.
type GraphStep uint8

const (
	GraphNone         GraphStep = iota
	GraphCaptureBegin           // the stream's work is recorded into a graph from now on, not run
	GraphCaptureEnd             // the capture ends; Out is the graph (CUgraph)
	GraphInstantiate            // a graph (HandleArg) made executable; Out is the exec (CUgraphExec)
)

func (g GraphStep) String() string {
	return [...]string{"none", "capture_begin", "capture_end", "instantiate"}[g]
}

// Dir is the direction of a copy.
type Dir uint8

const (
	DirUnknown Dir = iota // cudaMemcpyDefault / cuMemcpy: unified addressing decides
	DirHtoD
	DirDtoH
	DirDtoD
	DirHtoH
)

func (d Dir) String() string {
	return [...]string{"default", "h2d", "d2h", "d2d", "h2h"}[d]
}

// Memory says which kind of memory an allocation is.
type Memory uint8

const (
	MemDevice Memory = iota
	MemHostPinned
	MemManaged
	MemPhysical // cuMemCreate: physical memory for virtual memory management
)

func (m Memory) String() string {
	return [...]string{"device", "host_pinned", "managed", "physical"}[m]
}

// Out says what a return probe reads through a pointer argument saved at entry.
type Out uint8

const (
	OutNone Out = iota
	OutU32      // a 32-bit value at *arg[OutArg] (the float of cudaEventElapsedTime)
	OutU64      // a 64-bit value at *arg[OutArg] (a pointer or handle an allocation returns)
)

// NoArg marks an argument role the entry point does not have.
const NoArg = -1

// API describes one entry point.
type API struct {
	ID    uint16
	Name  string // symbol name, without ELF version
	Layer Layer
	Class Class

	Sync     SyncKind
	Dir      Dir       // fixed direction of a copy; see KindArg
	Memory   Memory    // for Alloc and Free
	Blocking bool      // returns only once the GPU work it covers is done
	Graph    GraphStep // for ClassGraph

	KindArg   int8 // cudaMemcpyKind argument (runtime copies), or NoArg
	BytesArg  int8 // byte count of a copy or allocation, or NoArg
	HandleArg int8 // the event, stream or pointer the call is about, or NoArg
	SecondArg int8 // the end event of an elapsed-time reading, or NoArg
	StreamArg int8 // the stream, or NoArg
	FuncArg   int8 // the kernel handle of a launch, or NoArg
	NameArg   int8 // a kernel name string, or NoArg
	Out       Out
	OutArg    int8 // which argument Out reads through
}

// Runtime cudaMemcpyKind values.
const (
	memcpyHostToHost     = 0
	memcpyHostToDevice   = 1
	memcpyDeviceToHost   = 2
	memcpyDeviceToDevice = 3
)

// CopyDir returns a copy's direction from its captured arguments.
func (a API) CopyDir(args [5]uint64) Dir {
	if a.Class != ClassCopy {
		return DirUnknown
	}
	if a.KindArg == NoArg {
		return a.Dir
	}
	switch args[a.KindArg] {
	case memcpyHostToHost:
		return DirHtoH
	case memcpyHostToDevice:
		return DirHtoD
	case memcpyDeviceToHost:
		return DirDtoH
	case memcpyDeviceToDevice:
		return DirDtoD
	}
	return DirUnknown
}

// Arg returns argument i of args, or 0 when the API has no such argument.
func Arg(args [5]uint64, i int8) uint64 {
	if i < 0 || int(i) >= len(args) {
		return 0
	}
	return args[i]
}

var byName = map[string]*API{}

func init() {
	for i := range table {
		table[i].ID = uint16(i + 1)
		byName[table[i].Name] = &table[i]
	}
}

// All returns every known entry point.
func All() []API { return table }

// ByID returns the entry point with the given ID.
func ByID(id uint16) (API, bool) {
	if id == 0 || int(id) > len(table) {
		return API{}, false
	}
	return table[id-1], true
}

// ByName returns the entry point named name. An ELF version suffix
// ("cudaEventRecord@@libcudart.so.13") is ignored.
func ByName(name string) (API, bool) {
	a, ok := byName[StripVersion(name)]
	if !ok {
		return API{}, false
	}
	return *a, true
}

// StripVersion removes an ELF symbol version suffix.
func StripVersion(name string) string {
	if i := strings.IndexByte(name, '@'); i >= 0 {
		return name[:i]
	}
	return name
}

// LayerOf says which layer a library file belongs to, from its base name.
func LayerOf(base string) Layer {
	switch {
	case strings.HasPrefix(base, "libcudart.so"):
		return LayerRuntime
	case strings.HasPrefix(base, "libcuda.so"):
		return LayerDriver
	case strings.HasPrefix(base, "ld-linux") || strings.HasPrefix(base, "ld-musl") || base == "ld.so":
		return LayerLoader
	}
	return LayerNone
}
