package pymem

import (
	"fmt"
	"strings"
)

// Function is a Python function's code as the target's interpreter runs
// it. gpuprof times its calls with hardware watchpoints on these bytes:
// the interpreter reads an instruction's opcode byte each time it
// executes it, and the addresses do not move while the code object lives
// (3.11+ rewrite the opcodes in place, never the layout).
type Function struct {
	Module, Qualname string
	Code             uint64 // the code object's address
	// Entry is the address of the opcode byte read once as each call
	// starts. EntryIsResume: 3.11+, Entry is RESUME with oparg 0, executed
	// only when a call starts; 3.10, the first instruction, which a loop
	// can jump back to. A read/write watchpoint there can fire twice in
	// one call: 3.12+ execute RESUME again when sys.monitoring changed
	// since the code last ran, and 3.13's RESUME stores RESUME_CHECK into
	// the byte whenever it runs, which it does (after RESUME_CHECK) on a
	// call that finds the eval breaker set: a signal, a GIL drop request,
	// a pending GC. 3.11 rewrites it once, when it quickens the code.
	Entry         uint64
	EntryIsResume bool
	// Returns are the addresses of the opcode byte of every return
	// instruction (RETURN_VALUE, and RETURN_CONST on 3.12+), in order. A
	// call that ends by raising passes none of them; a function that
	// always raises has none.
	Returns []uint64
}

// Function finds module.qualname in sys.modules of the process and reads
// where its bytecode starts and returns. runtime is the address of
// _PyRuntime in the target. qualname is the function's __qualname__:
// "f", "Class.method", "Outer.Inner.method"; a module attribute that is a
// module may be a step ("json.dumps" in a module that imported json).
// A function decorated with functools.wraps is followed to the function
// it wraps (__wrapped__): the wrapper's code is shared by everything its
// decorator wrapped. The function found is the one the name refers to
// now: rebinding the name later does not move Function's addresses.
func (r *Reader) Function(runtime uint64, module, qualname string) (*Function, error) {
	name := module + "." + qualname
	if strings.Contains(qualname, "<locals>") {
		return nil, fmt.Errorf("pymem: %s is a nested function: each call of the function around it makes a new one, which no module or class holds (time the enclosing function instead)", name)
	}
	parts, err := nameParts(module, qualname)
	if err != nil {
		return nil, err
	}
	fn, err := r.findFunction(runtime, module, parts)
	if err != nil {
		return nil, fmt.Errorf("pymem: %w", err)
	}
	code, err := r.ptr(fn + r.l.FuncCode)
	if err == nil {
		err = r.checkType(code, "code")
	}
	if err != nil {
		return nil, fmt.Errorf("pymem: %s: func_code: %w", name, err)
	}
	var b [4]byte
	if err := r.read(code+r.l.CodeFlags, b[:]); err != nil {
		return nil, fmt.Errorf("pymem: %s: co_flags: %w", name, err)
	}
	if kind := r.resumable(uint64(le.Uint32(b[:]))); kind != "" {
		return nil, fmt.Errorf("pymem: %s is %s: its RESUME runs each time it resumes, not once a call", name, kind)
	}
	f, err := r.scanCode(code)
	if err != nil {
		return nil, fmt.Errorf("pymem: %s: %w", name, err)
	}
	f.Module, f.Qualname = module, qualname
	return f, nil
}

// resumable names what code with co_flags flags is when its frames are
// suspended and resumed: then Entry would count resumptions, not calls.
func (r *Reader) resumable(flags uint64) string {
	l := r.l
	switch {
	case flags&l.CoAsyncGenerator != 0:
		return "an async generator function"
	case flags&(l.CoCoroutine|l.CoIterableCoroutine) != 0:
		return "a coroutine function"
	case flags&l.CoGenerator != 0:
		return "a generator function"
	}
	return ""
}

// scanCode reads the bytecode of the code object at code: where a call
// enters it and where it returns.
func (r *Reader) scanCode(code uint64) (*Function, error) {
	start, bc, err := r.bytecode(code)
	if err != nil {
		return nil, err
	}
	entry, returns, err := scan(r.minor, bc)
	if err != nil {
		return nil, fmt.Errorf("bytecode at %#x: %w", start, err)
	}
	f := &Function{Code: code, Entry: start + uint64(entry), EntryIsResume: r.minor >= 11}
	for _, off := range returns {
		f.Returns = append(f.Returns, start+uint64(off))
	}
	return f, nil
}

// nameParts splits qualname into the names looked up below module,
// refusing an empty or overlong one.
func nameParts(module, qualname string) ([]string, error) {
	parts := strings.Split(qualname, ".")
	for _, p := range append([]string{module}, parts...) {
		if p == "" || len(p) > maxName {
			return nil, fmt.Errorf("pymem: bad function name %q", module+"."+qualname)
		}
	}
	return parts, nil
}
