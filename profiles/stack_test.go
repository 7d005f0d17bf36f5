package profiles

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

// TestStackComposition: a mixed stack is the Python frames with the
// native code under the innermost one, cut where the interpreter's own
// frames begin; a broken frame-pointer chain ends the native part at the
// first unmapped address.
func TestStackComposition(t *testing.T) {
	py := []events.PyFrame{{Func: "Model.forward", File: "/job/model.py"}, {Func: "train", File: "/job/train.py"}}
	gemm := events.NativeFrame{Func: "at::native::addmm_out", Module: "libtorch_cpu.so"}
	stripped := events.NativeFrame{Module: "libcublas.so.12", Offset: 0x1a2b}
	interp := events.NativeFrame{Func: "_PyEval_EvalFrameDefault", Module: "libpython3.12.so.1.0", Interp: true}
	garbage := events.NativeFrame{Offset: 0xdead}
	for _, c := range []struct {
		name   string
		py     []events.PyFrame
		native []events.NativeFrame
		want   string // root first
	}{
		{"mixed", py, []events.NativeFrame{stripped, gemm, interp, {Func: "main", Module: "python3.12"}},
			"train.py train;model.py Model.forward;at::native::addmm_out;libcublas.so.12+0x1a2b"},
		{"python, chain broken", py, []events.NativeFrame{gemm, garbage, interp},
			"train.py train;model.py Model.forward;at::native::addmm_out"},
		{"native thread", nil, []events.NativeFrame{gemm, interp, {Func: "start_thread", Module: "libc.so.6"}, garbage, {Func: "clone3", Module: "libc.so.6"}},
			"start_thread;_PyEval_EvalFrameDefault;at::native::addmm_out"},
		{"nothing to show", nil, []events.NativeFrame{garbage}, "[unknown]"},
	} {
		stack := stackOf(c.py, c.native)
		var got []string
		for _, f := range stack {
			got = append(got, f.name)
		}
		slices.Reverse(got)
		if g := strings.Join(got, ";"); g != c.want {
			t.Errorf("%s: %s, want %s", c.name, g, c.want)
		}
	}
	if f := pyFrame(py[0]); f.file != "/job/model.py" {
		t.Errorf("Python frame's file %q, want the full path", f.file)
	}
	if f := nativeFrame(stripped); f.file != "libcublas.so.12" {
		t.Errorf("native frame's file %q, want its module", f.file)
	}
}

func TestKernelFrame(t *testing.T) {
	for mangled, want := range map[string]string{
		"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_": "[kernel] at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >",
		"_Z10add_kernelPfS_i":    "[kernel] add_kernel",
		"triton_poi_fused_add_0": "[kernel] triton_poi_fused_add_0",
	} {
		if got := kernelFrame(mangled).name; got != want {
			t.Errorf("%s: %s, want %s", mangled, got, want)
		}
	}
}
