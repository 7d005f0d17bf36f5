package profiles

import (
	"fmt"
	"path"
	"strings"

	"github.com/ianlancetaylor/demangle"

	"github.com/gpuprof/gpuprof/events"
)

// frame is one frame of a profile's stack, as pprof's Function names it.
// Pyroscope merges frames by name alone, so the names follow its own eBPF
// profiler's: a Python frame is "file.py Class.func", a native one its
// symbol.
type frame struct{ name, file string }

// Frames gpuprof adds to a stack: they stand for no code of the target.
var (
	gilFrame     = frame{name: "[GIL]"}          // taking the GIL back after a wait
	otherStacks  = frame{name: "[other stacks]"} // stacks past a window's bound
	unknownFrame = frame{name: "[unknown]"}      // a sample with no frame to show
)

func pyFrame(f events.PyFrame) frame {
	return frame{name: path.Base(f.File) + " " + f.Func, file: f.File}
}

func nativeFrame(f events.NativeFrame) frame {
	if f.Func != "" {
		return frame{name: f.Func, file: f.Module}
	}
	return frame{name: fmt.Sprintf("%s+0x%x", f.Module, f.Offset), file: f.Module}
}

// stackOf is a sample's stack, leaf first as pprof's Sample.Location is:
// the native frames from the innermost up to where the interpreter's own
// code begins (what runs under the Python call: torch's C++), then the
// Python frames. The frame-pointer walk stops being worth anything at
// the first address no file maps (JIT code, or a broken chain): native
// frames end there, and where the Python frames show no interpreter frame
// below them, that is all the native stack there is. Without Python
// frames every native frame up to such an address is kept, the
// interpreter's too. An empty stack is "[unknown]", so totals hold.
func stackOf(py []events.PyFrame, native []events.NativeFrame) []frame {
	out := make([]frame, 0, len(py)+len(native))
	for _, n := range native {
		if n.Module == "" || len(py) > 0 && n.Interp {
			break
		}
		out = append(out, nativeFrame(n))
	}
	for _, f := range py {
		out = append(out, pyFrame(f))
	}
	if len(out) == 0 {
		out = append(out, unknownFrame)
	}
	return out
}

// withLeaf puts f under the stack's innermost frame.
func withLeaf(f frame, stack []frame) []frame {
	return append([]frame{f}, stack...)
}

// kernelFrame is the GPU profile's leaf naming a launch's kernel: its
// demangled name without parameters (templates kept: they say which
// operator an elementwise kernel runs), marked as a kernel, not a host
// function of that name.
func kernelFrame(name string) frame {
	return frame{name: "[kernel] " + demangle.Filter(name, demangle.NoParams), file: "[gpu]"}
}

// stackKey is a stack's identity within a window.
func stackKey(stack []frame) string {
	var b strings.Builder
	for _, f := range stack {
		b.WriteString(f.name)
		b.WriteByte(0)
		b.WriteString(f.file)
		b.WriteByte(0)
	}
	return b.String()
}
