package pymem

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/internal/testenv"
)

// functionsOut is the JSON line of testdata/python/functions.py.
type functionsOut struct {
	PID       int    `json:"pid"`
	Minor     int    `json:"minor"`
	Runtime   uint64 `json:"runtime"`
	Functions map[string]struct {
		Code      uint64   `json:"code"`
		Entry     uint64   `json:"entry"`
		EntryOp   byte     `json:"entry_op"`
		Returns   []uint64 `json:"returns"`
		ReturnOps []byte   `json:"return_ops"`
	} `json:"functions"`
}

// startFunctions runs functions.py under python and reads what it says of
// its functions, once the 3.11+ interpreter has specialised them.
func startFunctions(t *testing.T, python string) (*script, *Reader, functionsOut) {
	t.Helper()
	s := runScript(t, python, "functions.py")
	var out functionsOut
	s.line(t, &out)
	r, err := NewReader(out.PID, out.Minor)
	if err != nil {
		t.Fatal(err)
	}
	return s, r, out
}

// TestFunction finds each of functions.py's functions and holds the code
// object, entry and returns to what the interpreter and dis say, and the
// bytes there to the opcodes they must be.
func TestFunction(t *testing.T) {
	testenv.RequireRoot(t)
	eachPython(t, func(t *testing.T, python string) {
		_, r, out := startFunctions(t, python)
		ops := opTables[out.Minor]
		for _, key := range sortedKeys(out.Functions) {
			want := out.Functions[key]
			module, qualname, _ := strings.Cut(key, ":")
			f, err := r.Function(out.Runtime, module, qualname)
			if err != nil {
				t.Errorf("%s: %v", key, err)
				continue
			}
			if f.Module != module || f.Qualname != qualname || f.Code != want.Code {
				t.Errorf("%s: found %s.%s, code %#x; id(code) is %#x", key, f.Module, f.Qualname, f.Code, want.Code)
				continue
			}
			// The names a frame running it shows (Code), read twice: the
			// second from the cache. Its qualname ends the path it was
			// found by (json.dumps, through __main__'s json, is "dumps");
			// 3.10 has co_name only.
			wantFunc := qualname
			if out.Minor == 10 {
				wantFunc = qualname[strings.LastIndexByte(qualname, '.')+1:]
			}
			for range 2 {
				c, err := r.Code(f.Code, time.Now())
				if err != nil || c.Func == "" || c.File == "" || c.Func != wantFunc && !strings.HasSuffix(wantFunc, "."+c.Func) {
					t.Errorf("%s: Code = %+v, %v; want %s and its file", key, c, err, wantFunc)
				}
			}
			if f.EntryIsResume != (out.Minor >= 11) {
				t.Errorf("%s: EntryIsResume %v on 3.%d", key, f.EntryIsResume, out.Minor)
			}
			start := bytecodeStart(t, r, f.Code)
			var returns []uint64
			for _, a := range f.Returns {
				returns = append(returns, a-start)
			}
			if f.Entry-start != want.Entry || !slices.Equal(returns, want.Returns) {
				t.Errorf("%s: entry at %d, returns at %v; dis says %d, %v", key, f.Entry-start, returns, want.Entry, want.Returns)
				continue
			}
			// The bytes there, read again: what the script saw, and of
			// the family pymem looked for.
			checkOp(t, r, key+" entry", f.Entry, want.EntryOp, ops, out.Minor >= 11, opResume)
			for i, a := range f.Returns {
				checkOp(t, r, key+" return", a, want.ReturnOps[i], ops, true, opReturn)
			}
			t.Logf("%s: entry +%d, %d returns", key, f.Entry-start, len(f.Returns))
		}
	})
}

// bytecodeStart is where the code object's running bytecode starts.
func bytecodeStart(t *testing.T, r *Reader, code uint64) uint64 {
	t.Helper()
	if r.minor >= 11 {
		return code + r.l.CodeAdaptive
	}
	b, err := r.ptr(code + r.l.CodeCode)
	if err != nil {
		t.Fatal(err)
	}
	return b + r.l.BytesData
}

// checkOp reads the opcode at addr and holds it to want and, if family,
// to kind.
func checkOp(t *testing.T, r *Reader, what string, addr uint64, want byte, ops *[256]opInfo, family bool, kind opKind) {
	t.Helper()
	var b [1]byte
	if err := r.read(addr, b[:]); err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if b[0] != want {
		t.Errorf("%s: opcode %d at %#x, the script read %d", what, b[0], addr, want)
	}
	if family && ops[b[0]].kind != kind {
		t.Errorf("%s: opcode %d at %#x is %q", what, b[0], addr, ops[b[0]].base)
	}
}

// TestFunctionErrors asks for what is no Python function, or no
// function pymem can time: each a clear error, never a panic.
func TestFunctionErrors(t *testing.T) {
	testenv.RequireRoot(t)
	eachPython(t, func(t *testing.T, python string) {
		s, r, out := startFunctions(t, python)
		for _, c := range []struct{ module, qualname, want string }{
			{"no_such_module", "f", "module no_such_module is not in sys.modules"},
			{"__main__", "no_such_function", "__main__ has no attribute no_such_function"},
			{"__main__", "Loader.no_such_method", "__main__.Loader has no attribute no_such_method"},
			{"__main__", "gen", "__main__.gen is a generator function"},
			{"__main__", "coro", "__main__.coro is a coroutine function"},
			{"__main__", "agen", "__main__.agen is an async generator function"},
			{"__main__", "Loader.now", "pymem: __main__.Loader.now is a builtin_function_or_method, not a Python function"},
			{"__main__", "Loader", "__main__.Loader is a type, not a Python function"},
			{"__main__", "CONSTANT", "__main__.CONSTANT is a int, not a Python function"},
			{"__main__", "plain.x", "__main__.plain is a function, neither a class nor a module"},
			{"__main__", "with_cell.<locals>.inner", "nested function"},
			{"__main__", "wraps_builtin", "__main__.wraps_builtin wraps a builtin_function_or_method (its __wrapped__), not a Python function"},
			{"__main__", "", "bad function name"},
			{"", "plain", "bad function name"},
			{"__main__", "Loader..fetch", "bad function name"},
		} {
			f, err := r.Function(out.Runtime, c.module, c.qualname)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Function(%q, %q) = %+v, %v; want an error saying %q", c.module, c.qualname, f, err, c.want)
			} else {
				t.Logf("%v", err)
			}
		}
		code := out.Functions["__main__:plain"].Code
		for _, rt := range []uint64{0, 8, 0x1001, 0xdead_beef_0000, 1 << 56, ^uint64(0) - 7,
			out.Runtime + 8, out.Runtime - 64, code} {
			if f, err := r.Function(rt, "__main__", "plain"); err == nil {
				t.Errorf("Function with _PyRuntime at %#x (it is at %#x) = %+v, no error", rt, out.Runtime, f)
			} else {
				t.Logf("runtime %#x: %v", rt, err)
			}
		}
		s.cmd.Process.Kill()
		s.cmd.Wait()
		if f, err := r.Function(out.Runtime, "__main__", "plain"); err == nil {
			t.Errorf("Function in an exited process = %+v, no error", f)
		}
	})
}
