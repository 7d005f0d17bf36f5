// Package pymem reads CPython objects in another process's memory: the
// length of a sample pool (a queue.Queue or a multiprocessing queue) whose
// address gpuprof's frame walk captured, and where the bytecode of a
// Python function named by module and qualname starts and returns
// (Function), and the names of the code objects the kernel's frame walk
// recorded (Code), without running any code in the target. Every read is one
// process_vm_readv: no ptrace stop, and a read of memory the target does
// not map is an error here, never a crash.
//
// Supported: CPython 3.10 to 3.13 on x86-64, default (GIL) builds. A
// free-threaded build (3.13t) lays objects out differently and is not
// recognised as such: the caller must not hand it to this package.
package pymem

import (
	"errors"
	"fmt"
	"sync"
)

// ErrNotPool is wrapped by Pool's error for an object that is no queue
// pymem can read.
var ErrNotPool = errors.New("not a supported sample pool")

// errNoAttr is returned (wrapped) when an instance lacks an attribute.
var errNoAttr = errors.New("no such attribute")

// Reader reads the objects of one process running one CPython minor
// version. Its methods are safe for concurrent use.
type Reader struct {
	pid   int
	minor int
	l     *layout
	// mem fills buf from the target's memory at addr and says how many
	// bytes it could: processMemory, or the fuzz tests' memory images.
	mem func(buf []byte, addr uint64) (int, error)

	mu sync.Mutex
	// builtin maps a builtin type's name ("str", "dict") to its address,
	// learned from the first object seen of it, so that checking the type
	// of the many keys a lookup passes costs no read of the type's name.
	builtin map[string]uint64
	// codes are the names of code objects read, by address (Code).
	codes map[uint64]*codeEntry
}

// NewReader reads process pid, which runs CPython 3.minor.
func NewReader(pid, minor int) (*Reader, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("pymem: bad pid %d", pid)
	}
	l, ok := layouts[minor]
	if !ok {
		return nil, fmt.Errorf("pymem: CPython 3.%d is not supported (3.10 to 3.13 are)", minor)
	}
	return &Reader{pid: pid, minor: minor, l: l, mem: processMemory(pid), builtin: map[string]uint64{}, codes: map[uint64]*codeEntry{}}, nil
}

// TypeName is the tp_name of obj's type: "Queue" for a class defined in
// Python, "collections.deque" for a C type that names its module.
func (r *Reader) TypeName(obj uint64) (string, error) {
	t, err := r.objType(obj)
	if err != nil {
		return "", fmt.Errorf("pymem: type of object at %#x: %w", obj, err)
	}
	return t.name, nil
}

// Attr is the value (a PyObject*) of obj's instance attribute name, as
// obj.__dict__[name] would give it: no class attributes, descriptors or
// __getattr__. obj must be an instance of a class with an instance dict
// (a plain Python class).
func (r *Reader) Attr(obj uint64, name string) (uint64, error) {
	t, err := r.objType(obj)
	if err != nil {
		return 0, fmt.Errorf("pymem: type of object at %#x: %w", obj, err)
	}
	v, err := r.attr(obj, t, name)
	if err != nil {
		return 0, fmt.Errorf("pymem: %s object at %#x: attribute %s: %w", t.name, obj, name, err)
	}
	return v, nil
}
